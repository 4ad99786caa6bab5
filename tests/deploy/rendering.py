"""What the tests of deploy/ render and read: the chart (helm template) and the kustomize paths
(kubectl kustomize), and where in the rendered objects the apps' files and settings are."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

from devkit import kubernetes_manifests
from kvq.settings.properties import parse_properties

ROOT = Path(__file__).resolve().parents[2]
CHART = kubernetes_manifests.CHART
THREE_CLUSTERS = CHART / "ci" / "three-clusters-values.yaml"
STRIMZI = CHART / "ci" / "strimzi-values.yaml"
KUSTOMIZATIONS = {
    "kustomize-base": ROOT / "deploy" / "kubernetes",
    "kustomize-strimzi": ROOT / "deploy" / "kubernetes" / "overlays" / "strimzi",
    "kustomize-helm-chart": ROOT / "deploy" / "kubernetes" / "examples" / "helm-chart",
}
HELM_RELEASES: dict[str, tuple[str, tuple[str, ...]]] = {
    "helm-one-cluster": ("kafka-volume-quotas", ()),
    "helm-three-clusters": ("kafka-platform", ("-f", str(THREE_CLUSTERS))),
    "helm-strimzi": ("kafka", ("-f", str(STRIMZI))),
}
"""The release namespace and the values of each chart render."""
SOURCES = sorted(KUSTOMIZATIONS) + sorted(HELM_RELEASES)
CLIS = {"kvq-exporter": "exporter.cli", "kvq-enforcer": "enforcer.cli"}


def documents(text: str) -> list[dict]:
    return [doc for doc in yaml.safe_load_all(text) if doc]


def kustomize_text(path: Path) -> str:
    """kubectl kustomize, with helm for a kustomization that inflates the chart (helmCharts)."""
    helm = ["--enable-helm", "--helm-command", kubernetes_manifests.helm_binary()]
    command = ["kubectl", "kustomize", *helm, str(path)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout


def render_text(source: str) -> str:
    """The manifests of one of SOURCES, as text."""
    if source in KUSTOMIZATIONS:
        return kustomize_text(KUSTOMIZATIONS[source])
    namespace, values = HELM_RELEASES[source]
    return kubernetes_manifests.helm_template(*values, namespace=namespace)


def render(source: str) -> list[dict]:
    return documents(render_text(source))


def namespace_of(source: str, doc: dict) -> str:
    """The object's namespace: kustomize writes it, helm leaves it to the release's (-n)."""
    if source in HELM_RELEASES:
        assert "namespace" not in doc["metadata"]
        return HELM_RELEASES[source][0]
    return doc["metadata"]["namespace"]


def one(docs: list[dict], kind: str, name: str | None = None) -> dict:
    found = [d for d in docs if d["kind"] == kind and name in (None, d["metadata"]["name"])]
    assert len(found) == 1, f"{kind} {name}: {len(found)} found"
    return found[0]


def workloads(docs: list[dict]) -> list[dict]:
    return [d for d in docs if d["kind"] in ("Deployment", "StatefulSet")]


def containers(docs: list[dict]) -> list[tuple[dict, dict]]:
    return [(w, c) for w in workloads(docs) for c in w["spec"]["template"]["spec"]["containers"]]


def command_of(workload: dict) -> str:
    (command,) = workload["spec"]["template"]["spec"]["containers"][0]["command"]
    return command


def arguments(container: dict, flag: str) -> list[str]:
    """Every value the container's args give this flag (`--config a --config b` -> [a, b])."""
    args = container["args"]
    return [args[i + 1] for i, arg in enumerate(args) if arg == flag]


def _volume_files(volume: dict) -> list[tuple[str, str]]:
    """('Kind/name/key', path under the mount) of each file a Secret, ConfigMap or projected
    volume holds; one without items holds every key: ('Kind/name/*', '*')."""
    sources = volume["projected"]["sources"] if "projected" in volume else [volume]
    files = []
    for source in sources:
        if "secret" in source:
            kind, spec = "Secret", source["secret"]
            name = spec.get("secretName") or spec["name"]
        elif "configMap" in source:
            kind, spec = "ConfigMap", source["configMap"]
            name = spec["name"]
        else:
            continue
        for item in spec.get("items") or [{"key": "*", "path": "*"}]:
            files.append((f"{kind}/{name}/{item['key']}", item["path"]))
    return files


def mounted_files(workload: dict) -> dict[str, str]:
    """Path in the container -> 'Kind/name/key' of every file a volume puts there ('Kind/name/*'
    under 'DIR/*' for a volume of every key)."""
    pod = workload["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    files = {}
    for mount in pod["containers"][0]["volumeMounts"]:
        for ref, path in _volume_files(volumes.get(mount["name"], {})):
            files[f"{mount['mountPath']}/{path}"] = ref
    return files


def mounted_file(workload: dict, path: str) -> str | None:
    """'Kind/name/key' of the file at this path in the container, None if nothing is mounted."""
    files = mounted_files(workload)
    directory, file_name = path.rsplit("/", 1)
    whole = files.get(f"{directory}/*")
    return files.get(path) or (whole and whole.removesuffix("*") + file_name)


def is_mounted(workload: dict, path: str) -> bool:
    return mounted_file(workload, path) is not None


def config_files(docs: list[dict], workload: dict) -> list[tuple[str, dict[str, str]]]:
    """The text and properties of every properties file the container's --config names."""
    container = workload["spec"]["template"]["spec"]["containers"][0]
    found = []
    for config_path in arguments(container, "--config"):
        mounted = mounted_file(workload, config_path)
        assert mounted, f"--config {config_path} is not mounted"
        kind, name, key = mounted.split("/")
        text = one(docs, kind, name)["data"][key]
        found.append((text, parse_properties(text)))
    return found
