"""Validate rendered manifests offline with kubeconform, unknown fields rejected.

    python -m devkit.kubeconform FILE...   # or `-` for stdin, e.g. helm template ... | ... -

Schemas (no network): the Kubernetes ones kubernetes-validate ships (its `-local-strict` set, every
object closed), made standalone here for the kinds the manifests hold (kubeconform cannot follow
their `/api/_definitions.json` references); and the Prometheus Operator's CRDs that `make tools`
copies from its Go module, turned into JSON schemas here with every object that lists its
properties closed too (`additionalProperties: false`: the API server's pruning would drop the
rest silently). Kinds without a schema (e.g. Strimzi's KafkaUser) fail unless named in `skip`.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import kubernetes_validate
import yaml

ROOT = Path(__file__).resolve().parent.parent
TOOLS_BIN = Path(sys.executable).parent
CRDS = TOOLS_BIN.parent / "share" / "prometheus-operator-crds"
KUBERNETES_SCHEMAS = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"
CRD_LOCATION = "{{ .Group }}/{{ .ResourceKind }}_{{ .ResourceAPIVersion }}.json"
KUBERNETES_LOCATION = "kubernetes/{{ .ResourceKind }}{{ .KindSuffix }}.json"
DEFINITIONS_REF = "/api/_definitions.json#/$defs/"


def kubernetes_version() -> str:
    """The newest Kubernetes version kubernetes-validate has schemas of, e.g. 1.37.0."""
    return kubernetes_validate.latest_version().removeprefix("v")


def _closed(schema: object) -> object:
    """The schema with every object that lists properties refusing others."""
    if isinstance(schema, list):
        return [_closed(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    closed = {key: _closed(value) for key, value in schema.items()}
    if (
        "properties" in schema
        and "additionalProperties" not in schema
        and not schema.get("x-kubernetes-preserve-unknown-fields")
    ):
        closed["additionalProperties"] = False
    return closed


class _CrdLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """YAML 1.1 reads a bare `=` (an enum value in the CRDs) as the `value` tag: a string here."""


_CrdLoader.add_constructor("tag:yaml.org,2002:value", yaml.SafeLoader.construct_yaml_str)


def write_crd_schemas(crd_dir: Path, out: Path) -> list[Path]:
    """One closed JSON schema per CRD version, at out/<group>/<kind>_<version>.json."""
    if not list(crd_dir.glob("*.yaml")):
        raise FileNotFoundError(f"no CRDs in {crd_dir}: run `make tools`")
    written = []
    for path in sorted(crd_dir.glob("*.yaml")):
        crd = yaml.load(path.read_text(), Loader=_CrdLoader)  # noqa: S506
        group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"].lower()
        for version in crd["spec"]["versions"]:
            target = out / group / f"{kind}_{version['name']}.json"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(json.dumps(_closed(version["schema"]["openAPIV3Schema"])))
            written.append(target)
    return written


def _schema_name(kind: str, api_version: str) -> str:
    """kubeconform's {{ .ResourceKind }}{{ .KindSuffix }}.json: deployment-apps-v1.json."""
    group, _, version = api_version.rpartition("/")
    suffix = f"-{group.split('.')[0]}-{version}" if group else f"-{version}"
    return f"{kind.lower()}{suffix}.json"


def write_kubernetes_schemas(manifests: str, out: Path) -> None:
    """A standalone schema (the definitions it uses inlined) for each built-in kind in the
    manifests, at out/kubernetes/<kind>-<group>-<version>.json."""
    source = KUBERNETES_SCHEMAS / f"v{kubernetes_version()}-local-strict"
    definitions = json.loads((source / "_definitions.json").read_text())["$defs"]
    (out / "kubernetes").mkdir(parents=True, exist_ok=True)
    for doc in yaml.safe_load_all(manifests):
        if not isinstance(doc, dict) or "kind" not in doc:
            continue
        name = _schema_name(doc["kind"], doc.get("apiVersion", ""))
        if (source / name).exists() and not (out / "kubernetes" / name).exists():
            text = (source / name).read_text().replace(DEFINITIONS_REF, "#/$defs/")
            schema = json.loads(text)
            schema["$defs"] = _used_definitions(text, definitions)
            (out / "kubernetes" / name).write_text(json.dumps(schema))


def _used_definitions(text: str, definitions: dict[str, dict]) -> dict[str, dict]:
    """Every definition the schema text refers to, and those they refer to."""
    used: dict[str, dict] = {}
    pending = re.findall(r'"#/\$defs/([^"]+)"', text)
    while pending:
        name = pending.pop()
        if name not in used:
            used[name] = definitions[name]
            pending += re.findall(r'"#/\$defs/([^"]+)"', json.dumps(definitions[name]))
    return used


def kubeconform(manifests: str, skip: tuple[str, ...] = ()) -> list[str]:
    """kubeconform -strict over the manifests: its error lines, none when everything is valid."""
    with tempfile.TemporaryDirectory(prefix="kvq-schemas-") as where:
        schemas = Path(where)
        write_kubernetes_schemas(manifests, schemas)
        write_crd_schemas(CRDS, schemas)
        return _run(manifests, schemas, skip)


def _run(manifests: str, schemas: Path, skip: tuple[str, ...]) -> list[str]:
    binary = TOOLS_BIN / "kubeconform"
    if not binary.exists():
        raise FileNotFoundError(f"{binary} is missing: run `make tools`")
    command = [
        str(binary),
        "-strict",
        "-summary",
        "-output", "text",
        "-kubernetes-version", kubernetes_version(),
        "-schema-location", str(schemas / KUBERNETES_LOCATION),
        "-schema-location", str(schemas / CRD_LOCATION),
    ]  # fmt: skip
    if skip:
        command += ["-skip", ",".join(skip)]
    result = subprocess.run(command, input=manifests, capture_output=True, text=True, timeout=300)
    lines = (result.stdout + result.stderr).splitlines()
    problems = [line for line in lines if not line.startswith("Summary:")]
    if result.returncode != 0 and not problems:
        problems = [f"kubeconform exited {result.returncode}"]
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", help="manifest files, - for stdin")
    parser.add_argument("--skip", default="", help="comma-separated kinds not to validate")
    args = parser.parse_args(argv)
    text = "\n---\n".join(
        sys.stdin.read() if name == "-" else Path(name).read_text() for name in args.files
    )
    problems = kubeconform(text, tuple(filter(None, args.skip.split(","))))
    for line in problems:
        print(line)
    print("valid" if not problems else f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
