"""What every `kvq-*` command has, as Prometheus exporters do: --version and --log.* flags."""

import os
import platform
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

import kvq

COMMANDS = ("kvq-exporter", "kvq-enforcer", "kvq-backfill", "kvq-devcluster")
BIN = Path(sys.executable).parent


def run(command, *args, env=None):
    return subprocess.run(
        [str(BIN / command), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )


def test_the_version_comes_from_the_package_metadata():
    assert kvq.__version__ == version("kafka-volume-quotas")


@pytest.mark.parametrize("command", COMMANDS)
def test_version_names_the_revision_as_prometheus_exporters_do(command):
    """`node_exporter, version 1.8.2 (branch: HEAD, revision: f1e0e83...)`: the revision is the
    image's (KVQ_REVISION), the one build_info and the landing page show."""
    env = {**os.environ, kvq.REVISION_ENV: "0123abc"}
    result = run(command, "--version", env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        f"{command}, version {kvq.__version__} (revision: 0123abc)",
        f"  python version: {platform.python_version()}",
        f"  platform:       {platform.system().lower()}/{platform.machine()}",
    ]


@pytest.mark.parametrize("command", COMMANDS)
def test_log_flags_are_in_the_help(command):
    result = run(command, "--help")
    assert result.returncode == 0, result.stderr
    assert "--log.level {debug,info,warn,error}" in result.stdout
    assert "--log.format {logfmt,json}" in result.stdout


@pytest.mark.parametrize("command", ("kvq-exporter", "kvq-enforcer", "kvq-backfill"))
def test_a_config_error_names_the_program_not_kvq(command, tmp_path):
    config = tmp_path / "kvq.properties"
    config.write_text("kvq.cluster.name=a b\n")
    (tmp_path / "kafka.jsonl").write_text("")
    archive = ["--archive", str(tmp_path), "--output", str(tmp_path / "out")]
    result = run(command, "--config", str(config), *(archive if command == "kvq-backfill" else ()))
    assert result.returncode == 2
    assert result.stderr.startswith(f"{command}: "), result.stderr
    assert "kvq.cluster.name=a b" in result.stderr


def test_a_devcluster_error_names_the_program(tmp_path):
    (tmp_path / "file").write_text("")
    result = run("kvq-devcluster", "--data-dir", str(tmp_path / "file" / "data"))
    assert result.returncode == 2
    assert result.stderr.startswith("kvq-devcluster: "), result.stderr
