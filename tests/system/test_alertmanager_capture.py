"""The payloads the enforcer is tested with have exactly the shape a real Alertmanager 0.25 posts.

Captures a firing and a resolved notification live on every run and compares their structure
(keys and value types, recursively) with devkit/data/alertmanager_webhook_*.json, from which all
other enforcer tests build their payloads.
"""

from __future__ import annotations

import json

import pytest

from devkit.alertmanager import WebhookRecorder, alertmanager, captured_webhook
from enforcer.webhook_payload import parse_webhook

pytestmark = pytest.mark.e2e

LABELS = {"alertname": "KafkaVolumeQuotaThrottle", "cluster": "prod-eu-1", "severity": "critical"}
ANNOTATIONS = {"throttle_factor": "0", "summary": "a log dir of prod-eu-1 is below its limit"}


def shape(value):
    """Structure without values: dict keys (recursively), list element shapes, scalar types."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shape(v) for v in value]
    return type(value).__name__


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("alertmanager")
    token = tmp / "token"
    token.write_text("capture-token\n")
    with WebhookRecorder() as hook, alertmanager(tmp / "am", hook.url, token) as am:
        am.fire(LABELS, ANNOTATIONS)
        fired = hook.wait_for(lambda b: b["status"] == "firing")
        am.resolve(LABELS, ANNOTATIONS)
        resolved = hook.wait_for(lambda b: b["status"] == "resolved")
        headers = hook.requests[0][0]
    return {"firing": fired, "resolved": resolved, "headers": headers}


@pytest.mark.parametrize("status", ["firing", "resolved"])
def test_stored_payloads_have_the_live_shape(live, status):
    assert shape(live[status]) == shape(captured_webhook(status))


def test_live_details_the_enforcer_relies_on(live):
    firing, resolved = live["firing"], live["resolved"]
    assert firing["version"] == "4" and firing["truncatedAlerts"] == 0
    assert firing["alerts"][0]["endsAt"] == "0001-01-01T00:00:00Z"
    assert firing["alerts"][0]["annotations"]["throttle_factor"] == "0"
    assert firing["groupKey"] == resolved["groupKey"]
    assert firing["alerts"][0]["fingerprint"] == resolved["alerts"][0]["fingerprint"]
    assert live["headers"]["Authorization"] == "Bearer capture-token"


@pytest.mark.parametrize("status", ["firing", "resolved"])
def test_live_payloads_parse(live, status):
    payload = parse_webhook(json.dumps(live[status]))
    assert payload.alerts[0].status == status
