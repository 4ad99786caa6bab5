"""Thousands of generated payloads against the real kvq-enforcer in front of devcluster: never a
5xx, never a quota change.

The payloads are garbage bytes, arbitrary JSON, and Alertmanager-shaped webhooks whose fields are
replaced by hostile values (lone surrogates, control characters, deep nesting, huge numbers,
factors Python's float() would take but Prometheus never prints). None of them may throttle: a
throttle alert of the managed cluster only ever carries "1" or a factor that must be refused.
"""

from __future__ import annotations

import json

import pytest
import requests
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from devkit.alertmanager import throttle_webhook
from tests.enforcer.test_integration import CLUSTER, TOKEN, Enforcer, alter_count, quotas, seed

pytestmark = pytest.mark.integration

EXAMPLES = 2000
ANY_TEXT = st.text(st.characters(exclude_categories=()), max_size=40)  # surrogates included
REFUSED_FACTORS = st.sampled_from(
    ["0.0_1", "\u0660.\u0665", "\uff10.5", " 0.5", "0.5\n", "+0.5", "-0.5", "-0", "nan", "NaN",
     "inf", "1e999", "0x0", "", "0,5", "1.5", "0.5.1", ".5", "5.", "1e-05 "]
)  # fmt: skip
FACTORS = st.one_of(
    st.sampled_from(["1", "1.0", "1e0"]),
    REFUSED_FACTORS,
    ANY_TEXT.filter(lambda t: any(c not in "0123456789.eE+-" for c in t)),
)
JSON_LEAVES = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), ANY_TEXT
)
ANY_JSON = st.recursive(
    JSON_LEAVES,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(ANY_TEXT, children, max_size=4)
    ),
    max_leaves=20,
)


@st.composite
def webhooks(draw) -> bytes:
    """A v4 webhook for the managed cluster with some fields replaced by hostile values."""
    body = throttle_webhook(cluster=CLUSTER, factor=0.5)
    alert = body["alerts"][0]
    alert["annotations"]["throttle_factor"] = draw(FACTORS)
    replaceable = [
        (body, "groupKey", ANY_TEXT),
        (body, "receiver", ANY_TEXT),
        (body, "status", st.sampled_from(["firing", "resolved"]) | ANY_TEXT),
        (body, "version", st.sampled_from(["4", "3", 4, None])),
        (body, "truncatedAlerts", st.integers() | ANY_JSON),
        (alert, "fingerprint", ANY_TEXT),
        (alert, "status", st.sampled_from(["firing", "resolved"]) | ANY_TEXT),
        (alert, "startsAt", ANY_TEXT),
        (alert, "endsAt", ANY_TEXT | st.just("0001-01-01T00:00:00Z")),
        (alert, "labels", ANY_JSON),
        (alert, "annotations", ANY_JSON),
    ]
    chosen = draw(st.lists(st.sampled_from(range(len(replaceable))), max_size=3, unique=True))
    for index in chosen:
        target, key, values = replaceable[index]
        target[key] = draw(values)
    if body.get("version") == "4" and isinstance(alert.get("labels"), dict):
        alert["labels"]["cluster"] = CLUSTER  # keep most of them aimed at the managed cluster
        alert["labels"]["alertname"] = "KafkaVolumeQuotaThrottle"
    text = json.dumps(body)
    if draw(st.integers(0, 9)) == 0:  # deep nesting somewhere inside
        depth = draw(st.integers(900, 3000))
        text = text[:-1] + ', "x": ' + "[" * depth + "]" * depth + "}"
    if draw(st.integers(0, 9)) == 0:  # an integer over Python's 4,300 digits
        text = text[:-1] + ', "n": 1' + "0" * draw(st.integers(4300, 6000)) + "}"
    return text.encode()


PAYLOADS = st.one_of(
    webhooks(),
    webhooks(),
    ANY_JSON.map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=500),
)


@pytest.fixture
def target(tmp_path, devcluster):
    dc = devcluster(brokers=1, log_dirs_per_broker=1)
    seed(dc, {"user": "alice"}, producer_byte_rate=800000.0)
    seed(dc, {"user": None}, producer_byte_rate=1000000.0)
    e = Enforcer(tmp_path, dc)
    try:
        yield dc, e.start()
    finally:
        e.stop()


def test_generated_payloads_never_get_a_5xx_nor_change_a_quota(target):
    dc, enforcer = target
    before, alters_before = quotas(dc), alter_count(dc)
    statuses: dict[int, int] = {}
    with requests.Session() as http:
        http.headers["Authorization"] = f"Bearer {TOKEN}"

        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(PAYLOADS)
        def post(body: bytes) -> None:
            response = http.post(enforcer.url + "/webhook", data=body, timeout=30)
            statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
            assert response.status_code < 500, (body[:300], response.text[:300])
            assert response.headers["Content-Type"] == "application/json"
            assert "error" in response.json() or response.status_code == 200

        post()
    assert sum(statuses.values()) >= EXAMPLES
    assert statuses.get(400, 0) > EXAMPLES / 3 and statuses.get(200, 0) > 10, statuses
    assert quotas(dc) == before
    assert alter_count(dc) == alters_before
    counted = enforcer.metric('kafka_volume_quota_enforcer_webhooks_total{outcome="bad_request"}')
    assert counted == statuses[400]
