"""`kvq-exporter --check-config`: effective config (secrets masked), or the errors and exit 2."""

import subprocess
import sys

P = "client.quota.callback.static."


def run(*args):
    return subprocess.run(
        [sys.executable, "-m", "exporter.cli", *args], capture_output=True, text=True, timeout=60
    )


def test_prints_effective_configuration_with_secrets_masked(tmp_path):
    path = tmp_path / "kvq.properties"
    path.write_text(
        f"{P}kafka.admin.bootstrap.servers=kafka-0:9092\n"
        f"{P}kafka.admin.sasl.jaas.config=PlainLoginModule required "
        'username="u" password="hunter2";\n'
        f"{P}storage.per.volume.limit.min.available.ratio=0.05\n"
        f"{P}storage.check-interval=30\n"
    )
    result = run("--config", str(path), "--check-config", "--cluster-name", "eu-1")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert f"{P}storage.check.interval=PT30S" in lines
    assert f"{P}throttle.factor.validity.duration=PT5M" in lines
    assert "kvq.cluster.name=eu-1" in lines
    assert f"{P}kafka.admin.sasl.jaas.config=********" in lines
    assert "hunter2" not in result.stdout + result.stderr
    assert "deprecated" in result.stderr


def test_prints_every_error_and_exits_2_without_traceback(tmp_path):
    path = tmp_path / "kvq.properties"
    path.write_text(f"{P}throttle.factor.fallback=2\n")
    result = run("--config", str(path), "--check-config")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert f"{P}throttle.factor.fallback=2: must be a number from 0.0 to 1.0" in result.stderr
    assert f"{P}kafka.admin.bootstrap.servers is required" in result.stderr
    assert "exactly one limit must be configured" in result.stderr


def test_missing_file_exits_2_naming_it(tmp_path):
    result = run("--config", str(tmp_path / "nope.properties"), "--check-config")
    assert result.returncode == 2
    assert "nope.properties: no such file" in result.stderr


def test_help_teaches_the_property_names():
    result = run("--help")
    assert result.returncode == 0
    assert "storage.per.volume.limit.min.available.ratio" in result.stdout
    assert "--check-config" in result.stdout
