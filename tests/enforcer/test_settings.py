"""EnforcerSettings: `kvq.enforcer.*` typed; kafka-python's checks run when it is built."""

from datetime import timedelta

import pytest

from enforcer.settings import EnforcerSettings
from tests.properties_support import MINIMAL, config_errors

P = "client.quota.callback.static."


def test_defaults():
    settings = EnforcerSettings.build(MINIMAL, environ={})
    assert settings.listen == ("127.0.0.1", 9899)
    assert settings.journal == "kvq-enforcer-journal.sqlite3"
    assert (settings.token_file, settings.basic_file, settings.prometheus_url) == (None,) * 3
    assert settings.alert_name == "KafkaVolumeQuotaThrottle"
    assert settings.quota_keys == ("producer_byte_rate",)
    assert settings.dry_run is False
    assert settings.alert_expiry == timedelta(hours=12)
    assert settings.stale_window == timedelta(minutes=2)


def test_bad_values_name_the_property_the_value_and_what_is_allowed():
    errors = config_errors(
        EnforcerSettings, **{"kvq.enforcer.dry.run": "maybe", "kvq.enforcer.alert.expiry": "12h"}
    )
    assert errors[0] == "kvq.enforcer.dry.run=maybe: must be true or false"
    assert errors[1].startswith("kvq.enforcer.alert.expiry=12h: not an ISO 8601 duration")


@pytest.mark.parametrize(
    ("text", "allowed"),
    [
        ("PT0S", "must be a positive ISO 8601 duration"),
        ("2m", "not an ISO 8601 duration"),
        ("PT5M", "must be above PT0S and below PT5M (the enforcer route's repeat_interval"),
    ],
)
def test_the_stale_window_is_positive_and_below_the_routes_repeat_interval(text, allowed):
    (error,) = config_errors(EnforcerSettings, **{"kvq.enforcer.stale.window": text})
    assert error.startswith(f"kvq.enforcer.stale.window={text}: {allowed}")
    settings = EnforcerSettings.build(
        {**MINIMAL, "kvq.enforcer.stale.window": "PT0.5S"}, environ={}
    )
    assert settings.stale_window == timedelta(milliseconds=500)


@pytest.mark.parametrize("url", ["prometheus:9090", "ftp://prometheus", "http://", "notaurl"])
def test_the_prometheus_url_must_be_http_with_a_host(url):
    (error,) = config_errors(EnforcerSettings, **{"kvq.enforcer.prometheus.url": url})
    assert error.startswith(f"kvq.enforcer.prometheus.url={url}: must be an http:// or https://")


def test_a_secret_is_masked_in_error_messages_too():
    (error,) = config_errors(EnforcerSettings, **{"kvq.enforcer.auth.bearer.token.file": " "})
    assert error == "kvq.enforcer.auth.bearer.token.file=********: must be a path that is not blank"


def test_the_exporters_settings_are_not_the_enforcers_business():
    settings = EnforcerSettings.build({**MINIMAL, "kvq.exporter.listen": "nonsense"}, environ={})
    assert settings.listen == ("127.0.0.1", 9899)


def test_an_unparseable_jaas_line_is_a_config_error():
    (error,) = config_errors(
        EnforcerSettings, **{P + "kafka.admin.sasl.jaas.config": "GssapiLoginModule required;"}
    )
    assert error.startswith("kafka.admin.sasl.jaas.config: only PlainLoginModule")


@pytest.mark.parametrize("value", ["5s", "-1", "99999999999999999999", "2147483648", "١٠"])
def test_kafka_millisecond_settings_are_java_ints(value):
    key = "client.quota.callback.static.kafka.admin.request.timeout.ms"
    (error,) = config_errors(EnforcerSettings, **{key: value})
    assert error.startswith(f"kafka.admin.request.timeout.ms={value}: must be a whole number")
    assert "2147483647" in error


@pytest.mark.parametrize(
    ("props", "expected"),
    [
        ({"security.protocol": "BOGUS"}, "kafka.admin.security.protocol=BOGUS: must be one of"),
        (
            {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "FOO"},
            "kafka.admin.sasl.mechanism=FOO: must be one of",
        ),
        (
            {"security.protocol": "SSL", "ssl.ca.location": "/nonexistent/ca.pem"},
            "kafka.admin.ssl.ca.location=/nonexistent/ca.pem: no readable file there",
        ),
    ],
)
def test_what_kafka_python_fails_on_only_when_connecting_is_a_config_error(props, expected):
    prefixed = {f"client.quota.callback.static.kafka.admin.{k}": v for k, v in props.items()}
    (error,) = config_errors(EnforcerSettings, **prefixed)
    assert error.startswith(expected)
