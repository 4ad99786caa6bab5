"""deploy/kubernetes: what `kubectl kustomize` renders is valid Kubernetes, carries the project's
own rules and dashboard unchanged, and runs the apps with commands, flags, ports they have."""

from __future__ import annotations

import importlib
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from devkit import kubernetes_manifests
from devkit.processes import free_port, http_ok, managed, wait_until
from devkit.prometheus import PROMTOOL
from enforcer.settings import EnforcerSettings
from exporter.settings import ExporterSettings
from kvq.settings.properties import parse_properties

ROOT = Path(__file__).resolve().parents[2]
KUSTOMIZATIONS = {
    "base": ROOT / "deploy" / "kubernetes",
    "strimzi": ROOT / "deploy" / "kubernetes" / "overlays" / "strimzi",
}
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
CLIS = {"kvq-exporter": "exporter.cli", "kvq-enforcer": "enforcer.cli"}
BOOTSTRAP = "client.quota.callback.static.kafka.admin.bootstrap.servers"
CUSTOM_KINDS = {"PrometheusRule", "ServiceMonitor", "AlertmanagerConfig", "KafkaUser"}


def render(path: Path) -> list[dict]:
    result = subprocess.run(
        ["kubectl", "kustomize", str(path)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


@pytest.fixture(scope="module", params=sorted(KUSTOMIZATIONS))
def rendered(request) -> list[dict]:
    return render(KUSTOMIZATIONS[request.param])


def one(docs: list[dict], kind: str, name: str | None = None) -> dict:
    found = [d for d in docs if d["kind"] == kind and name in (None, d["metadata"]["name"])]
    assert len(found) == 1, f"{kind} {name}: {len(found)} found"
    return found[0]


def workloads(docs: list[dict]) -> list[dict]:
    return [d for d in docs if d["kind"] in ("Deployment", "StatefulSet")]


def containers(docs: list[dict]) -> list[tuple[dict, dict]]:
    return [(w, c) for w in workloads(docs) for c in w["spec"]["template"]["spec"]["containers"]]


def test_generated_manifests_are_current() -> None:
    for path, text in kubernetes_manifests.generated().items():
        assert path.read_text() == text, f"run `make manifests`: {path} is stale"


def test_builtin_kinds_validate_against_the_kubernetes_schemas(rendered) -> None:
    version = kubernetes_validate.latest_version()
    builtin = [d for d in rendered if d["kind"] not in CUSTOM_KINDS]
    assert {d["kind"] for d in builtin} >= {"Deployment", "StatefulSet", "Service", "ConfigMap"}
    for doc in builtin:
        kubernetes_validate.validate(doc, version, strict=True)


def test_custom_resources_have_their_required_fields(rendered) -> None:
    """No schemas for these CRDs offline: their required fields, checked here."""
    for doc in rendered:
        if doc["kind"] not in CUSTOM_KINDS:
            continue
        assert doc["metadata"]["name"] and doc["metadata"]["namespace"]
        spec = doc["spec"]
        if doc["kind"] == "ServiceMonitor":
            assert spec["selector"]["matchLabels"] and spec["endpoints"]
            assert all(e["port"] and e["interval"].endswith("s") for e in spec["endpoints"])
        elif doc["kind"] == "PrometheusRule":
            assert all(g["name"] and g["rules"] for g in spec["groups"])
        elif doc["kind"] == "AlertmanagerConfig":
            names = {r["name"] for r in spec["receivers"]}
            assert spec["route"]["receiver"] in names
        elif doc["kind"] == "KafkaUser":
            assert doc["metadata"]["labels"]["strimzi.io/cluster"]
            assert spec["authentication"]["type"] in ("tls", "tls-external", "scram-sha-512")
            for acl in spec["authorization"]["acls"]:
                assert acl["resource"]["type"] in ("topic", "group", "cluster", "transactionalId")
                assert set(acl["operations"]) <= {
                    "Read", "Write", "Create", "Delete", "Alter", "Describe", "ClusterAction",
                    "AlterConfigs", "DescribeConfigs", "IdempotentWrite", "All",
                }  # fmt: skip


def test_prometheus_rule_holds_the_rules_file_unchanged(rendered, tmp_path) -> None:
    """Every group's rules are the file's (every string byte for byte); only the recommended
    group intervals are added. Extracted, they pass `promtool check rules`."""
    rule = one(rendered, "PrometheusRule")
    source = yaml.safe_load((ROOT / "rules" / "kafka-volume-quotas.rules.yml").read_text())
    groups = rule["spec"]["groups"]
    intervals = {g["name"]: g.pop("interval") for g in groups if "interval" in g}
    assert intervals == kubernetes_manifests.GROUP_INTERVALS
    assert groups == source["groups"]
    extracted = tmp_path / "extracted.rules.yml"
    extracted.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
    check = subprocess.run(
        [PROMTOOL, "check", "rules", str(extracted)], capture_output=True, text=True, timeout=60
    )
    assert check.returncode == 0, check.stdout + check.stderr


def test_dashboard_config_map_is_the_dashboard_file(rendered) -> None:
    config_map = one(rendered, "ConfigMap", "kafka-volume-quotas-dashboards")
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    files = sorted((ROOT / "grafana" / "dashboards").glob("*.json"))
    assert config_map["data"] == {path.name: path.read_text() for path in files}
    for text in config_map["data"].values():
        json.loads(text)


def test_every_container_runs_non_root_on_a_read_only_root(rendered) -> None:
    assert len(containers(rendered)) == 2
    for workload, container in containers(rendered):
        pod = workload["spec"]["template"]["spec"]
        security = {**pod.get("securityContext", {}), **container["securityContext"]}
        assert security["runAsNonRoot"] is True
        assert security["runAsUser"] != 0
        assert security["readOnlyRootFilesystem"] is True
        assert security["allowPrivilegeEscalation"] is False
        assert security["capabilities"]["drop"] == ["ALL"]
        assert container["resources"]["requests"] and container["resources"]["limits"]["memory"]


def test_containers_run_the_apps_with_flags_and_ports_they_have(rendered) -> None:
    version = PYPROJECT["project"]["version"]
    for _, container in containers(rendered):
        (command,) = container["command"]
        assert command in PYPROJECT["project"]["scripts"]
        assert container["image"] == f"kafka-volume-quotas:{version}"
        cli = importlib.import_module(CLIS[command])
        args = cli.build_parser().parse_args(container["args"])  # exits on an unknown flag
        _, port = args.listen.rsplit(":", 1)
        (declared,) = container["ports"]
        assert declared["containerPort"] == int(port)
        for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
            if probe in container:
                assert container[probe]["httpGet"]["port"] == declared["name"]


def test_services_and_monitors_reach_the_pods(rendered) -> None:
    for workload in workloads(rendered):
        name = workload["metadata"]["name"]
        pod_labels = workload["spec"]["template"]["metadata"]["labels"]
        service = one(rendered, "Service", name)
        assert service["spec"]["selector"].items() <= pod_labels.items()
        (container,) = workload["spec"]["template"]["spec"]["containers"]
        port_names = {p["name"] for p in container["ports"]}
        assert {p["targetPort"] for p in service["spec"]["ports"]} <= port_names
        monitor = one(rendered, "ServiceMonitor", name)
        assert monitor["spec"]["selector"]["matchLabels"].items() <= (
            service["metadata"]["labels"].items()
        )
        service_ports = {p["name"] for p in service["spec"]["ports"]}
        assert {e["port"] for e in monitor["spec"]["endpoints"]} <= service_ports
        assert all(e["path"] == "/metrics" for e in monitor["spec"]["endpoints"])


def mounted_files(workload: dict) -> dict[str, str]:
    """Path in the container -> 'kind/name/key' of every file a volume puts there."""
    pod = workload["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    files = {}
    for mount in pod["containers"][0]["volumeMounts"]:
        volume = volumes.get(mount["name"], {})
        if "secret" in volume:
            source, name = "Secret", volume["secret"]["secretName"]
            items = volume["secret"].get("items")
        elif "configMap" in volume:
            source, name = "ConfigMap", volume["configMap"]["name"]
            items = volume["configMap"].get("items")
        else:
            continue
        for item in items or [{"key": k, "path": k} for k in ("kvq.properties",)]:
            files[f"{mount['mountPath']}/{item['path']}"] = f"{source}/{name}/{item['key']}"
    return files


def properties_of(rendered: list[dict], workload: dict) -> tuple[str, dict[str, str]]:
    """The text of the properties file the container's --config names, and its properties."""
    container = workload["spec"]["template"]["spec"]["containers"][0]
    config_path = container["args"][container["args"].index("--config") + 1]
    kind, name, key = mounted_files(workload)[config_path].split("/")
    text = one(rendered, kind, name)["data"][key]
    return text, parse_properties(text)


SETTINGS = {"kvq-exporter": ExporterSettings, "kvq-enforcer": EnforcerSettings}


@pytest.fixture(scope="module")
def pem_files(tmp_path_factory) -> dict[str, Path]:
    """A self-signed certificate and its key, as Strimzi's CA and user Secrets hold them."""
    where = tmp_path_factory.mktemp("pem")
    cert, key = where / "cert.pem", where / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]
        + ["-subj", "/CN=kvq", "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return {"cert": cert, "key": key}


@pytest.mark.parametrize("command", sorted(CLIS))
def test_properties_load_with_the_secrets_the_pod_gets(rendered, command, pem_files) -> None:
    """The ConfigMap's properties are a valid configuration for the app once the `${env:...}`
    it names are filled from the container's Secret-backed environment; every file it names is
    mounted into the container (here: PEM files of the same kind stand in for them)."""
    (workload,) = [w for w in workloads(rendered) if w["metadata"]["name"] == command]
    container = workload["spec"]["template"]["spec"]["containers"][0]
    text, properties = properties_of(rendered, workload)
    env = {e["name"] for e in container.get("env", []) if "secretKeyRef" in e["valueFrom"]}
    referenced = {n for v in properties.values() for n in re.findall(r"\$\{env:(\w+)\}", v)}
    assert referenced <= env, "a ${env:...} that the pod does not set from a Secret"
    mounted = mounted_files(workload)
    own = "kvq.enforcer." if command == "kvq-enforcer" else "kvq.exporter."
    for key, value in properties.items():
        if key.endswith(".location") or (key.startswith(own) and key.endswith(".file")):
            assert value in mounted, f"{key}={value} is not mounted"
    stand_ins = {
        key: str(pem_files["key" if key.endswith("key.location") else "cert"])
        for key in properties
        if key.endswith(".location")
    }
    settings = SETTINGS[command].build(
        {**properties, **stand_ins}, "ConfigMap", {name: "from-a-secret" for name in referenced}
    )
    assert settings.config.cluster_name


def test_alertmanager_routes_the_throttle_alert_to_the_enforcer_with_its_token(rendered) -> None:
    config = one(rendered, "AlertmanagerConfig")
    route = config["spec"]["route"]
    (matcher,) = route["matchers"]
    alert = EnforcerSettings.build(
        {BOOTSTRAP: "k:9092"}
        | {"client.quota.callback.static.storage.per.volume.limit.min.available.ratio": "0.1"}
    ).alert_name
    rules = one(rendered, "PrometheusRule")["spec"]["groups"]
    assert alert in {r.get("alert") for g in rules for r in g["rules"]}
    assert (matcher["name"], matcher.get("matchType", "="), matcher["value"]) == (
        "alertname",
        "=",
        alert,
    )
    assert route["groupBy"] == ["cluster"] and route["groupWait"] == "0s"
    (receiver,) = [r for r in config["spec"]["receivers"] if r["name"] == route["receiver"]]
    (webhook,) = receiver["webhookConfigs"]
    assert webhook["sendResolved"] is True
    enforcer = one(rendered, "StatefulSet", "kvq-enforcer")
    service = one(rendered, "Service", "kvq-enforcer")
    (port,) = service["spec"]["ports"]
    name, namespace = service["metadata"]["name"], service["metadata"]["namespace"]
    assert webhook["url"] == f"http://{name}.{namespace}.svc:{port['port']}/webhook"
    assert config["metadata"]["namespace"] == namespace
    credentials = webhook["httpConfig"]["authorization"]["credentials"]
    _, properties = properties_of(rendered, enforcer)
    token_file = properties["kvq.enforcer.auth.bearer.token.file"]
    assert mounted_files(enforcer)[token_file] == (
        f"Secret/{credentials['name']}/{credentials['key']}"
    )


@pytest.mark.integration
def test_each_container_command_serves_its_probes_and_metrics(devcluster, tmp_path) -> None:
    """The base's containers, run as they are written (only the listen address and the files'
    places moved to this test's), answer every probe path and /metrics with 200."""
    docs = render(KUSTOMIZATIONS["base"])
    cluster = devcluster(brokers=2)
    token = tmp_path / "token"
    token.write_text("t0ken\n")
    config = tmp_path / "kvq.properties"
    config.write_text(
        f"{BOOTSTRAP}={cluster.bootstrap}\n"
        "client.quota.callback.static.storage.per.volume.limit.min.available.ratio=0.01\n"
        f"kvq.enforcer.auth.bearer.token.file={token}\n"
        f"kvq.enforcer.journal={tmp_path / 'journal.sqlite3'}\n"
    )
    for workload, container in containers(docs):
        args = list(container["args"])
        args[args.index("--config") + 1] = str(config)
        port = free_port()
        args[args.index("--listen") + 1] = f"127.0.0.1:{port}"
        argv = [sys.executable, "-m", CLIS[container["command"][0]], *args]
        paths = {
            container[p]["httpGet"]["path"]
            for p in ("livenessProbe", "readinessProbe", "startupProbe")
            if p in container
        }
        paths |= {"/metrics"}
        name = workload["metadata"]["name"]
        with managed(argv, tmp_path / f"{name}.log", cwd=ROOT) as process:
            for path in sorted(paths):
                url = f"http://127.0.0.1:{port}{path}"
                wait_until(lambda url=url: http_ok(url), 30, what=f"{name} {path}")
            assert process.running


def test_strimzi_overlay_is_the_setup_docs_strimzi_describes() -> None:
    """The overlay's KafkaUsers, mounted PEM files and client properties are docs/strimzi.md's."""
    docs = (ROOT / "docs" / "strimzi.md").read_text()
    blocks = re.findall(r"```(yaml|properties)\n(.*?)```", docs, re.S)
    documented_users = [
        d
        for kind, text in blocks
        if kind == "yaml" and "kind: KafkaUser" in text
        for d in yaml.safe_load_all(text)
    ]
    rendered = render(KUSTOMIZATIONS["strimzi"])
    users = [d for d in rendered if d["kind"] == "KafkaUser"]
    assert documented_users, "docs/strimzi.md shows no KafkaUser"
    assert sorted((u["metadata"]["name"], u["apiVersion"], u["spec"]) for u in users) == sorted(
        (u["metadata"]["name"], u["apiVersion"], u["spec"]) for u in documented_users
    )
    assert all(u["metadata"]["labels"] == {"strimzi.io/cluster": "my-cluster"} for u in users)
    documented_properties: dict[str, str] = {}
    for kind, text in blocks:
        if kind == "properties":
            documented_properties |= parse_properties(text)
    for workload in workloads(rendered):
        _, properties = properties_of(rendered, workload)
        for key, value in documented_properties.items():
            assert properties.get(key) == value, key
        mounted = mounted_files(workload)
        user = workload["metadata"]["name"]
        assert mounted["/etc/kvq/kafka-user/user.crt"] == f"Secret/{user}/user.crt"
        assert mounted["/etc/kvq/kafka-user/user.key"] == f"Secret/{user}/user.key"
        assert mounted["/etc/kvq/cluster-ca/ca.crt"] == "Secret/my-cluster-cluster-ca-cert/ca.crt"


def test_alertmanager_config_routes_as_the_example_configuration_does() -> None:
    """The AlertmanagerConfig and rules/alertmanager.example.yml recommend the same route."""
    example = yaml.safe_load((ROOT / "rules" / "alertmanager.example.yml").read_text())
    (route,) = [r for r in example["route"]["routes"] if r["receiver"] == "kvq-enforcer"]
    config = one(render(KUSTOMIZATIONS["base"]), "AlertmanagerConfig")["spec"]["route"]
    assert (
        config["groupBy"],
        config["groupWait"],
        config["groupInterval"],
        config["repeatInterval"],
    ) == (route["group_by"], route["group_wait"], route["group_interval"], route["repeat_interval"])
    (receiver,) = [r for r in example["receivers"] if r["name"] == "kvq-enforcer"]
    assert receiver["webhook_configs"][0]["send_resolved"] is True


def test_generated_prometheus_rule_embeds_the_rules_file_byte_for_byte() -> None:
    """The committed PrometheusRule's spec is the rules file's text, indented, plus the interval
    lines of GROUP_INTERVALS (comments included, so a reviewer reads the same file)."""
    text = (kubernetes_manifests.OUT / "prometheusrule.yaml").read_text()
    spec = text.split("\nspec:\n", 1)[1]
    added = {f"interval: {i}" for i in kubernetes_manifests.GROUP_INTERVALS.values()}
    lines = [line for line in spec.splitlines(True) if line.strip() not in added]
    unindented = "".join(line.removeprefix("  ") for line in lines)
    assert unindented == (ROOT / "rules" / "kafka-volume-quotas.rules.yml").read_text()
    assert len(lines) == len(spec.splitlines()) - len(kubernetes_manifests.GROUP_INTERVALS)
