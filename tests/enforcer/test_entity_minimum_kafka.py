"""Each quota entity's own minimum on real Kafka: many SASL principals, each writing 30 kB/s to one
broker, held at factor 0 (the 0/1 policy at the limit) to their minimum from their observed rates
(kvq.enforcer.throttle.longest.throttle.time) write a small share of what they did, where the
constant 8 KiB/s floor let each of them keep 27 % of it."""

import time

import pytest

from devkit.kafka_cluster import DEFAULT_USERS, KafkaCluster
from devkit.processes import wait_until
from devkit.producer_load import LoadProducer
from devkit.prometheus import run_prometheus
from enforcer.applier import Applier
from enforcer.journal import Journal
from enforcer.metrics import EnforcerMetrics
from enforcer.observed_rates import DEFAULT_QUERY, ObservedRates
from enforcer.prometheus_check import PrometheusFactor
from enforcer.quota_client import KafkaQuotaClient
from enforcer.quota_plan import BYTE_RATE_FLOOR, Change, QuotaPolicy, entity_minimum
from kvq.kafka.quota_entity import QuotaEntity
from kvq.settings.config import CLUSTER_LABEL_DEFAULT

pytestmark = pytest.mark.e2e

P = "producer_byte_rate"
PRINCIPALS = 10
"""The issue's first row: ten principals, half with a quota of their own, half under the default
user's (a budget per user)."""
OWN = [f"p{i}" for i in range(PRINCIPALS // 2)]
SHARED = [f"p{i}" for i in range(PRINCIPALS // 2, PRINCIPALS)]
QUOTA = 1_000_000.0
OFFERED = 30_000.0
LONGEST_THROTTLE_S = 60.0
QUOTA_SAMPLES = 4
"""quota.window.num for this broker (Kafka's default is 11): a 4 s window settles a throttle in
seconds; the minimum still mutes each principal once, for (rate / minimum - 1) x 4 s, about 22 s,
then holds it at the minimum."""
SETTLE_S = 30.0
MEASURED_S = 30.0


@pytest.fixture
def kafka_many_users(tmp_path, kafka_dist):
    users = {**DEFAULT_USERS, **{name: f"{name}-secret" for name in OWN + SHARED}}
    with KafkaCluster(
        tmp_path / "kafka",
        nodes=1,
        log_dirs_per_node=1,
        log_dir_bytes=256 << 20,
        dist=kafka_dist,
        users=users,
        jmx_exporter=True,
        broker_properties={"quota.window.num": str(QUOTA_SAMPLES)},
    ) as kafka:
        yield kafka


def test_many_principals_at_factor_0_write_a_small_share_of_what_they_did(
    tmp_path, kafka_many_users
):
    kafka = kafka_many_users
    client = KafkaQuotaClient(kafka.admin_properties)
    journal = Journal(tmp_path / "journal.sqlite3")
    producers = [
        LoadProducer(kafka.sasl_bootstrap, f"app-{name}", name, kafka.users[name])
        for name in OWN + SHARED
    ]
    try:
        client.alter(
            [Change(QuotaEntity.user(name), P, QUOTA) for name in OWN]
            + [Change(QuotaEntity.default_user(), P, QUOTA)]
        )
        for producer in producers:
            producer.run_steady(["many"], OFFERED)
        with run_prometheus(
            tmp_path / "prometheus", targets={"kafka": kafka.metrics_targets}
        ) as prometheus:

            def seen() -> int:
                rates = [float(s["value"][1]) for s in prometheus.query(DEFAULT_QUERY)]
                return sum(1 for rate in rates if rate > 0.9 * OFFERED)

            wait_until(lambda: seen() == PRINCIPALS, 90, what="every principal's rate scraped")
            start = time.monotonic()
            time.sleep(MEASURED_S / 2)
            before = sum(p.log.rate(start, time.monotonic()) for p in producers)
            policy = QuotaPolicy(
                (P,),
                {P: None},
                byte_rate_floor=BYTE_RATE_FLOOR,
                longest_throttle_seconds=LONGEST_THROTTLE_S,
            )
            applier = Applier(
                "c1",
                policy,
                client,
                journal,
                EnforcerMetrics(("c1",), CLUSTER_LABEL_DEFAULT),
                observed_rates=ObservedRates(PrometheusFactor(prometheus.url)),
            )
            applier.apply(0.0)
            quotas = client.describe()
            held = [quotas[QuotaEntity.user(name)][P] for name in OWN]
            held.append(quotas[QuotaEntity.default_user()][P])
            lowest, highest = entity_minimum(0.9 * OFFERED, 60.0), entity_minimum(1.5 * OFFERED, 60)
            assert all(lowest <= quota <= highest < BYTE_RATE_FLOOR for quota in held), (
                f"quotas at factor 0: {held}; each principal's own minimum from ~{OFFERED:.0f} "
                f"B/s is {entity_minimum(OFFERED, 60.0):.0f}, below the {BYTE_RATE_FLOOR:.0f} floor"
            )
            time.sleep(SETTLE_S)
            start = time.monotonic()
            time.sleep(MEASURED_S)
            during = sum(p.log.rate(start, time.monotonic()) for p in producers)
            floor_share = PRINCIPALS * BYTE_RATE_FLOOR / before
            assert during < 0.22 * before, (
                f"{PRINCIPALS} principals wrote {during:.0f} B/s at factor 0, of {before:.0f} "
                f"B/s before ({during / before:.0%}; the 8 KiB/s floor: {floor_share:.0%})"
            )
            applier.apply(1.0)
            quotas = client.describe()
            assert all(quotas[QuotaEntity.user(name)][P] == QUOTA for name in OWN)
            assert quotas[QuotaEntity.default_user()][P] == QUOTA
    finally:
        for producer in producers:
            producer.close()
        journal.close()
        client.close()
