"""The brokers' quota window (quota.window.num x quota.window.size.seconds): read by the enforcer
before its first plan and with every check of the quota callback, it sets the W of each quota
entity's own minimum (kvq.enforcer.throttle.longest.throttle.time). Read with it, how far back the
brokers average each entity's throttle times (metrics.num.samples x metrics.sample.window.ms):
what the request sizes read from them count on."""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import timedelta

import pytest

from devkit.memory_quotas import InMemoryQuotas
from enforcer.broker_quota_settings import BrokerQuotaSettings
from enforcer.journal import Journal
from enforcer.observed_rates import ObservedRate, select_references
from enforcer.prometheus_check import PrometheusFactor
from enforcer.quota_plan import KAFKA_QUOTA_WINDOW_SECONDS, QuotaPolicy, entity_minimum
from enforcer.request_sizes import RequestSizes
from kvq.kafka.quota_entity import QuotaEntity
from tests.enforcer.applier_support import apply_step, observed_rate_applier

P = "producer_byte_rate"
ALICE = QuotaEntity.user("alice")
RATE = 60_000.0
POLICY = QuotaPolicy((P,), {P: 10_000_000}, byte_rate_floor=8192, longest_throttle_seconds=60.0)


class RatesNow:
    """Alice seen writing RATE: the applier's rate source."""

    lookback = timedelta(0)

    def references(self, cluster, policy, originals, previous=None):
        return select_references(policy, originals, [ObservedRate("alice", "", RATE)])


@pytest.fixture
def journal(tmp_path):
    opened = Journal(tmp_path / "journal.sqlite3")
    yield opened
    opened.close()


def test_at_factor_0_each_entity_is_held_at_its_minimum_over_the_brokers_longest_window(journal):
    kafka = InMemoryQuotas({ALICE: {P: 2_000_000.0}})
    kafka.windows = {0: 3.0, 1: 3.0, 2: 5.0}  # mid-way through a rolling change: the longest
    apply_step(observed_rate_applier(kafka, journal, POLICY, RatesNow()), 0.0)
    assert kafka.values[ALICE][P] == entity_minimum(RATE, 60.0, 5.0) == 4615.0
    assert entity_minimum(RATE, 60.0) == 9295.0, "with Kafka's default 11 s: twice as high"


def test_brokers_that_do_not_say_leave_kafkas_default(journal):
    kafka = InMemoryQuotas({ALICE: {P: 2_000_000.0}})
    applier = observed_rate_applier(kafka, journal, POLICY, RatesNow())
    apply_step(applier, 0.0)
    assert kafka.values[ALICE][P] == entity_minimum(RATE, 60.0, KAFKA_QUOTA_WINDOW_SECONDS)
    assert applier.io.quota_window.seconds == KAFKA_QUOTA_WINDOW_SECONDS


def test_a_window_changed_by_a_rolling_restart_is_taken_in_at_the_next_check_and_logged_once(
    journal, caplog
):
    kafka = InMemoryQuotas({ALICE: {P: 2_000_000.0}})
    applier = observed_rate_applier(kafka, journal, POLICY, RatesNow())
    with caplog.at_level(logging.INFO, logger="kvq.enforcer"):
        apply_step(applier, 0.5)
        kafka.windows = {0: 3.0}
        apply_step(applier, 0.4)  # its check after the apply reads the new window
        apply_step(applier, 0.0)
        apply_step(applier, 0.0)
    assert kafka.values[ALICE][P] == entity_minimum(RATE, 60.0, 3.0)
    said = [r.getMessage() for r in caplog.records if "measure quotas over" in r.getMessage()]
    assert said == [
        "cluster c1: its brokers measure quotas over 3 s in samples of 1 s (the longest "
        "quota.window.num x quota.window.size.seconds); each quota entity's own minimum "
        "follows it"
    ]


def test_the_brokers_sample_length_is_read_with_their_window(journal):
    """quota.window.size.seconds: Kafka leaves a sample out of the window a request meets
    empty (request_sizes.emptied_window), so the plans count on the brokers' own."""
    kafka = InMemoryQuotas({ALICE: {P: 2_000_000.0}})
    kafka.windows, kafka.samples = {0: 6.0, 1: 4.0}, {0: 3.0, 1: 2.0}
    applier = observed_rate_applier(kafka, journal, POLICY, RatesNow())
    assert applier.io.quota_window.sample_seconds == 1.0, "Kafka's default until read"
    apply_step(applier, 0.0)
    assert (applier.io.quota_window.seconds, applier.io.quota_window.sample_seconds) == (6.0, 3.0)
    kafka.down = True
    applier.io.quota_window.learned(BrokerQuotaSettings())
    assert applier.io.quota_window.sample_seconds == 3.0, "brokers that say nothing change nothing"


@pytest.mark.parametrize(
    ("reported", "seconds", "sample"),
    [
        ({"quota.window.num": "11", "quota.window.size.seconds": "1"}, 11.0, 1.0),
        ({"quota.window.num": "3", "quota.window.size.seconds": "2"}, 6.0, 2.0),
        ({"quota.window.num": "3"}, None, None),
        ({"quota.window.num": "0", "quota.window.size.seconds": "1"}, None, None),
        ({"quota.window.num": "three", "quota.window.size.seconds": "1"}, None, None),
        ({"quota.window.num": None, "quota.window.size.seconds": "1"}, None, None),
    ],
)
def test_a_brokers_window_is_its_samples_times_their_size_or_nothing(reported, seconds, sample):
    settings = BrokerQuotaSettings().with_broker(4, reported)
    assert settings.longest_window == seconds
    assert settings.longest_sample == sample


SIZED = replace(POLICY, request_bytes=32768, request_throttle_seconds=8.0, request_share=0.1)
"""Entities seen sending large requests raised for them: 32 KiB within 8 s."""


@pytest.mark.parametrize(
    ("policy", "windows", "samples", "warned"),
    [
        (SIZED, {}, {}, False),  # brokers that do not say: Kafka's default is counted on
        (SIZED, {0: 11.0}, {0: 1.0}, True),
        (SIZED, {0: 3.0, 1: 3.0}, {0: 1.0, 1: 1.0}, False),  # the recommended quota.window.num=3
        (SIZED, {0: 6.0}, {0: 2.0}, True),  # 4 s less than its 6: a request meets the one before
        (POLICY, {0: 11.0}, {0: 1.0}, False),  # nobody raised for large requests
        (replace(SIZED, request_share=0.0), {0: 11.0}, {0: 1.0}, False),
    ],
)
def test_a_window_that_hides_large_requests_from_the_sizes_is_warned_of(
    journal, caplog, policy, windows, samples, warned
):
    """Where the window outlasts half the throttle time a raise is for, Kafka's average
    throttle time shows a producer's large requests late: the operator is told, once, and
    what to set."""
    kafka = InMemoryQuotas({ALICE: {P: 2_000_000.0}})
    kafka.windows, kafka.samples = windows, samples
    sizes = RequestSizes(PrometheusFactor("http://prometheus.test:9090"))
    applier = observed_rate_applier(kafka, journal, policy, RatesNow(), request_sizes=sizes)
    with caplog.at_level(logging.WARNING, logger="kvq.enforcer"):
        applier.io.quota_window.learned(kafka.quota_settings())
        applier.io.quota_window.learned(kafka.quota_settings())
    said = [r.getMessage() for r in caplog.records if "shows a producer's large" in r.getMessage()]
    if not warned:
        assert said == []
        return
    window = max(windows.values())
    assert said == [
        f"cluster c1: its brokers measure quotas over {window:g} s, more than half "
        "kvq.enforcer.throttle.request.throttle.time (8 s) and a sample: Kafka's average "
        "throttle time shows a producer's large requests (a Java producer's batches) late "
        "there, and it may wait out longer throttle times before it is raised for them; "
        "quota.window.num=3 on every broker shows them at its first long throttle times, "
        "where no producer buffers minutes of its writes (docs/reaction-time.md)"
    ]


@pytest.mark.parametrize(
    ("reported", "seconds"),
    [
        ({"metrics.num.samples": "2", "metrics.sample.window.ms": "30000"}, 60.0),
        ({"metrics.num.samples": "2", "metrics.sample.window.ms": "10000"}, 20.0),
        ({"metrics.num.samples": "2"}, None),
        ({"metrics.num.samples": "0", "metrics.sample.window.ms": "10000"}, None),
        ({"metrics.num.samples": "2", "metrics.sample.window.ms": "ten"}, None),
    ],
)
def test_a_brokers_throttle_average_is_its_metric_samples_times_their_length_or_nothing(
    reported, seconds
):
    assert BrokerQuotaSettings().with_broker(4, reported).longest_average == seconds


def test_the_brokers_throttle_average_reaches_the_plans_policy_and_is_said_once_if_not_kafkas(
    journal, caplog
):
    kafka = InMemoryQuotas({ALICE: {P: 2_000_000.0}})
    applier = observed_rate_applier(kafka, journal, POLICY, RatesNow())
    with caplog.at_level(logging.INFO, logger="kvq.enforcer"):
        kafka.averages = {0: 60.0, 1: 60.0}  # Kafka's default: nothing to say
        apply_step(applier, 0.5)
        assert applier.io.quota_window.average_seconds == 60.0
        kafka.averages = {0: 20.0, 1: 60.0}  # mid-way through a rolling change: the longest
        apply_step(applier, 0.4)
        kafka.averages = {0: 20.0, 1: 20.0}
        apply_step(applier, 0.3)
        apply_step(applier, 0.2)
    assert applier.io.quota_window.average_seconds == 20.0
    said = [r.getMessage() for r in caplog.records if "average each quota" in r.getMessage()]
    assert said == [
        "cluster c1: its brokers average each quota entity's throttle times over 20 s (the "
        "longest metrics.num.samples x metrics.sample.window.ms); the request sizes read from "
        "them follow it"
    ]
