"""Confirming a lower factor with Prometheus' instant query API (mocked with `responses`)."""

import pytest
import requests
import responses

from devkit.alertmanager import throttle_webhook
from devkit.memory_quotas import InMemoryQuotas
from enforcer.applier import Applier
from enforcer.journal import Journal
from enforcer.metrics import EnforcerMetrics
from enforcer.prometheus_check import PrometheusFactor, confirmed
from enforcer.quota_plan import QuotaPolicy
from enforcer.service import Enforcer
from enforcer.webhook_payload import webhook_from_dict
from kvq.kafka.quota_entity import QuotaEntity

URL = "http://prometheus.test:9090"


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
    assert PrometheusFactor(URL).current("prod-eu-1") == 0.25
    query = api.calls[0].request.params["query"]
    assert query == 'min(kafka_volume_quota_throttle_factor{cluster="prod-eu-1"})'


def test_fresher_prometheus_value_is_used_when_lowering(api):
    api.get(f"{URL}/api/v1/query", json=vector(1.0))
    assert confirmed("c1", 0.0, 1.0, PrometheusFactor(URL)) == 1.0


def test_raising_the_factor_does_not_ask(api):
    assert confirmed("c1", 1.0, 0.0, PrometheusFactor(URL)) == 1.0
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
    assert confirmed("c1", 0.0, 1.0, PrometheusFactor(URL)) == 0.0


def test_cluster_names_are_escaped_in_promql():
    assert PrometheusFactor.query_for('a"b\\c') == (
        'min(kafka_volume_quota_throttle_factor{cluster="a\\"b\\\\c"})'
    )


def test_enforcer_uses_prometheus_fresher_factor_before_throttling(api, tmp_path):
    alice = QuotaEntity.user("alice")
    kafka = InMemoryQuotas({alice: {"producer_byte_rate": 800.0}})
    journal = Journal(tmp_path / "j.sqlite3")
    metrics = EnforcerMetrics(("c1",))
    policy = QuotaPolicy(("producer_byte_rate",), {})
    applier = Applier("c1", policy, kafka, journal, metrics)
    enforcer = Enforcer({"c1": applier}, journal, metrics, prometheus=PrometheusFactor(URL))
    api.get(f"{URL}/api/v1/query", json=vector(0.5))
    enforcer.handle(webhook_from_dict(throttle_webhook(cluster="c1", factor=0.0)))
    assert kafka.values[alice]["producer_byte_rate"] == 400.0
    assert len(api.calls) == 1
    enforcer.handle(webhook_from_dict(throttle_webhook(cluster="c1", factor=None)))
    assert kafka.values[alice]["producer_byte_rate"] == 800.0
    assert len(api.calls) == 1, "raising the factor back to 1 needs no confirmation"
    journal.close()
