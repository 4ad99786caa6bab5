"""Observed-rate references on real Kafka: the brokers' own quota sensors, exported by the JMX
exporter agent with the rules in deploy/jmx-exporter/, scraped by a real Prometheus, slow a
principal whose quota is far above what it writes."""

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

import pytest

from devkit.java_producer import JavaPerfProducer
from devkit.kafka_cluster import KafkaCluster
from devkit.processes import wait_until
from devkit.producer_load import LoadProducer
from devkit.prometheus import Prometheus, run_prometheus
from enforcer.applier import Applier
from enforcer.journal import Journal
from enforcer.metrics import EnforcerMetrics
from enforcer.observed_rates import DEFAULT_QUERY, ObservedRates
from enforcer.prometheus_check import PrometheusFactor
from enforcer.quota_client import KafkaQuotaClient
from enforcer.quota_plan import BYTE_RATE_FLOOR, Change, QuotaPolicy
from enforcer.request_sizes import DEFAULT_THROTTLE_QUERY, RequestSizes
from kvq.kafka.quota_entity import QuotaEntity
from kvq.settings.config import CLUSTER_LABEL_DEFAULT
from tests.enforcer.applier_support import apply_step

pytestmark = [pytest.mark.e2e, pytest.mark.paced]

P = "producer_byte_rate"
ALICE = QuotaEntity.user("alice")
QUOTA = 2_000_000.0
OFFERED = 100_000.0
FACTOR = 0.5
QUOTA_SAMPLES = 4
"""quota.window.num for this broker (Kafka's default is 11): the quota window is 4 x 1 s, so a
throttle settles in seconds instead of tens of seconds; what the window means does not change."""
KAFKA_WINDOW_S = float(QUOTA_SAMPLES)
"""The rate a throttle holds is measured after one window has passed."""
MEASURED_S = 3 * KAFKA_WINDOW_S
"""Kafka holds a rate by muting a channel after a request that overshoots: acknowledgements come
in bursts, the average over two windows is the rate."""


@pytest.fixture
def kafka_with_agent(tmp_path, kafka_dist):
    with KafkaCluster(
        tmp_path / "kafka",
        nodes=1,
        log_dirs_per_node=1,
        log_dir_bytes=64 << 20,
        dist=kafka_dist,
        jmx_exporter=True,
        broker_properties={"quota.window.num": str(QUOTA_SAMPLES)},
    ) as kafka:
        yield kafka


def test_a_principal_far_below_its_quota_is_slowed_to_factor_x_its_rate(tmp_path, kafka_with_agent):
    kafka = kafka_with_agent
    client = KafkaQuotaClient(kafka.admin_properties)
    journal = Journal(tmp_path / "journal.sqlite3")
    producer = LoadProducer(kafka.sasl_bootstrap, "app", "alice", kafka.users["alice"])
    try:
        # Kafka records its quota sensors only while some quota exists.
        client.alter([Change(ALICE, P, QUOTA)])
        producer.run_steady(["observed"], OFFERED)
        with run_prometheus(
            tmp_path / "prometheus", targets={"kafka": kafka.metrics_targets}
        ) as prometheus:

            def alice_rate(query: str = DEFAULT_QUERY) -> float:
                found = [s for s in prometheus.query(query) if s["metric"].get("user")]
                return float(found[0]["value"][1]) if found else 0.0

            wait_until(lambda: alice_rate() > 0.9 * OFFERED, 60, what="alice's rate scraped")
            policy = QuotaPolicy((P,), {P: None}, byte_rate_floor=BYTE_RATE_FLOOR)
            rates = ObservedRates(PrometheusFactor(prometheus.url))
            applier = Applier(
                "c1",
                policy,
                client,
                journal,
                EnforcerMetrics(("c1",), CLUSTER_LABEL_DEFAULT),
                observed_rates=rates,
            )
            # Her reference is her highest rate over the lookback (no higher than before a step):
            # a connection's first seconds can read above what she offers, as Kafka's rate is
            # over a window not yet full.
            apply_step(applier, FACTOR)
            peak = max(alice_rate(q) for q in rates.queries())
            quota = client.describe()[ALICE][P]
            assert 0.4 * OFFERED <= quota <= FACTOR * peak, (
                f"alice's quota {quota}: not {FACTOR} x her observed rate (peak {peak:.0f} B/s)"
            )
            assert quota <= 0.1 * FACTOR * QUOTA, (
                f"alice's 2 MB/s quota set to {quota}: factor x what she writes, not x her quota"
            )
            # The first overshoot mutes alice for about a window, then she catches up in bursts:
            # her rate settles within two windows.
            time.sleep(2 * KAFKA_WINDOW_S)
            start = time.monotonic()
            time.sleep(MEASURED_S)
            achieved = producer.log.rate(start, time.monotonic())
            assert 0.6 * quota <= achieved <= 1.2 * quota, (
                f"alice achieved {achieved:.0f} B/s of {OFFERED:.0f} offered at factor {FACTOR} "
                f"(quota {quota:.0f})"
            )
            apply_step(applier, 1.0)
            assert client.describe()[ALICE][P] == QUOTA
    finally:
        producer.close()
        journal.close()
        client.close()


BATCH = 16384
"""The Java producer's batch.size (its default): the most one produce request carries for its one
partition."""
SLOW = 4000.0
"""alice's quota: far below what she offers, so every request waits its throttle time out."""


@contextmanager
def java_producer_held(
    tmp_path, kafka: KafkaCluster, entity: QuotaEntity, quota: float, user: str, client_id: str
) -> Iterator[tuple[JavaPerfProducer, Prometheus, KafkaQuotaClient]]:
    """A Java producer of `user` offering five times `quota`, which `entity` holds it to, and
    Prometheus scraping the broker's quota sensors; all stopped on the way out."""
    client = KafkaQuotaClient(kafka.admin_properties)
    producer = None
    try:
        client.alter([Change(entity, P, quota)])
        producer = JavaPerfProducer(
            kafka, tmp_path / "java", f"{user}-{client_id}", 1, 5 * quota, user, client_id
        )
        with run_prometheus(
            tmp_path / "prometheus", targets={"kafka": kafka.metrics_targets}
        ) as prometheus:
            yield producer, prometheus, client
    finally:
        if producer is not None:
            producer.close()
        client.close()


def test_kafkas_throttle_times_tell_a_java_producers_request_size(tmp_path, kafka_with_agent):
    """alice's Java producer held at a quota far below what it offers waits each throttle time
    out (KIP-219) and then sends a full batch, answered with about BATCH / SLOW: the request
    size read from Kafka's average throttle time (through the JMX exporter and Prometheus) is
    about a batch."""
    policy = QuotaPolicy((P,), {P: None}, byte_rate_floor=BYTE_RATE_FLOOR)
    pair = (ALICE, P)
    held = java_producer_held(tmp_path, kafka_with_agent, ALICE, SLOW, "alice", "java-batch")
    with held as (producer, prometheus, _):
        sizes = RequestSizes(PrometheusFactor(prometheus.url), ask_seconds=0.0)
        sizes.held({pair: SLOW}, {pair: SLOW})  # held at SLOW from her first request

        def estimate() -> float:
            return sizes.requests("c1", policy, KAFKA_WINDOW_S).sizes.get(pair, 0.0)

        wait_until(lambda: estimate() > 0.6 * BATCH, 90, what="alice's request size")
        told = [ms for _, ms in producer.log.throttles]
        assert estimate() <= 1.3 * BATCH, f"told {told} ms"
        assert max(told) <= 2.5 * BATCH / SLOW * 1000, "no request larger than a batch or two"


EMPTIED_SLOW = 2000.0
"""alice's quota in the next test: a batch takes twice the 4 s window of it."""


def test_a_request_after_a_throttle_longer_than_the_window_meets_it_empty(
    tmp_path, kafka_with_agent
):
    """alice's Java producer held at EMPTIED_SLOW on a 4 s quota window: each batch takes about
    8 s of her quota, she waits the throttle out, and her next request meets a window that
    emptied, so Kafka answers BATCH / q less the window less a sample (3 s; Rate.windowSize).
    With kvq.enforcer.throttle.request.throttle.time=PT8S (raises for 4 s of a quota, past
    that window) her request size is read with those 3 s added back: about a batch, where
    without them it reads about two thirds of one (request_sizes.emptied_window)."""
    raising = QuotaPolicy(
        (P,),
        {P: None},
        byte_rate_floor=BYTE_RATE_FLOOR,
        request_bytes=32768,
        request_throttle_seconds=8.0,
    )
    pair = (ALICE, P)
    held = java_producer_held(tmp_path, kafka_with_agent, ALICE, EMPTIED_SLOW, "alice", "java")
    with held as (producer, prometheus, _):

        def estimate(policy: QuotaPolicy) -> float:
            sizes = RequestSizes(PrometheusFactor(prometheus.url), ask_seconds=0.0)
            sizes.held({pair: EMPTIED_SLOW}, {pair: EMPTIED_SLOW})
            return sizes.requests("c1", policy, KAFKA_WINDOW_S).sizes.get(pair, 0.0)

        emptied = BATCH / EMPTIED_SLOW - (KAFKA_WINDOW_S - 1.0)

        def settled() -> bool:  # its first batches met the ones before them
            last = [ms / 1000 for _, ms in producer.log.throttles][-3:]
            each = len(last) == 3 and all(abs(t - emptied) <= 1.0 for t in last)
            return each and estimate(raising) > 0.85 * BATCH

        wait_until(settled, 150, what=f"her batches told {emptied:.1f} s, read")
        read = estimate(raising)
        without = estimate(replace(raising, request_throttle_seconds=None))
        told = [ms / 1000 for _, ms in producer.log.throttles]
    assert read <= 1.25 * BATCH, f"told {told} s"
    assert without <= 0.8 * BATCH, "without the window: its throttle times x the quota"


BOB = QuotaEntity.user("bob")
DEFAULT = QuotaEntity.default_user()


def test_a_user_under_the_default_users_quota_is_sized_and_raised_alone(tmp_path, kafka_with_agent):
    """bob's Java producer, held by the default user's quota far below what it offers: Kafka
    tags its sensor user=bob, client-id="", so its requests are sized as bob's own (the pair a
    raise separates, quota_plan.separated_user); a quota of his own (KIP-55 level 3) then holds
    him, on the same sensor, while the default user's still holds everyone else."""
    policy = QuotaPolicy((P,), {P: None}, byte_rate_floor=BYTE_RATE_FLOOR)
    held = java_producer_held(tmp_path, kafka_with_agent, DEFAULT, SLOW, "bob", "java")
    with held as (producer, prometheus, client):
        sizes = RequestSizes(PrometheusFactor(prometheus.url), ask_seconds=0.0)
        sizes.held({(DEFAULT, P): SLOW}, {(DEFAULT, P): SLOW})

        def estimate() -> float:
            return sizes.requests("c1", policy, KAFKA_WINDOW_S).sizes.get((BOB, P), 0.0)

        wait_until(lambda: estimate() > 0.6 * BATCH, 90, what="bob's request size")
        raised = 4 * SLOW
        client.alter([Change(BOB, P, raised)])
        told = producer.log.throttles
        start = len(told)
        shorter = 2.5 * BATCH / raised * 1000

        def held_by_his_own() -> bool:
            latest = [ms for _, ms in told[start:]][-3:]
            return len(latest) == 3 and max(latest) <= shorter

        wait_until(held_by_his_own, 60, what=f"bob told {shorter:.0f} ms or less")
        series = [s["metric"] for s in prometheus.query(DEFAULT_THROTTLE_QUERY)]
        bobs = [m for m in series if m.get("user") == "bob"]
        assert [m.get("clientId", "") for m in bobs] == [""], "one sensor, kept"
        assert client.describe()[DEFAULT][P] == SLOW
