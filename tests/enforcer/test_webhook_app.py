"""The HTTP API, served on loopback, with an in-memory Kafka: auth, validation, size limit, 503,
status, metrics."""

import base64
import json

import pytest
import requests

from devkit.alertmanager import captured_webhook, throttle_webhook
from devkit.memory_quotas import InMemoryQuotas
from enforcer.applier import Applier
from enforcer.auth import Credentials
from enforcer.cli import build_parser
from enforcer.enforcer import Enforcer
from enforcer.journal import Journal
from enforcer.metrics import EnforcerMetrics
from enforcer.quota_plan import QuotaPolicy
from enforcer.settings import OTHER_PATHS
from enforcer.webhook_app import enforcer_server
from kvq.kafka.quota_entity import QuotaEntity
from kvq.settings.config import CLUSTER_LABEL_DEFAULT

P = "producer_byte_rate"
ALICE = QuotaEntity.user("alice")
TOKEN = {"Authorization": "Bearer s3cret"}


class Stack:
    def __init__(self, tmp_path, clusters=("prod-eu-1",), max_body=64 * 1024):
        self.kafka = {c: InMemoryQuotas({ALICE: {P: 800.0}}) for c in clusters}
        self.journal = Journal(tmp_path / "journal.sqlite3")
        self.metrics = EnforcerMetrics(tuple(clusters), CLUSTER_LABEL_DEFAULT)
        policy = QuotaPolicy((P,), {P: 1000})
        appliers = {
            c: Applier(c, policy, self.kafka[c], self.journal, self.metrics) for c in clusters
        }
        self.enforcer = Enforcer(appliers, self.journal, self.metrics, CLUSTER_LABEL_DEFAULT)
        self.server = enforcer_server(
            self.enforcer, Credentials(token="s3cret"), ("127.0.0.1", 0), max_body=max_body
        ).start()
        self.http = requests.Session()

    def get(self, path, headers=None):
        return self.http.get(self.server.url + path, headers=headers, timeout=10)

    def post(self, body, headers=TOKEN, **kwargs):
        data = body if isinstance(body, (bytes, str)) else json.dumps(body)
        return self.http.post(
            self.server.url + "/webhook", data=data, headers=headers, timeout=10, **kwargs
        )

    def close(self):
        self.http.close()
        self.server.stop()
        self.journal.close()

    def metric(self, name, **labels):
        value = self.metrics.registry.get_sample_value(name, labels)
        return 0.0 if value is None else value


@pytest.fixture
def stack(tmp_path):
    s = Stack(tmp_path)
    yield s
    s.close()


def test_firing_throttles_and_resolved_restores(stack):
    response = stack.post(throttle_webhook(factor=0.5))
    assert response.status_code == 200, response.text
    assert response.json()["clusters"]["prod-eu-1"]["factor"] == 0.5
    assert stack.kafka["prod-eu-1"].values[ALICE][P] == 400.0
    assert stack.post(throttle_webhook(factor=None)).status_code == 200
    assert stack.kafka["prod-eu-1"].values == {ALICE: {P: 800.0}}


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer wrong"},
        {"Authorization": "Basic " + base64.b64encode(b"x:s3cret").decode()},
    ],
)
def test_missing_or_wrong_credentials_401_and_nothing_changes(stack, headers):
    response = stack.post(throttle_webhook(factor=0.0), headers=headers)
    assert response.status_code == 401
    assert "Bearer" in response.headers["WWW-Authenticate"]
    assert stack.kafka["prod-eu-1"].calls == []
    assert stack.journal.alerts.firing_factors("prod-eu-1") == []
    assert stack.metric("kafka_volume_quota_enforcer_webhooks_total", outcome="unauthorized") == 1


def test_bad_payload_400_names_the_problem_and_nothing_changes(stack):
    body = throttle_webhook(factor=0.0)
    body["alerts"][0]["annotations"]["throttle_factor"] = "lots"
    response = stack.post(body)
    assert response.status_code == 400
    assert "throttle_factor='lots' is not a plain decimal number" in response.json()["error"]
    assert stack.kafka["prod-eu-1"].calls == []
    assert stack.post(b"{nope").status_code == 400
    assert stack.journal.alerts.firing_factors("prod-eu-1") == []


def test_oversized_payload_413_and_nothing_changes(stack):
    body = throttle_webhook(factor=0.0)
    body["commonAnnotations"]["padding"] = "x" * 70_000
    response = stack.post(body)
    assert response.status_code == 413
    assert stack.kafka["prod-eu-1"].calls == []


def test_kafka_down_503_then_the_retry_succeeds(stack):
    kafka = stack.kafka["prod-eu-1"]
    kafka.down = True
    response = stack.post(throttle_webhook(factor=0.0))
    assert response.status_code == 503
    assert "cannot reach Kafka" in response.json()["error"]
    kafka.down = False
    assert stack.post(throttle_webhook(factor=0.0)).status_code == 200
    assert kafka.values[ALICE][P] == 1.0


def test_other_alerts_are_acknowledged_and_ignored(stack):
    body = captured_webhook("firing")
    body["alerts"][0]["labels"]["alertname"] = "SomethingElse"
    response = stack.post(body)
    assert response.status_code == 200 and response.json()["outcome"] == "ignored"
    assert stack.kafka["prod-eu-1"].calls == []


def test_status_reports_target_applied_entities_and_drift(stack):
    stack.post(throttle_webhook(factor=0.5))
    stack.kafka["prod-eu-1"].set(ALICE, P, 5.0)
    stack.post(throttle_webhook(factor=0.5))
    assert stack.get("/status").status_code == 401
    status = stack.get("/status", headers=TOKEN).json()["clusters"]["prod-eu-1"]
    assert status["target_factor"] == 0.5 and status["applied_factor"] == 0.5
    rows = {(r["label"], r["key"]): r for r in status["entities"]}
    assert rows[("user=<default>", P)]["original"] is None
    assert rows[("user=<default>", P)]["current"] == 500.0
    assert rows[("user=alice", P)] == {
        "entity": {"user": "alice"},
        "label": "user=alice",
        "key": P,
        "original": 800.0,
        "current": 5.0,
        "unlimited_override": False,
        "drift": True,
        "reference": None,
    }
    assert status["drift"] == 1


def test_metrics_count_outcomes_applies_and_factor(stack):
    stack.post(throttle_webhook(factor=0.5))
    stack.post(b"[]")
    text = stack.get("/metrics").text
    assert 'kafka_volume_quota_enforcer_webhooks_total{outcome="applied"} 1.0' in text
    assert 'kafka_volume_quota_enforcer_webhooks_total{outcome="bad_request"} 1.0' in text
    assert 'kafka_volume_quota_enforcer_applied_factor{cluster="prod-eu-1"} 0.5' in text
    assert 'kafka_volume_quota_enforcer_target_factor{cluster="prod-eu-1"} 0.5' in text
    assert stack.metric("kafka_volume_quota_enforcer_applies_total", cluster="prod-eu-1") == 1
    assert (
        stack.metric(
            "kafka_volume_quota_enforcer_apply_duration_seconds_count", cluster="prod-eu-1"
        )
        == 1
    )
    assert stack.get("/healthz").json()["status"] == "ok"


def test_one_payload_can_throttle_two_managed_clusters_independently(tmp_path):
    stack = Stack(tmp_path, clusters=("a", "b"))
    try:
        _throttle_two_clusters(stack)
    finally:
        stack.close()


def _throttle_two_clusters(stack):
    body = throttle_webhook(alerts=[("a", 0.5), ("b", 0.0), ("b", 0.25)], group_key="g")
    assert stack.post(body).status_code == 200
    assert stack.kafka["a"].values[ALICE][P] == 400.0
    assert stack.kafka["b"].values[ALICE][P] == 1.0
    stack.post(throttle_webhook(alerts=[("a", None), ("b", 0.25)], group_key="g"))
    assert stack.kafka["a"].values == {ALICE: {P: 800.0}}
    assert stack.kafka["b"].values[ALICE][P] == 200.0


def test_alerts_in_separate_groups_combine_lowest_wins(stack):
    stack.post(throttle_webhook(factor=0.5, group_key="g1"))
    stack.post(throttle_webhook(factor=0.25, group_key="g2"))
    assert stack.kafka["prod-eu-1"].values[ALICE][P] == 200.0
    stack.post(throttle_webhook(factor=None, group_key="g2"))
    assert stack.kafka["prod-eu-1"].values[ALICE][P] == 400.0


def _json_400(stack, body: bytes) -> dict:
    before = stack.metric("kafka_volume_quota_enforcer_webhooks_total", outcome="bad_request")
    response = stack.post(body)
    assert response.status_code == 400, response.text[:300]
    assert response.headers["Content-Type"] == "application/json"
    after = stack.metric("kafka_volume_quota_enforcer_webhooks_total", outcome="bad_request")
    assert after == before + 1
    assert stack.kafka["prod-eu-1"].calls == []
    return response.json()


def test_hostile_json_is_a_json_400_counted_as_bad_request(stack):
    deep = b'{"version": "4", "alerts": ' + b"[" * 1000 + b"]" * 1000 + b"}"
    assert "nested" in _json_400(stack, deep)["error"]
    huge = b'{"version": "4", "truncatedAlerts": 1' + b"0" * 5000 + b"}"
    assert "digits" in _json_400(stack, huge)["error"]
    assert "NaN" in _json_400(stack, b'{"version": "4", "truncatedAlerts": NaN}')["error"]


@pytest.mark.parametrize("field", ["groupKey", "fingerprint", "receiver"])
@pytest.mark.parametrize("bad", ["\ud800", "a\udfffb", "g\n2026-11-23 INFO forged line", "\x00"])
def test_lone_surrogates_and_control_characters_in_identifiers_are_refused(stack, field, bad):
    body = throttle_webhook(factor=0.5)
    target = body["alerts"][0] if field == "fingerprint" else body
    target[field] = bad
    error = _json_400(stack, json.dumps(body).encode())["error"]
    assert field in error
    assert "\n" not in error and "\ud800" not in error


def test_a_long_bad_factor_is_echoed_truncated(tmp_path, caplog):
    stack = Stack(tmp_path, max_body=1024 * 1024)
    try:
        body = throttle_webhook(factor=0.5)
        body["alerts"][0]["annotations"]["throttle_factor"] = "9" * 450_000
        error = _json_400(stack, json.dumps(body).encode())["error"]
        assert len(error) < 400 and "99999..." in error
        assert max(len(r.getMessage()) for r in caplog.records) < 1000
    finally:
        stack.close()


@pytest.mark.parametrize(
    "factor",
    ["0.0_1", "\u0660.\u0665", "\uff10.5", " 0.5", "0.5\n", "+0.5", "-0", "nan", "0x1", ""],
)
def test_only_plain_decimal_factors_are_accepted(stack, factor):
    body = throttle_webhook(factor=0.5)
    body["alerts"][0]["annotations"]["throttle_factor"] = factor
    error = _json_400(stack, json.dumps(body).encode())["error"]
    assert "plain decimal" in error


@pytest.mark.parametrize(("factor", "value"), [("0", 0.0), ("0.25", 0.25), ("1e-05", 1e-05)])
def test_factors_as_prometheus_prints_them_are_accepted(stack, factor, value):
    body = throttle_webhook(factor=0.5)
    body["alerts"][0]["annotations"]["throttle_factor"] = factor
    response = stack.post(body)
    assert response.status_code == 200, response.text
    assert response.json()["clusters"]["prod-eu-1"]["factor"] == value


def test_metrics_have_build_info_and_process_gzip_and_pass_promtool(stack):
    import gzip
    import subprocess

    stack.post(throttle_webhook(factor=0.5))
    response = stack.http.get(
        stack.server.url + "/metrics", headers={"Accept-Encoding": "gzip"}, stream=True
    )
    assert response.headers["Content-Encoding"] == "gzip"
    text = gzip.decompress(response.raw.read()).decode()
    assert 'program="kvq-enforcer"' in text and "process_cpu_seconds_total" in text
    check = subprocess.run(
        ["promtool", "check", "metrics"], input=text.encode(), capture_output=True
    )
    assert check.returncode == 0 and check.stdout + check.stderr == b"", check.stderr


def test_landing_page_and_head(stack):
    page = stack.get("/").text
    for path in ("/metrics", "/status", "/ready", "/healthz"):
        assert f'<a href="{path}">' in page
    assert "/webhook" in page
    head = stack.http.head(stack.server.url + "/ready")
    assert head.status_code == 200 and head.content == b""


def test_requests_refused_from_their_head_are_counted_by_outcome(stack):
    url = stack.server.url + "/webhook"
    assert stack.http.get(url).status_code == 405  # not a webhook at all: not counted
    chunked = stack.http.post(url, data=iter([b"{}"]), headers=TOKEN)  # no Content-Length
    assert chunked.status_code == 411
    assert stack.metric("kafka_volume_quota_enforcer_webhooks_total", outcome="bad_request") == 1
    assert (
        sum(
            stack.metric("kafka_volume_quota_enforcer_webhooks_total", outcome=o)
            for o in ("unauthorized", "too_large", "error")
        )
        == 0
    )


def test_every_served_path_is_refused_as_the_telemetry_path(stack):
    """--web.telemetry-path is checked before the routes exist (OTHER_PATHS); it must name them."""
    served = set(stack.server.routes) - {"/", "/metrics"}
    assert served == set(OTHER_PATHS)
    for path in served:
        with pytest.raises(SystemExit) as refused:
            build_parser().parse_args(["--web.telemetry-path", path])
        assert refused.value.code == 2
