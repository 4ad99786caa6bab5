"""`kvq-exporter --check-config`: effective config (secrets masked), or the errors and exit 2."""

import os
import subprocess
import sys

import pytest

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
    assert "kvq.cluster.label=cluster" in lines  # the default, shown
    renamed = run("--config", str(path), "--check-config", "--cluster-label", "kafka_cluster")
    assert "kvq.cluster.label=kafka_cluster" in renamed.stdout.splitlines(), renamed.stderr
    assert f"{P}storage.check.interval=PT30S" in lines
    assert f"{P}throttle.factor.validity.duration=PT5M" in lines
    assert "kvq.exporter.violation.check.interval=PT1S" in lines  # the default, shown
    assert "kvq.cluster.name=eu-1" in lines
    assert f"{P}kafka.admin.sasl.jaas.config=********" in lines
    assert "hunter2" not in result.stdout + result.stderr
    assert "deprecated" not in result.stderr  # the plugin's shipped key is a first-class alias


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


def test_secrets_and_values_from_the_environment_are_never_printed(tmp_path):
    path = tmp_path / "kvq.properties"
    path.write_text(
        f"{P}kafka.admin.bootstrap.servers=kafka-0:9092\n"
        f"{P}storage.per.volume.limit.min.available.ratio=0.05\n"
        f"{P}kafka.admin.sasl.oauthbearer.config=principal=kvq secret=${{env:KVQ_OAUTH}}\n"
        f"{P}kafka.admin.sasl.username=${{env:KVQ_USER}}\n"
    )
    result = subprocess.run(
        [sys.executable, "-m", "exporter.cli", "--config", str(path), "--check-config"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "KVQ_OAUTH": "oauth-hunter2", "KVQ_USER": "alice-from-env"},
    )
    assert result.returncode == 0, result.stderr
    assert f"{P}kafka.admin.sasl.oauthbearer.config=********" in result.stdout
    assert f"{P}kafka.admin.sasl.username=${{env:KVQ_USER}}" in result.stdout
    assert "hunter2" not in result.stdout + result.stderr
    assert "alice-from-env" not in result.stdout + result.stderr


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (f"{P}throttle.factor.validity.duration=P9999999999D", "at most P36500D"),
        (f"{P}kafka.admin.request.timeout.ms=5s", "whole number of milliseconds"),
        ("kvq.exporter.request.timeout=P3000D", "librdkafka's socket.timeout.ms range"),
        (
            f"{P}kafka.admin.ssl.truststore.location=/certs/kafka.jks",
            "kafka.admin.ssl.truststore.location=/certs/kafka.jks: no readable file there",
        ),
        (f"{P}throttle.factor.fallback=0.5   # half", "looks like a trailing # comment"),
    ],
)
def test_what_start_up_would_fail_on_is_a_clear_error_and_exit_2(tmp_path, line, message):
    path = tmp_path / "kvq.properties"
    path.write_text(
        f"{P}kafka.admin.bootstrap.servers=kafka-0:9092\n"
        f"{P}storage.per.volume.limit.min.available.ratio=0.05\n{line}\n"
    )
    for mode in ("--check-config", "--once"):
        result = run("--config", str(path), mode)
        assert result.returncode == 2, (mode, result.stderr)
        assert message in result.stderr and "Traceback" not in result.stderr


def test_an_archive_dir_that_cannot_be_written_is_a_clear_error(tmp_path):
    path = tmp_path / "kvq.properties"
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    path.write_text(
        f"{P}kafka.admin.bootstrap.servers=127.0.0.1:1\n"
        f"{P}storage.per.volume.limit.min.available.ratio=0.05\n"
        f"kvq.exporter.archive.dir={blocker}/archive\n"
    )
    for mode in ("--once", "--check-config"):
        result = run("--config", str(path), mode)
        assert result.returncode == 2, mode
        assert f"kvq.exporter.archive.dir={blocker}/archive: cannot write there" in result.stderr
        assert "Traceback" not in result.stderr


def test_check_config_creates_no_archive_dir(tmp_path):
    path = tmp_path / "kvq.properties"
    path.write_text(
        f"{P}kafka.admin.bootstrap.servers=127.0.0.1:1\n"
        f"{P}storage.per.volume.limit.min.available.ratio=0.05\n"
        f"kvq.exporter.archive.dir={tmp_path}/new/archive\n"
    )
    assert run("--config", str(path), "--check-config").returncode == 0
    assert not (tmp_path / "new").exists()


OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


def test_oauthbearer_client_credentials_are_checked_before_start(tmp_path):
    path = tmp_path / "kvq.properties"
    common = (
        f"{P}kafka.admin.bootstrap.servers=kafka-0:9092\n"
        f"{P}kafka.admin.security.protocol=SASL_SSL\n"
        f"{P}kafka.admin.sasl.mechanism=OAUTHBEARER\n"
        f"{P}storage.per.volume.limit.min.available.ratio=0.05\n"
    )
    path.write_text(
        common + f"{P}kafka.admin.sasl.jaas.config={OAUTH_MODULE} required "
        'oauth.client.id="kvq" oauth.token.endpoint.uri="idp.example.com/token" ;\n'
    )
    result = run("--config", str(path), "--check-config")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert (
        "kafka.admin.sasl.oauthbearer.client.secret is required with OAUTHBEARER: the client "
        'secret to log in with (or clientSecret="..." or oauth.client.secret="..." in '
        "sasl.jaas.config)" in result.stderr
    )
    assert "token.endpoint.url=idp.example.com/token: must be an http:// or https://" in (
        result.stderr
    )
    path.write_text(
        common + f"{P}kafka.admin.sasl.jaas.config={OAUTH_MODULE} required "
        'oauth.client.id="kvq" oauth.client.secret="${env:KVQ_OAUTH_SECRET}" '
        'oauth.token.endpoint.uri="https://idp.example.com/token" ;\n'
    )
    result = subprocess.run(
        [sys.executable, "-m", "exporter.cli", "--config", str(path), "--check-config"],
        capture_output=True,
        text=True,
        timeout=60,
        env=os.environ | {"KVQ_OAUTH_SECRET": "oauth-hunter2"},
    )
    assert result.returncode == 0, result.stderr
    assert f"{P}kafka.admin.sasl.jaas.config=********" in result.stdout.splitlines()
    assert "oauth-hunter2" not in result.stdout + result.stderr
