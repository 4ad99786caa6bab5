"""Parsing Alertmanager's v4 webhook body (shapes captured from a real Alertmanager 0.25)."""

import json

import pytest

from devkit.alertmanager import captured_webhook
from enforcer.webhook_payload import PayloadError, parse_webhook


def test_captured_firing_body_parses_with_every_field():
    payload = parse_webhook(json.dumps(captured_webhook("firing")))
    assert payload.status == "firing"
    assert payload.receiver == "kvq-enforcer"
    assert payload.truncated_alerts == 0
    assert payload.group_key.startswith("{}:{alertname=")
    (alert,) = payload.alerts
    assert alert.firing and alert.name == "KafkaVolumeQuotaThrottle"
    assert alert.labels["cluster"] == "prod-eu-1"
    assert alert.annotations["throttle_factor"] == "0"
    assert alert.ends_at is None, "Alertmanager's 0001-01-01 endsAt means 'no end yet'"
    assert alert.fingerprint


def test_captured_resolved_body_has_an_end_time():
    (alert,) = parse_webhook(json.dumps(captured_webhook("resolved"))).alerts
    assert not alert.firing
    assert alert.ends_at is not None and alert.ends_at > alert.starts_at


def test_nanosecond_timestamps_are_accepted():
    body = captured_webhook("firing")
    body["alerts"][0]["startsAt"] = "2026-11-22T15:00:00.123456789Z"
    assert parse_webhook(json.dumps(body)).alerts[0].starts_at.microsecond == 123456


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda b: b.update(version="3"), '$.version must be "4"'),
        (lambda b: b.update(alerts={}), "$.alerts must be a list"),
        (lambda b: b.update(status="pending"), '$.status must be "firing" or "resolved"'),
        (lambda b: b.update(truncatedAlerts=-1), "$.truncatedAlerts must be a whole number"),
        (lambda b: b.pop("groupKey"), "$.groupKey must be a string"),
        (lambda b: b["alerts"][0].update(labels=[]), "$.alerts[0].labels must be an object"),
        (lambda b: b["alerts"][0].update(startsAt="yesterday"), "$.alerts[0].startsAt must be"),
        (lambda b: b["alerts"][0].pop("fingerprint"), "$.alerts[0].fingerprint must be"),
        (lambda b: b["alerts"][0]["annotations"].update(x=1), "annotations must be an object"),
    ],
)
def test_malformed_bodies_name_the_field(mutate, message):
    body = captured_webhook("firing")
    mutate(body)
    with pytest.raises(PayloadError, match=message.replace("[", r"\[").replace("$", r"\$")):
        parse_webhook(json.dumps(body))


@pytest.mark.parametrize("raw", [b"not json", b"\xff\xfe", b"[]", b"null"])
def test_non_objects_are_rejected(raw):
    with pytest.raises(PayloadError):
        parse_webhook(raw)


def test_nesting_is_bounded_by_the_parser_not_by_the_interpreter():
    """33 levels are refused for their depth, on every Python: 3.11's json fails only near 1,000
    levels and 3.12's much deeper, so a hostile body would otherwise meet whatever the shape
    check says of it. Brackets inside strings are text, not depth."""
    too_deep = b'{"version": "4", "alerts": ' + b"[" * 32 + b"]" * 32 + b"}"
    with pytest.raises(PayloadError, match="nested too deeply: at most 32 levels"):
        parse_webhook(too_deep)
    deepest = b'{"version": "4", "alerts": ' + b"[" * 31 + b"]" * 31 + b"}"
    with pytest.raises(PayloadError) as refused:
        parse_webhook(deepest)
    assert "nested" not in str(refused.value)
    body = captured_webhook("firing")
    body["alerts"][0]["annotations"]["summary"] = "[" * 100 + '\\" {{' * 50
    assert parse_webhook(json.dumps(body)).alerts[0].name == "KafkaVolumeQuotaThrottle"
