"""No log level prints a secret: the real exporter and enforcer at `--log.level debug` against a
devcluster with SASL/PLAIN users (kafka-python logs its whole config and its SaslAuthenticate
request at debug), a Prometheus URL with credentials in the enforcer's `--check-config` and its
"not usable" warning, and the backfill's `--prometheus-url`."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from devkit.alertmanager import throttle_webhook
from devkit.processes import ManagedProcess, server_port, wait_until

P = "client.quota.callback.static."
REPO = Path(__file__).resolve().parents[2]
KAFKA_PASSWORD = "Kafka-Pa$$-'quoted'-ünï"
"""A quote and non-ASCII letters: kafka-python logs it escaped, in a bytes repr, too."""
PROMETHEUS_PASSWORD = "Prom-Secret-77"
TOKEN = "webhook-token-3141"
CLUSTER = "secrets"


@pytest.fixture
def dc(devcluster):
    return devcluster(brokers=1, log_dirs_per_broker=1, sasl_users={"alice": KAFKA_PASSWORD})


def sasl_properties(dc, **more: str) -> str:
    jaas = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="alice" password="{KAFKA_PASSWORD}";'
    )
    props = {
        "kvq.cluster.name": CLUSTER,
        P + "kafka.admin.bootstrap.servers": dc.sasl_bootstrap,
        P + "kafka.admin.security.protocol": "SASL_PLAINTEXT",
        P + "kafka.admin.sasl.mechanism": "PLAIN",
        P + "kafka.admin.sasl.jaas.config": jaas,
        P + "storage.per.volume.limit.min.available.ratio": "0.05",
        **more,
    }
    return "".join(f"{k}={v}\n" for k, v in props.items())


def assert_no_secret(text: str) -> None:
    for secret in (KAFKA_PASSWORD, PROMETHEUS_PASSWORD, TOKEN):
        for written in (secret, repr(secret)[1:-1], repr(secret.encode())[2:-1]):
            assert written not in text, f"{written!r} printed"


def test_the_exporter_at_debug_logs_its_sasl_connection_but_never_the_password(tmp_path, dc):
    config = tmp_path / "kvq.properties"
    config.write_text(sasl_properties(dc))
    for fmt in ("logfmt", "json"):
        argv = [sys.executable, "-m", "exporter.cli", "--config", str(config), "--once"]
        result = subprocess.run(
            [*argv, "--log.level", "debug", "--log.format", fmt],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=REPO,
        )
        assert result.returncode == 0, result.stderr[-3000:]
        output = result.stdout + result.stderr
        if fmt == "json":  # the messages as logged, before JSON escaped their backslashes
            output += "".join(json.loads(line)["msg"] for line in result.stderr.splitlines())
        assert "sasl_plain_password" in output and "SaslAuthenticateRequest" in output
        assert "sasl_plain_username': 'alice'" in output  # the config dump is there, masked
        assert_no_secret(output)


def test_the_enforcer_at_debug_never_logs_a_password_token_or_url_credentials(tmp_path, dc):
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    dead_prometheus = f"http://kvq:{PROMETHEUS_PASSWORD}@127.0.0.1:{server_port()}"
    config = tmp_path / "enforcer.properties"
    config.write_text(
        sasl_properties(
            dc,
            **{
                P + "produce": "1048576",
                "kvq.enforcer.auth.bearer.token.file": str(token_file),
                "kvq.enforcer.prometheus.url": dead_prometheus,
            },
        )
    )
    port = server_port()
    argv = [sys.executable, "-m", "enforcer.cli", "--config", str(config), "--log.level", "debug"]
    argv += ["--listen", f"127.0.0.1:{port}", "--journal", str(tmp_path / "journal.sqlite3")]
    with ManagedProcess(argv, tmp_path / "enforcer.log", cwd=REPO) as process:
        wait_until(lambda: "listening on" in process.log_text(), timeout=30, what="kvq-enforcer up")
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/webhook",
            data=json.dumps(throttle_webhook(cluster=CLUSTER, factor=0.5)).encode(),
            headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            assert response.status == 200
        log = process.log_text()
    assert "SaslAuthenticateRequest" in log and "sasl_plain_password" in log
    assert "Prometheus at http://kvq:********@127.0.0.1:" in log  # the "not usable" warning
    assert "factor 0.5: set" in log  # the throttle went through the SASL connection
    assert_no_secret(log)

    checked = subprocess.run(
        [sys.executable, "-m", "enforcer.cli", "--config", str(config), "--check-config"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert checked.returncode == 0, checked.stderr
    assert "kvq.enforcer.prometheus.url=http://kvq:********@127.0.0.1:" in checked.stdout
    assert_no_secret(checked.stdout + checked.stderr)


def test_the_backfill_never_prints_its_prometheus_url_credentials(tmp_path):
    from spark.prometheus_gaps import PrometheusError, covered_times

    bad = subprocess.run(
        [sys.executable, "-m", "spark.cli", "--config", str(tmp_path / "none.properties")]
        + ["--archive", str(tmp_path), "--output", str(tmp_path / "out")]
        + ["--prometheus-url", f"ftp://kvq:{PROMETHEUS_PASSWORD}@prometheus:9090"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert bad.returncode == 2 and "ftp://kvq:********@prometheus:9090" in bad.stderr
    assert_no_secret(bad.stdout + bad.stderr)

    dead = f"http://kvq:{PROMETHEUS_PASSWORD}@127.0.0.1:{server_port()}"
    with pytest.raises(PrometheusError) as caught:
        covered_times(dead, "up", 0, 60, 15)
    assert "cannot reach Prometheus at http://kvq:********@127.0.0.1:" in str(caught.value)
    assert_no_secret(str(caught.value))
