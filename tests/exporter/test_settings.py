"""ExporterSettings: `kvq.exporter.*` typed, and the Kafka client checks run when it is built."""

import subprocess
import sys

import pytest

from exporter.settings import ExporterSettings
from tests.properties_support import MINIMAL, config_errors

P = "client.quota.callback.static."


def test_defaults():
    settings = ExporterSettings.build(MINIMAL, environ={})
    assert settings.listen == ("127.0.0.1", 9898)
    assert settings.archive_dir is None
    assert settings.request_timeout.total_seconds() == 10
    assert settings.violation_check_interval.total_seconds() == 1


@pytest.mark.parametrize("interval", ["PT0.05S", "PT2H"])
def test_the_violation_check_interval_is_off_or_a_sane_duration(interval):
    key = "kvq.exporter.violation.check.interval"
    (error,) = config_errors(ExporterSettings, **{key: interval})
    assert error == (
        f"{key}={interval}: must be PT0S (PT0S: storage.check.interval always) "
        "or from PT0.1S to PT1H"
    )
    off = ExporterSettings.build({**MINIMAL, key: "PT0S"}, environ={})
    assert off.violation_check_interval.total_seconds() == 0


def test_bad_listen_names_property_value_and_what_is_allowed():
    (error,) = config_errors(ExporterSettings, **{"kvq.exporter.listen": "9898"})
    assert error.startswith("kvq.exporter.listen=9898: must be HOST:PORT")


@pytest.mark.parametrize("timeout", ["PT0.001S", "P3000D"])
def test_the_request_timeout_stays_in_what_librdkafka_accepts(timeout):
    (error,) = config_errors(ExporterSettings, **{"kvq.exporter.request.timeout": timeout})
    assert error == (
        f"kvq.exporter.request.timeout={timeout}: must be from PT0.01S to PT5M "
        "(librdkafka's socket.timeout.ms range)"
    )


def test_a_typo_in_its_namespace_is_an_error_but_the_enforcers_keys_are_not():
    (error,) = config_errors(
        ExporterSettings, **{"kvq.exporter.lisen": "x", "kvq.enforcer.dry.run": "maybe"}
    )
    assert "kvq.exporter.lisen is not a known setting" in error


@pytest.mark.parametrize(
    ("props", "expected"),
    [
        (
            {"ssl.truststore.location": "/certs/truststore.jks"},
            "kafka.admin.ssl.truststore.location=/certs/truststore.jks: no readable file there "
            "(No such file or directory)",
        ),
        ({"sasl.jaas.config": "PlainLoginModule required;"}, 'username="..." password="..."'),
        (
            {"request.timeout.ms": "5s"},
            "kafka.admin.request.timeout.ms=5s: must be a whole number of milliseconds",
        ),
        ({"securty.protocol": "SSL"}, 'No such configuration property: "securty.protocol"'),
        (
            {
                "security.protocol": "SSL",
                "ssl.truststore.type": "PEM",
                "ssl.truststore.location": "/x",
            },
            "kafka.admin.ssl.truststore.location=/x: no readable file there",
        ),
        ({"security.protocol": "TLS"}, "security.protocol=TLS: must be one of PLAINTEXT, SSL"),
        (
            {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM"},
            "kafka.admin.sasl.mechanism=SCRAM: must be one of",
        ),
        (
            {"security.protocol": "SSL", "ssl.ca.location": "/nonexistent/ca.pem"},
            "kafka.admin.ssl.ca.location=/nonexistent/ca.pem: no readable file there",
        ),
    ],
)
def test_what_the_kafka_clients_refuse_is_a_config_error(props, expected):
    (error,) = config_errors(
        ExporterSettings, **{P + "kafka.admin." + k: v for k, v in props.items()}
    )
    assert expected in error


def test_librdkafka_messages_never_show_a_secret():
    (error,) = config_errors(
        ExporterSettings,
        **{
            P + "kafka.admin.security.protocol": "SSL",
            P + "kafka.admin.ssl.key.pem": "not-a-pem-private-key-hunter2",
        },
    )
    assert "ssl.key.pem" in error and "hunter2" not in error


def test_check_config_fails_for_what_start_up_fails_on(tmp_path):
    path = tmp_path / "kvq.properties"
    lines = {**MINIMAL, P + "kafka.admin.ssl.truststore.location": "/certs/truststore.jks"}
    path.write_text("".join(f"{k}={v}\n" for k, v in lines.items()))
    result = subprocess.run(
        [sys.executable, "-m", "exporter.cli", "--config", str(path), "--check-config"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "/certs/truststore.jks: no readable file there" in result.stderr
    assert "Traceback" not in result.stderr
