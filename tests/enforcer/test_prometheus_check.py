"""Confirming a lower factor, and a firing judged stale, with Prometheus' instant query API
(mocked with `responses`)."""

import json
import threading
from datetime import UTC, datetime, timedelta

import pytest
import requests
import responses
from responses import matchers

from devkit.alertmanager import throttle_webhook
from devkit.memory_quotas import InMemoryQuotas
from enforcer.applier import Applier
from enforcer.enforcer import Enforcer
from enforcer.journal import Journal
from enforcer.metrics import EnforcerMetrics
from enforcer.prometheus_check import PrometheusFactor, factor_to_apply
from enforcer.quota_plan import QuotaPolicy
from enforcer.webhook_payload import webhook_from_dict
from kvq.contract.cluster_identity import ClusterIdentity
from kvq.kafka.quota_entity import QuotaEntity
from kvq.settings.config import CLUSTER_LABEL_DEFAULT

URL = "http://prometheus.test:9090"
C1 = ClusterIdentity("c1", CLUSTER_LABEL_DEFAULT)


def vector(*values):
    return {
        "status": "success",
        "data": {
            "resultType": "vector",
            "result": [{"metric": {}, "value": [1763823600.0, str(v)]} for v in values],
        },
    }


@pytest.fixture
def api():
    with responses.RequestsMock() as mock:
        yield mock


def test_query_selects_the_cluster_and_takes_the_minimum(api):
    api.get(f"{URL}/api/v1/query", json=vector(0.25))
    prod = ClusterIdentity("prod-eu-1", CLUSTER_LABEL_DEFAULT)
    assert PrometheusFactor(URL).current(prod) == 0.25
    query = api.calls[0].request.params["query"]
    assert query == 'min(kafka_volume_quota_throttle_factor{cluster="prod-eu-1"})'


def test_fresher_prometheus_value_is_used_when_lowering(api):
    api.get(f"{URL}/api/v1/query", json=vector(1.0))
    assert factor_to_apply(C1, 0.0, 1.0, PrometheusFactor(URL)) == 1.0


def test_raising_the_factor_does_not_ask(api):
    assert factor_to_apply(C1, 1.0, 0.0, PrometheusFactor(URL)) == 1.0
    assert len(api.calls) == 0


@pytest.mark.parametrize(
    "answer",
    [
        {"json": vector()},
        {"json": vector(7)},
        {"json": {"status": "error", "error": "bad query"}, "status": 400},
        {"body": "<html>"},
        {"body": requests.ConnectionError("refused")},
    ],
)
def test_alert_factor_stands_when_prometheus_cannot_confirm(api, answer):
    api.get(f"{URL}/api/v1/query", **answer)
    assert factor_to_apply(C1, 0.0, 1.0, PrometheusFactor(URL)) == 0.0


def test_cluster_names_are_escaped_in_promql():
    assert PrometheusFactor.query_for(ClusterIdentity('a"b\\c', CLUSTER_LABEL_DEFAULT)) == (
        'min(kafka_volume_quota_throttle_factor{cluster="a\\"b\\\\c"})'
    )


def test_queries_match_the_configured_cluster_label():
    c1 = ClusterIdentity("c1", "kafka_cluster")
    assert PrometheusFactor.query_for(c1) == (
        'min(kafka_volume_quota_throttle_factor{kafka_cluster="c1"})'
    )
    assert PrometheusFactor.throttling_query(c1, "T") == (
        'count(ALERTS{alertname="T",kafka_cluster="c1",alertstate="firing"}) '
        'or min(kafka_volume_quota_throttle_factor{kafka_cluster="c1"}) < 1'
    )


def test_enforcer_uses_prometheus_fresher_factor_before_throttling(api, tmp_path):
    alice = QuotaEntity.user("alice")
    kafka = InMemoryQuotas({alice: {"producer_byte_rate": 800.0}})
    journal = Journal(tmp_path / "j.sqlite3")
    metrics = EnforcerMetrics(("c1",), CLUSTER_LABEL_DEFAULT)
    policy = QuotaPolicy(("producer_byte_rate",), {})
    applier = Applier("c1", policy, kafka, journal, metrics)
    enforcer = Enforcer(
        {"c1": applier}, journal, metrics, C1.label, prometheus=PrometheusFactor(URL)
    )
    api.get(f"{URL}/api/v1/query", json=vector(0.5))
    enforcer.handle(webhook_from_dict(throttle_webhook(cluster="c1", factor=0.0)))
    assert kafka.values[alice]["producer_byte_rate"] == 400.0
    assert len(api.calls) == 1
    enforcer.handle(webhook_from_dict(throttle_webhook(cluster="c1", factor=None)))
    assert kafka.values[alice]["producer_byte_rate"] == 800.0
    assert len(api.calls) == 1, "raising the factor back to 1 needs no confirmation"
    journal.close()


def test_throttling_asks_for_the_firing_alert_or_a_factor_below_one(api):
    api.get(f"{URL}/api/v1/query", json=vector(1))
    quoted = ClusterIdentity('a"b', CLUSTER_LABEL_DEFAULT)
    assert PrometheusFactor(URL).throttling(quoted, "KafkaVolumeQuotaThrottle") is True
    assert api.calls[0].request.params["query"] == (
        'count(ALERTS{alertname="KafkaVolumeQuotaThrottle",cluster="a\\"b",alertstate="firing"})'
        ' or min(kafka_volume_quota_throttle_factor{cluster="a\\"b"}) < 1'
    )


def test_throttling_is_false_on_an_empty_answer_and_unknown_when_prometheus_cannot_answer(api):
    prometheus = PrometheusFactor(URL)
    api.get(f"{URL}/api/v1/query", json=vector())
    assert prometheus.throttling(C1, "KafkaVolumeQuotaThrottle") is False
    for answer in (
        {"json": {"status": "error", "error": "bad query"}, "status": 400},
        {"json": ["not", "an", "object"]},
        {"json": {"status": "success", "data": {"result": "3"}}},
        {"body": requests.ConnectionError("refused")},
    ):
        api.replace(responses.GET, f"{URL}/api/v1/query", **answer)
        assert prometheus.throttling(C1, "KafkaVolumeQuotaThrottle") is None


THROTTLING = PrometheusFactor.throttling_query(C1, "KafkaVolumeQuotaThrottle")


def confirming_world(tmp_path):
    """Alice's quota in Kafka, and an enforcer that confirms with Prometheus."""
    kafka = InMemoryQuotas({QuotaEntity.user("alice"): {"producer_byte_rate": 800.0}})
    journal = Journal(tmp_path / "j.sqlite3")
    metrics = EnforcerMetrics(("c1",), CLUSTER_LABEL_DEFAULT)
    applier = Applier("c1", QuotaPolicy(("producer_byte_rate",), {}), kafka, journal, metrics)
    enforcer = Enforcer(
        {"c1": applier}, journal, metrics, C1.label, prometheus=PrometheusFactor(URL)
    )
    return kafka, journal, enforcer


def stale_world(tmp_path):
    """An enforcer (confirming with Prometheus) that received the resolution of an episode."""
    kafka, journal, enforcer = confirming_world(tmp_path)
    start = datetime.now(UTC) - timedelta(minutes=10)
    resolution = throttle_webhook(cluster="c1", factor=None, starts_at=start, ends_at=start)
    enforcer.handle(webhook_from_dict(resolution))
    late = webhook_from_dict(throttle_webhook(cluster="c1", factor=0.5, starts_at=start))
    return kafka, journal, enforcer, late


def answer(api, query: str, body) -> None:
    api.get(f"{URL}/api/v1/query", match=[matchers.query_param_matcher({"query": query})], **body)


def test_a_stale_judged_firing_throttles_when_prometheus_says_the_throttle_is_on(api, tmp_path):
    """Alertmanager resolved the alert itself and, Prometheus reaching it again, re-sends it
    with its old startsAt within the stale window: Prometheus knows it still fires."""
    kafka, journal, enforcer, late = stale_world(tmp_path)
    answer(api, THROTTLING, {"json": vector(1)})
    answer(api, PrometheusFactor.query_for(C1), {"json": vector(0.5)})
    outcome = enforcer.handle(late)
    assert outcome.stale == 0
    assert kafka.values[QuotaEntity.user("alice")]["producer_byte_rate"] == 400.0
    journal.close()


@pytest.mark.parametrize(
    "prometheus_says",
    [{"json": vector()}, {"body": requests.ConnectionError("refused")}],
    ids=["nothing fires", "unreachable"],
)
def test_a_stale_firing_stays_ignored_unless_prometheus_says_the_throttle_is_on(
    api, tmp_path, caplog, prometheus_says
):
    kafka, journal, enforcer, late = stale_world(tmp_path)
    answer(api, THROTTLING, prometheus_says)
    assert enforcer.handle(late).stale == 1
    assert kafka.values[QuotaEntity.user("alice")]["producer_byte_rate"] == 800.0
    if "body" in prometheus_says:
        assert "cannot confirm with Prometheus" in caplog.text
    journal.close()


def test_a_firing_that_is_not_stale_does_not_ask_whether_it_throttles(api, tmp_path):
    kafka, journal, enforcer, _ = stale_world(tmp_path)
    answer(api, PrometheusFactor.query_for(C1), {"json": vector(0.5)})
    enforcer.handle(webhook_from_dict(throttle_webhook(cluster="c1", factor=0.5)))
    assert [call.request.params["query"] for call in api.calls] == [PrometheusFactor.query_for(C1)]
    journal.close()


def test_the_clusters_status_answers_while_prometheus_is_asked_to_confirm_a_throttle(api, tmp_path):
    """The factor is chosen (here: confirmed with a slow Prometheus) before the applier takes
    the cluster's lock, so /status does not wait for Prometheus' answer."""
    kafka, journal, enforcer = confirming_world(tmp_path)
    asked, answer_now = threading.Event(), threading.Event()

    def slow_prometheus(_request):
        asked.set()
        assert answer_now.wait(60), "the test never let Prometheus answer"
        return 200, {}, json.dumps(vector(0.5))

    api.add_callback(responses.GET, f"{URL}/api/v1/query", callback=slow_prometheus)
    webhook = webhook_from_dict(throttle_webhook(cluster="c1", factor=0.0))
    throttling = threading.Thread(target=enforcer.handle, args=(webhook,))
    throttling.start()
    try:
        assert asked.wait(30), "the throttle was never confirmed with Prometheus"
        statuses: list[dict] = []
        reading = threading.Thread(target=lambda: statuses.append(enforcer.status()))
        reading.start()
        reading.join(30)
        assert statuses, "the status waited for Prometheus"
        assert statuses[0]["clusters"]["c1"]["applied_factor"] == 1.0
    finally:
        answer_now.set()
        throttling.join(30)
        journal.close()
    assert kafka.values[QuotaEntity.user("alice")]["producer_byte_rate"] == 400.0
