"""The Strimzi operator stand-ins make the calls Strimzi's operators make, against real Kafka."""

from __future__ import annotations

import pytest

from devkit.processes import wait_until
from devkit.strimzi_operators import ClusterOperator, UserOperator, UserQuotas
from kvq.kafka.quota_entity import QuotaEntity
from tests.quota_backends import kafka_quotas_left_as_found, key

pytestmark = pytest.mark.integration

P = "producer_byte_rate"
C = "consumer_byte_rate"
HOUR = 3600.0


@pytest.fixture
def kafka(shared_kafka):
    with kafka_quotas_left_as_found(shared_kafka) as backend:
        yield backend


def test_quotas_map_to_four_keys_a_field_left_out_removed():
    changes = UserQuotas(producer_byte_rate=1000).changes(QuotaEntity.user("alice"))
    assert {c.key: c.value for c in changes} == {
        P: 1000.0,
        C: None,
        "request_percentage": None,
        "controller_mutation_rate": None,
    }
    assert UserQuotas.from_kafka({P: 1000.9}) == UserQuotas(producer_byte_rate=1000)


def test_the_user_operator_puts_a_users_quotas_back_from_its_cache(kafka):
    kafka.seed({"user": "alice"}, producer_byte_rate=500.0, consumer_byte_rate=7.0)
    desired = {"alice": UserQuotas(producer_byte_rate=1000)}
    with UserOperator(kafka.admin_properties, desired, interval=HOUR, cache_refresh=HOUR) as uo:
        wait_until(lambda: uo.alterations == 1, what="the first reconciliation's alteration")
        wait_until(lambda: kafka.quotas() == {key(user="alice"): {P: 1000.0}}, what="put back")
        kafka.seed({"user": "alice"}, producer_byte_rate=500.0)
        uo.reconcile()
        assert uo.alterations == 1, "its cache still says 1000: nothing to do until refreshed"
        uo.refresh_cache()
        uo.reconcile()
        assert uo.alterations == 2
        uo.edit("alice", UserQuotas(producer_byte_rate=2000))
        assert uo.alterations == 3, "an edited KafkaUser is reconciled at once"
        wait_until(lambda: kafka.quotas() == {key(user="alice"): {P: 2000.0}}, what="edited")


def test_the_cluster_operator_owns_the_default_users_quotas(kafka):
    kafka.seed({"user": None}, producer_byte_rate=300.0)
    kafka.seed({"user": "alice"}, producer_byte_rate=300.0)
    quotas = UserQuotas(producer_byte_rate=2000)
    with ClusterOperator(kafka.admin_properties, quotas, interval=HOUR) as co:
        wait_until(lambda: co.alterations == 1, what="the first reconciliation's alteration")
        wait_until(
            lambda: kafka.quotas().get(key(user=None)) == {P: 2000.0}, what="default user set"
        )
        co.reconcile()
        assert co.alterations == 1, "Kafka holds the resource's values: nothing to do"
    assert kafka.quotas()[key(user="alice")] == {P: 300.0}, "never touches a named user"
