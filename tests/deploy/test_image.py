"""The Containerfile agrees with the manifests (user, ports, entry points) and the servers' default
address is loopback unless the image's KVQ_LISTEN_HOST says otherwise. `make image` builds and runs
the image itself (buildah, minutes: not part of the test run)."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import kvq

ROOT = Path(__file__).resolve().parents[2]
CONTAINERFILE = (ROOT / "Containerfile").read_text()
BASE_RENDER = ROOT / "deploy" / "kubernetes" / "base" / "generated" / "kafka-volume-quotas.yaml"


def stages() -> dict[str, str]:
    """Stage name -> its instructions."""
    parts = re.split(r"^FROM \S+ AS (\S+)\n", CONTAINERFILE, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def pods() -> list[dict]:
    """The exporter's and the enforcer's Deployments the manifests ship."""
    docs = yaml.safe_load_all(BASE_RENDER.read_text())
    return [d for d in docs if d and d["kind"] in ("Deployment", "StatefulSet")]


def test_default_target_is_the_non_root_server_image() -> None:
    named = stages()
    assert list(named)[-1] == "kvq", "the last stage is what a plain build produces"
    workloads = pods()
    assert len(workloads) == 2
    uids = {p["spec"]["template"]["spec"]["securityContext"]["runAsUser"] for p in workloads}
    (uid,) = uids
    for target in ("kvq", "backfill"):
        assert f"USER {uid}:{uid}" in named[target]
    assert f"--uid {uid}" in named["runtime"]
    assert "KVQ_LISTEN_HOST=0.0.0.0" in named["runtime"]
    ports = {
        c["ports"][0]["containerPort"]
        for p in workloads
        for c in p["spec"]["template"]["spec"]["containers"]
    }
    assert re.search(r"^EXPOSE (.*)$", named["kvq"], re.M).group(1).split() == [
        str(p) for p in sorted(ports)
    ]


def test_entry_points_are_the_packages_scripts() -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    named = stages()
    assert '"kvq-backfill"' in named["backfill"]
    assert "/opt/kvq" in named["backfill"] and "requirements-spark.lock" in named["build-backfill"]
    assert '"kvq-exporter"' in named["kvq"]
    assert {"kvq-exporter", "kvq-enforcer", "kvq-backfill"} <= scripts.keys()


def defaults(env: dict[str, str]) -> list[str]:
    code = (
        "from enforcer.settings import EnforcerSettings\n"
        "from exporter.settings import ExporterSettings\n"
        "for cls in (ExporterSettings, EnforcerSettings):\n"
        "    print([s.default for s in cls.declared() if s.key.endswith('.listen')][0])\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, timeout=60
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.split()


def test_servers_listen_on_loopback_unless_the_image_says_otherwise() -> None:
    assert defaults({"PATH": "/usr/bin:/bin"}) == ["127.0.0.1:9898", "127.0.0.1:9899"]
    image_env = {"PATH": "/usr/bin:/bin", "KVQ_LISTEN_HOST": "0.0.0.0"}
    assert defaults(image_env) == ["0.0.0.0:9898", "0.0.0.0:9899"]


# --- what the image says about itself: labels, lock files, SBOM, revision ---

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
OCI = "org.opencontainers.image."
TARGETS = ("kvq", "backfill")
LOCKS = {"requirements.lock": (), "requirements-spark.lock": ("spark",)}
"""Each lock file and the extras it holds besides pyproject's dependencies."""
SBOM_TOOL_IN = ROOT / "deploy" / "image" / "sbom-tool.in"


def instructions() -> list[str]:
    """The Containerfile's instructions, one per item, continuation lines joined, no comments."""
    lines = [line for line in CONTAINERFILE.splitlines() if not line.lstrip().startswith("#")]
    return [i for i in re.sub(r"\\\n\s*", " ", "\n".join(lines)).splitlines() if i.strip()]


def build_args() -> dict[str, str]:
    """The ARGs before the first FROM with their defaults."""
    found = {}
    for instruction in instructions():
        if instruction.startswith("FROM "):
            return found
        name, _, default = instruction.removeprefix("ARG ").partition("=")
        found[name] = default
    return found


def stage_instructions(target: str) -> list[str]:
    """The instructions a target is made of: its base stages' first, then its own."""
    own: dict[str, list[str]] = {}
    base: dict[str, str] = {}
    current = None
    for instruction in instructions():
        if match := re.match(r"FROM (\S+) AS (\S+)$", instruction):
            current = match[2]
            base[current], own[current] = match[1], []
        elif current:
            own[current].append(instruction)
    chain = [target]
    while base[chain[0]] in own:
        chain.insert(0, base[chain[0]])
    return [i for stage in chain for i in own[stage]]


def labels(target: str) -> dict[str, str]:
    pairs = [
        shlex.split(i.removeprefix("LABEL "))
        for i in stage_instructions(target)
        if i.startswith("LABEL ")
    ]
    return dict(pair.split("=", 1) for words in pairs for pair in words)


@pytest.mark.parametrize("target", TARGETS)
def test_the_image_carries_the_oci_labels(target) -> None:
    """version, revision (the build arguments build.sh sets from pyproject.toml and git), source,
    licenses; build_info's revision comes from the same argument."""
    found = {k.removeprefix(OCI): v for k, v in labels(target).items() if k.startswith(OCI)}
    assert {"version", "revision", "source", "licenses", "title"} <= found.keys()
    assert found["version"] == "${VERSION}" and found["revision"] == "${REVISION}"
    assert build_args()["VERSION"] == PYPROJECT["version"]
    assert build_args()["REVISION"] == "unknown"
    assert found["source"] == PYPROJECT["urls"]["Source"]
    assert found["licenses"] == PYPROJECT["license"]
    assert f"ENV {kvq.REVISION_ENV}=${{REVISION}}" in stage_instructions(target)


def test_python_packages_come_only_from_the_lock_files() -> None:
    """Every pip install checks hashes against a lock file the repository carries, except kvq's
    own wheel, which adds no package (--no-deps) and is checked against them (pip check)."""
    installs = [i for t in TARGETS for i in stage_instructions(t) if "pip install" in i]
    installs += [i for i in instructions() if "pip install" in i]
    for instruction in set(installs):
        for command in re.findall(r"pip install ([^&]*)", instruction):
            words = command.split()
            if "--require-hashes" in words:
                lock = words[words.index("-r") + 1].removeprefix("/src/")
                assert (ROOT / lock).is_file(), lock
            else:
                assert words[0] == "--no-deps" and words[1].startswith("/wheels/"), command
    build = " ".join(stage_instructions("build"))
    assert "-r /src/requirements.lock" in build and "pip check" in build
    assert "-r /src/requirements-spark.lock" in " ".join(stage_instructions("build-backfill"))


def locked(path: Path) -> dict[str, tuple[str, list[str], list[str]]]:
    """name -> (version, hashes, what required it) of a `uv pip compile --generate-hashes` file."""
    entries = {}
    text = path.read_text()
    for block in re.split(r"\n(?=[a-z0-9])", text.split("\n", 2)[2]):
        match = re.match(r"([a-z0-9][a-z0-9._-]*)==(\S+)", block)
        assert match, f"{path.name}: not an exact pin: {block.splitlines()[0]}"
        via = re.findall(r"#\s+(?:via\s+)?(\S.*)$", block, re.M)
        entries[match[1]] = (match[2], re.findall(r"--hash=sha256:[0-9a-f]{64}", block), via)
    return entries


@pytest.mark.parametrize("lock", LOCKS)
def test_the_lock_file_is_pyprojects_dependencies(lock) -> None:
    """Exactly pyproject.toml's dependencies (and the lock's extras) are its direct entries, each
    locked at a version pyproject allows; every entry has hashes (pip --require-hashes)."""
    entries = locked(ROOT / lock)
    wanted = [Requirement(r) for r in PYPROJECT["dependencies"]]
    for extra in LOCKS[lock]:
        wanted += [Requirement(r) for r in PYPROJECT["optional-dependencies"][extra]]
    direct = {
        name for name, (_, _, via) in entries.items() if any("pyproject.toml" in v for v in via)
    }
    assert direct == {canonicalize_name(r.name) for r in wanted}
    for requirement in wanted:
        version, _, _ = entries[canonicalize_name(requirement.name)]
        assert requirement.specifier.contains(version, prereleases=True), (requirement, version)
    assert all(hashes for _, hashes, _ in entries.values())


def test_the_backfill_lock_holds_the_exporters_packages_at_the_same_versions() -> None:
    base = locked(ROOT / "requirements.lock")
    spark = locked(ROOT / "requirements-spark.lock")
    assert {name: spark[name][0] for name in base} == {n: v for n, (v, _, _) in base.items()}


def test_the_sbom_tool_is_locked_and_the_tests_run_the_same_version() -> None:
    (pinned,) = [line for line in SBOM_TOOL_IN.read_text().splitlines() if "==" in line]
    name, version = pinned.split("==")
    assert locked(SBOM_TOOL_IN.with_suffix(".lock"))[name][0] == version
    assert pinned in PYPROJECT["optional-dependencies"]["test"]


def distributions(python: str) -> dict[str, str]:
    code = (
        "import importlib.metadata as m, json\n"
        "print(json.dumps({d.metadata['Name']: d.version for d in m.distributions()}))"
    )
    result = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=60)
    return {canonicalize_name(n): v for n, v in json.loads(result.stdout).items()}


def test_the_sbom_step_lists_every_package_of_the_environment(tmp_path) -> None:
    """deploy/image/sbom.sh as the build runs it, on this test's own environment: CycloneDX 1.6
    JSON, root component kafka-volume-quotas, every installed distribution at its version, and
    neither a timestamp nor a random serial number (two builds of one commit write the same)."""
    output = tmp_path / "sbom" / "sbom.cdx.json"
    tool = Path(sys.executable).parent / "cyclonedx-py"
    result = subprocess.run(
        [str(ROOT / "deploy" / "image" / "sbom.sh"), sys.executable, str(output)],
        capture_output=True,
        text=True,
        env={"CYCLONEDX_PY": str(tool), "PATH": "/usr/bin:/bin"},
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert [p.name for p in output.parent.iterdir()] == ["sbom.cdx.json"]
    bom = json.loads(output.read_text())
    assert (bom["bomFormat"], bom["specVersion"]) == ("CycloneDX", "1.6")
    assert "serialNumber" not in bom and "timestamp" not in bom["metadata"]
    root = bom["metadata"]["component"]
    assert (root["name"], root["version"]) == (PYPROJECT["name"], PYPROJECT["version"])
    assert root["licenses"][0]["license"]["id"] == PYPROJECT["license"]
    listed = {canonicalize_name(c["name"]): c["version"] for c in bom["components"]}
    expected = distributions(sys.executable)
    expected.pop(PYPROJECT["name"], None)  # the root component
    assert listed == expected
    assert all(c["purl"].startswith("pkg:pypi/") for c in bom["components"])
