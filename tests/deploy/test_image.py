"""The Containerfile agrees with the manifests (user, ports, entry points) and the servers' default
address is loopback unless the image's KVQ_LISTEN_HOST says otherwise. `make image` builds and runs
the image itself (buildah, minutes: not part of the test run)."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
CONTAINERFILE = (ROOT / "Containerfile").read_text()
BASE_RENDER = ROOT / "deploy" / "kubernetes" / "base" / "generated" / "kafka-volume-quotas.yaml"


def stages() -> dict[str, str]:
    """Stage name -> its instructions."""
    parts = re.split(r"^FROM \S+ AS (\S+)\n", CONTAINERFILE, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def pods() -> list[dict]:
    """The exporter's Deployment and the enforcer's StatefulSet the manifests ship."""
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
    assert '"kvq-backfill"' in named["backfill"] and "[spark]" in named["backfill"]
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
