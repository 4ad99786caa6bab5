"""Observed-rate references (kvq.enforcer.throttle.reference=observed-rate): which rate each
throttled producer quota is scaled from, captured once per episode, never from throttled rates."""

import logging
from datetime import timedelta

import pytest

from devkit.memory_quotas import InMemoryQuotas
from devkit.processes import server_port
from devkit.prometheus import run_prometheus
from enforcer.applier import Applier
from enforcer.journal import Journal
from enforcer.metrics import EnforcerMetrics
from enforcer.observed_rates import (
    ObservedRate,
    ObservedRates,
    governing,
    parse_vector,
    select_references,
)
from enforcer.prometheus_check import PrometheusFactor
from enforcer.quota_plan import (
    KAFKA_LONGEST_THROTTLE_MS,
    KAFKA_QUOTA_WINDOW_SECONDS,
    QuotaPolicy,
    desired_value,
    entity_minimum,
    plan,
    request_minimum,
    sustained_share,
)
from kvq.kafka.quota_entity import QuotaEntity
from kvq.settings.config import CLUSTER_LABEL_DEFAULT
from tests.enforcer.applier_support import apply_step
from tests.enforcer.produce_model import throttles_at

P = "producer_byte_rate"
DEFAULT = QuotaEntity.default_user()
ALICE = QuotaEntity.user("alice")
BOB_APP = QuotaEntity.of({"user": "bob", "client-id": "app"})
ETL = QuotaEntity.of({"client-id": "etl"})
ETL_MIRROR = QuotaEntity.of({"user": None, "client-id": "etl"})
REPLICATOR = QuotaEntity.user("replicator")
POLICY = QuotaPolicy((P,), {P: 10_000_000}, frozenset({"replicator"}), byte_rate_floor=8192)
ORIGINALS = {
    (ALICE, P): 2_000_000.0,
    (BOB_APP, P): 20_000.0,
    (ETL, P): 2_000_000.0,
    (ETL_MIRROR, P): None,
    (DEFAULT, P): None,
    (REPLICATOR, P): None,
}
"""What tracked_originals finds for these quotas (no default-user quota in Kafka: client-id etl
is mirrored, the excluded replicator gets an override)."""


def seen(*rates: tuple[str, str, float]) -> list[ObservedRate]:
    return [ObservedRate(user, client, rate) for user, client, rate in rates]


def test_a_quota_far_above_its_rate_is_scaled_from_the_rate():
    references = select_references(POLICY, ORIGINALS, seen(("alice", "", 300_000.0)))
    assert references == {(ALICE, P): 300_000.0}
    value = desired_value(POLICY, (ALICE, P), 2_000_000.0, 0.5, ORIGINALS, 300_000.0)
    assert value == 150_000.0, "factor x what alice writes, not factor x her 2 MB/s quota"


def test_the_default_user_is_scaled_from_its_busiest_user_and_excluded_traffic_is_left_out():
    observed = seen(
        ("erin", "", 40_000.0),  # a user on the default-user quota: one sensor per user
        ("frank", "", 90_000.0),
        ("replicator", "", 5_000_000.0),  # excluded: keeps its limits, never a reference
    )
    references = select_references(POLICY, ORIGINALS, observed)
    assert references == {(DEFAULT, P): 90_000.0}
    desired = plan(POLICY, ORIGINALS, 0.5, references=references)
    assert desired[(DEFAULT, P)] == 45_000.0, "min(base 10 MB/s, busiest user) x factor"


def test_traffic_is_held_to_the_entity_that_governs_it_while_throttled():
    """Before the throttle carol's client-id etl is tagged (client-id=etl); while throttled the
    mirror user=<default>,client-id=etl outranks it (KIP-55), so the mirror gets the rate. A
    client with no quota at all lands on the default user the throttle sets."""
    observed = seen(("", "etl", 37_500.0), ("", "java-etl", 60_000.0), ("bob", "app", 19_000.0))
    references = select_references(POLICY, ORIGINALS, observed)
    assert references == {(ETL_MIRROR, P): 37_500.0, (DEFAULT, P): 60_000.0, (BOB_APP, P): 19_000.0}


def test_an_entity_idle_when_the_episode_starts_is_held_at_the_floor():
    references = select_references(POLICY, ORIGINALS, seen(("alice", "", 0.0)))
    assert references == {(ALICE, P): 0.0}
    desired = plan(POLICY, ORIGINALS, 0.9, references=references)
    assert desired[(ALICE, P)] == 8192.0
    assert desired[(DEFAULT, P)] == 9_000_000.0, "no observation: the base x factor"


def test_kip55_order_of_the_governing_entity():
    alice_app = QuotaEntity.of({"user": "alice", "client-id": "app"})
    holding = {ALICE, alice_app, DEFAULT, ETL}
    assert governing(holding, "alice", "app") == alice_app
    assert governing(holding, "alice", "") == ALICE
    assert governing(holding, "erin", "") == DEFAULT
    assert governing(holding, "", "etl") == DEFAULT, "the default user outranks client-id=etl"
    assert governing({ETL}, "", "etl") == ETL
    assert governing({ETL}, "", "other") is None


@pytest.mark.parametrize(
    ("original", "reference", "factor", "expected"),
    [
        (2_000_000.0, 300_000.0, 0.5, 150_000.0),
        (2_000_000.0, 10_000.0, 0.1, 8192.0),  # never below the floor
        (20_000.0, 300_000.0, 0.5, 10_000.0),  # a reference above the quota: the quota binds
        (2_000_000.0, 300_000.0, 0.0, 8192.0),  # factor 0 is the floor, as without references
        (2_000_000.0, 300_000.0, 1.0, 2_000_000.0),  # restored exactly
        (None, 300_000.0, 0.5, 150_000.0),  # unlimited and no base: from the rate alone
        (4096.0, 300_000.0, 0.5, 4096.0),  # a quota below the floor stays, as before
    ],
)
def test_reference_bounds(original, reference, factor, expected):
    policy = QuotaPolicy((P,), {P: None}, byte_rate_floor=8192)
    pair = (ALICE if original is not None else DEFAULT, P)
    assert desired_value(policy, pair, original, factor, {pair: original}, reference) == expected


BURSTS = QuotaPolicy((P,), {P: None}, byte_rate_floor=8192, burst_ratio=1.5)
"""References 1.5 times what the entities write sustained."""


@pytest.mark.parametrize(
    ("original", "reference", "factor", "expected"),
    [
        (2_000_000.0, 300_000.0, 1.0, 2_000_000.0),  # restored exactly
        (2_000_000.0, 300_000.0, 0.95, 271_450.0),  # near 1: most of the bursts' allowance
        (2_000_000.0, 300_000.0, 0.4, 82_560.0),  # 0.4 x the sustained 200,000, and a little
        (2_000_000.0, 300_000.0, 0.05, 10_000.0),  # low factors: a share of the sustained rate
        (2_000_000.0, 300_000.0, 0.0, 8192.0),  # factor 0: the minimum, as with ratio 1
        (20_000.0, 300_000.0, 0.5, 10_000.0),  # a quota below the reference binds: factor x it
    ],
)
def test_a_burst_ratio_scales_the_sustained_rate_and_keeps_the_bursts_near_1(
    original, reference, factor, expected
):
    """With references `burst_ratio` times what the entities write sustained, a low factor is
    its share of the sustained rate (what graceful slowdown plans with): scaled from the
    reference alone, 0.05 let each entity write 0.075 of what it wrote."""
    pair = (ALICE, P)
    assert desired_value(BURSTS, pair, original, factor, {pair: original}, reference) == expected


def test_the_sustained_share_rises_with_the_factor_between_its_share_of_each_rate():
    factors = [i / 100 for i in range(101)]
    shares = [sustained_share(f, 1.5) for f in factors]
    assert shares == sorted(shares) and shares[0] == 0.0 and shares[-1] == 1.0
    for factor, share in zip(factors, shares, strict=True):
        assert factor / 1.5 <= share <= factor
    assert [sustained_share(f, 1.0) for f in factors] == factors


def test_prometheus_answers_are_parsed_and_user_names_decoded():
    vector = [
        {"metric": {"user": "CN%3Dalice%2COU%3Dx", "clientId": "app"}, "value": [1, "12.5"]},
        {"metric": {"clientId": "etl"}, "value": [1, "7"]},
        {"metric": {"user": "bob"}, "value": [1, "NaN"]},
        {"metric": {"user": "bob"}, "value": [1, "-1"]},
        {"bad": True},
    ]
    assert parse_vector(vector) == seen(("CN=alice,OU=x", "app", 12.5), ("", "etl", 7.0))


class RatesNow:
    """The rates the brokers report now (a throttle lowers them): the applier's rate source,
    without a lookback (the previous episode's references are tested in
    test_observed_rate_lookback.py)."""

    lookback = timedelta(0)

    def __init__(self, rates):
        self.rates = rates
        self.asked = 0

    def references(self, cluster, policy, originals, previous=None):
        self.asked += 1
        assert not previous, "no lookback, nothing carried over"
        return select_references(policy, originals, self.rates)


def applier_with(kafka, journal, rates):
    metrics = EnforcerMetrics(("c1",), CLUSTER_LABEL_DEFAULT)
    return Applier(
        "c1", POLICY, kafka, journal, metrics, sleep=lambda _s: None, observed_rates=rates
    )


def test_references_are_captured_once_per_episode_never_from_throttled_rates(tmp_path):
    kafka = InMemoryQuotas({ALICE: {P: 2_000_000.0}})
    journal = Journal(tmp_path / "journal.sqlite3")
    try:
        rates = RatesNow(seen(("alice", "", 300_000.0)))
        apply_step(applier_with(kafka, journal, rates), 0.5)
        assert kafka.values[ALICE][P] == 150_000.0
        journaled = journal.for_cluster("c1").episode()
        assert journaled is not None and journaled.pairs[(ALICE, P)].reference == 300_000.0
        rates.rates = seen(("alice", "", 150_000.0))  # what the throttle let through
        restarted = applier_with(kafka, journal, rates)  # the references come from the journal
        apply_step(restarted, 0.25)
        assert kafka.values[ALICE][P] == 75_000.0, "0.25 x the rate before the episode"
        apply_step(restarted, 0.5)
        assert kafka.values[ALICE][P] == 150_000.0, "no ratchet: back to 0.5 x 300 kB/s"
        assert rates.asked == 1
        apply_step(restarted, 1.0)
        assert kafka.values[ALICE][P] == 2_000_000.0
        rates.rates = seen(("alice", "", 400_000.0))
        apply_step(restarted, 0.5)
        assert kafka.values[ALICE][P] == 200_000.0, "a new episode captures anew"
        assert rates.asked == 2
    finally:
        journal.close()


@pytest.mark.e2e
def test_no_observation_keeps_the_original_and_says_so_once(tmp_path, caplog):
    """Prometheus unreachable, or without the series: the throttle scales the originals."""
    kafka = InMemoryQuotas({ALICE: {P: 2_000_000.0}})
    with run_prometheus(tmp_path / "prometheus", targets={}) as prometheus:
        empty = ObservedRates(PrometheusFactor(prometheus.url))
        caplog.set_level(logging.WARNING, "kvq.enforcer")
        assert empty.references("c1", POLICY, ORIGINALS) == {}
    assert [r.message for r in caplog.records if "no observed produce rates" in r.message]
    caplog.clear()
    unreachable = ObservedRates(PrometheusFactor(f"http://127.0.0.1:{server_port()}", timeout_s=1))
    journal = Journal(tmp_path / "journal.sqlite3")
    try:
        apply_step(applier_with(kafka, journal, unreachable), 0.5)
    finally:
        journal.close()
    assert kafka.values[ALICE][P] == 1_000_000.0, "the throttle still applies, from the original"
    fallback = [r for r in caplog.records if "no observed produce rates" in r.message]
    assert len(fallback) == 1


ENTITY_MINIMUM = QuotaPolicy((P,), {P: None}, byte_rate_floor=8192, longest_throttle_seconds=60.0)
"""Without a request size: each entity seen writing gets its own minimum (a minute's throttle)."""


@pytest.mark.parametrize(
    ("original", "reference", "factor", "expected"),
    [
        (2_000_000.0, 30_000.0, 0.0, 4_647.0),  # 30 kB/s x 11 / (11 + 60): below the floor
        (2_000_000.0, 1_000_000.0, 0.0, 154_929.0),  # a fast entity: above it
        (2_000_000.0, 1_000_000.0, 0.5, 500_000.0),  # above its minimum: factor x rate
        (None, 2_000.0, 0.0, 309.0),  # one slower than the floor is slowed too
        (2_000_000.0, 0.0, 0.0, 8192.0),  # idle over the lookback: it may write at any rate
        (2_000.0, 300_000.0, 0.0, 2_000.0),  # a quota below the minimum stays, as before
    ],
)
def test_each_entity_seen_writing_gets_a_minimum_from_its_own_rate(
    original, reference, factor, expected
):
    pair = (ALICE if original is not None else DEFAULT, P)
    value = desired_value(ENTITY_MINIMUM, pair, original, factor, {pair: original}, reference)
    assert value == expected


@pytest.mark.parametrize("rate", [300.0, 30_000.0, 1e6, 1e9])
def test_kafkas_throttle_time_from_the_rate_to_the_minimum_is_the_longest_allowed(rate):
    """Kafka's own formula (QuotaUtils.throttleTime) at the minimum, for the rate the entity was
    seen writing: the longest throttle time (a minute, to the rounding of whole bytes), and it
    fits Kafka's int (ClientQuotaManager narrows it) for rates 25,000 times higher (30,000 but
    for the rounding)."""
    minimum = entity_minimum(rate, 60.0)
    window_ms = KAFKA_QUOTA_WINDOW_SECONDS * 1000

    def throttle_ms(written: float) -> float:
        return (written - minimum) / minimum * window_ms

    assert throttle_ms(rate) == pytest.approx(60_000, rel=0.02)
    assert throttle_ms(25_000 * rate) < KAFKA_LONGEST_THROTTLE_MS


REQUEST_MINIMUM = QuotaPolicy(
    (P, "consumer_byte_rate", "request_percentage"),
    {P: None},
    byte_rate_floor=8192,
    longest_throttle_seconds=60.0,
    request_bytes=65536,
    request_throttle_seconds=10.0,
)
"""64 KiB requests (the demo's producers' buffer) throttled for 10 s at most: 13,108 B/s."""


@pytest.mark.parametrize(
    ("key", "original", "reference", "factor", "expected"),
    [
        (P, 2_000_000.0, 30_000.0, 0.0, 4_647.0),  # factor 0: its own minimum, nothing more
        (P, 2_000_000.0, 1_000_000.0, 0.0, 154_929.0),  # a fast entity's own minimum
        (P, 2_000_000.0, 30_000.0, 0.5, 15_000.0),  # above the minimum: factor x rate
        (P, 2_000_000.0, 30_000.0, 0.2, 6_000.0),  # 0.2 x 13,108 is below 0.2 x its rate
        (P, None, 5_000.0, 0.5, 6_554.0),  # one slower than the minimum: not slowed yet...
        (P, None, 5_000.0, 0.25, 3_277.0),  # ... but once factor x minimum is below its rate
        (P, None, 5_000.0, 0.0, 774.0),  # and at factor 0 to its own minimum
        (P, None, None, 0.0, 8192.0),  # no reference: the floor
        (P, 2_000_000.0, 0.0, 0.0, 8192.0),  # idle over the lookback: the floor
        (P, 10_000.0, 9_000.0, 0.9, 10_000.0),  # a quota below the minimum stays
        ("consumer_byte_rate", 2_000_000.0, 30_000.0, 0.5, 15_000.0),
        ("consumer_byte_rate", None, 5_000.0, 0.5, 6_554.0),
        ("request_percentage", 200.0, None, 0.0, 1.0),  # not a byte rate
    ],
)
def test_the_request_minimum_scales_with_the_factor_and_gives_way_at_factor_0(
    key, original, reference, factor, expected
):
    """An entity writing less than the request minimum is slowed last (at `factor` x it), but
    every lower factor still slows it: held as a constant, it kept 40 principals writing a few
    kB/s per broker from being slowed at all (the volume went past its limit)."""
    pair = (ALICE if original is not None else DEFAULT, key)
    value = desired_value(REQUEST_MINIMUM, pair, original, factor, {pair: original}, reference)
    assert value == expected


def test_a_small_request_size_leaves_the_floor_and_a_higher_own_minimum():
    """16 KiB (a Java producer's batch for one partition) in 10 s: 3,277 B/s, below the floor
    (entities not seen writing) and below the own minimum of one seen writing 30 kB/s."""
    policy = QuotaPolicy(
        (P,),
        {P: None},
        byte_rate_floor=8192,
        longest_throttle_seconds=60.0,
        request_bytes=16384,
        request_throttle_seconds=10.0,
    )
    assert request_minimum(16384, 10.0) == 3_277.0
    assert policy.minimum(P) == 8192.0
    assert policy.minimum(P, 30_000.0, 1.0) == entity_minimum(30_000.0, 60.0) == 4_647.0
    assert policy.minimum(P, 10_000.0, 1.0) == 3_277.0
    assert policy.minimum(P, 10_000.0, 0.0) == entity_minimum(10_000.0, 60.0) == 1_549.0


SAMPLED_S = 2.5
"""Kafka's window is a sum of 1 s samples (12 of them, the oldest overlapping), dropped a sample
at a time: a throttle may run up to this much longer than an exact window of 11 s gives."""


@pytest.mark.parametrize(
    ("request_bytes", "longest_s", "offered"),
    [
        (65536, 10.0, 20_000.0),
        (65536, 10.0, 30_000.0),
        (65536, 10.0, 400_000.0),
        (16384, 5.0, 30_000.0),
        (1_000_000, 30.0, 1_000_000.0),
    ],
)
def test_at_the_request_minimum_kafka_throttles_no_request_longer_than_allowed(
    request_bytes, longest_s, offered
):
    """A producer offering more than the minimum, each request as big as its buffer: at the
    minimum Kafka's throttle times stay within the longest allowed (give or take its sampling)
    and most are at most about half of it (request size / quota); at a third of the minimum
    some are far longer."""
    minimum = request_minimum(request_bytes, longest_s)
    throttled = [ms for _, ms in throttles_at(minimum, request_bytes, offered) if ms > 0]
    assert max(throttled) <= (longest_s + SAMPLED_S) * 1000
    assert sorted(throttled)[len(throttled) // 2] <= 0.6 * longest_s * 1000
    slower = throttles_at(minimum / 3, request_bytes, max(offered, minimum))
    assert max(ms for _, ms in slower) > (longest_s + SAMPLED_S) * 1000
