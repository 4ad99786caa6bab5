"""Controller mutation quotas on a fake clock: the token bucket, strict and permissive requests.
The strict case on the wire runs on devcluster and on Kafka in tests/differential."""

from __future__ import annotations

import pytest

from devcluster.mutation_quotas import MutationQuotas, ThrottlingQuotaExceeded
from kvq.kafka.quota_entity import QuotaEntity
from tests.clock_support import SettableClock


def quotas(rate: float) -> tuple[MutationQuotas, SettableClock[float]]:
    clock = SettableClock(1000.0)
    table = {QuotaEntity.of([("client-id", "app")]): {"controller_mutation_rate": rate}}
    return MutationQuotas(lambda: table, clock), clock


def test_a_strict_quota_refuses_only_once_the_bucket_is_below_zero_then_refills():
    manager, clock = quotas(2.0)  # burst 22 partitions
    quota = manager.quota_for("u", "app", api_version=6)
    quota.record(20)
    quota.record(10)  # 2 left: taken all the same, 8 below zero
    with pytest.raises(ThrottlingQuotaExceeded):
        quota.record(1)
    assert quota.throttle_ms() == 4000  # 8 partitions at 2 per second
    clock.now += 4
    manager.quota_for("u", "app", api_version=6).record(1)  # refilled to 0: allowed again


def test_a_permissive_quota_takes_everything_and_reports_the_throttle_time():
    manager, clock = quotas(1.0)
    quota = manager.quota_for("u", "app", api_version=5)
    for _ in range(3):
        quota.record(10)  # 11 - 30 = -19
    assert quota.throttle_ms() == 19_000
    clock.now += 1
    assert quota.throttle_ms() == 18_000


def test_no_quota_no_limit():
    manager, _ = quotas(1.0)
    quota = manager.quota_for("u", "other", api_version=7)
    quota.record(10_000)
    assert quota.throttle_ms() == 0


def test_a_throttle_time_of_half_a_millisecond_rounds_up_as_kafka_s_math_round():
    manager, _ = quotas(4000.0)  # burst 44,000 partitions
    quota = manager.quota_for("u", "app", api_version=5)
    quota.record(44_002)  # 2 below zero at 4,000 per second: 0.5 ms
    assert quota.throttle_ms() == 1  # Python's round() would say 0
