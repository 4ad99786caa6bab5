"""Many principals held at factor 0 on real Kafka: what they still write, and how long after the
restore they are back (tests/enforcer/test_entity_minimum_kafka.py, bench/factor_zero.py).

N SASL users each offer the same rate from a librdkafka producer of their own to one broker;
half hold a quota of their own, half fall under the default user's (a budget per user), both far
above the rate. Kafka's quota sensors go through the JMX exporter into Prometheus, where the
enforcer's observed-rate references are read; the enforcer's Applier then applies factor 0 and,
after a while, 1.0. The quota each entity got, the rates before and at factor 0, the longest
throttle time a broker handed out and when every producer was back are measured from the
producers' delivery reports and librdkafka's throttle callbacks.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from devkit.kafka_cluster import DEFAULT_USERS, KafkaCluster
from devkit.kafka_dist import KafkaDist
from devkit.processes import wait_until
from devkit.producer_load import LoadProducer, Transport
from devkit.prometheus import Prometheus, run_prometheus
from enforcer.applier import Applier
from enforcer.journal import Journal
from enforcer.metrics import EnforcerMetrics
from enforcer.observed_rates import DEFAULT_QUERY, ObservedRates
from enforcer.prometheus_check import PrometheusFactor
from enforcer.quota_client import KafkaQuotaClient
from enforcer.quota_plan import Change, QuotaPolicy
from enforcer.request_sizes import RequestSizes
from kvq.kafka.quota_entity import QuotaEntity
from kvq.model.graceful_slowdown import GracefulSlowdown
from kvq.settings.config import CLUSTER_LABEL_DEFAULT

P = "producer_byte_rate"
QUOTA = 1_000_000.0
"""Each principal's own quota and the default user's: far above what they offer."""
BUFFER_KBYTES = 64
"""An application's buffer, as in the demo's producers: while throttled a producer blocks once
64 kB are queued (librdkafka's default queue would build a backlog of up to 1 GB, sent in 1 MB
requests that Kafka answers with throttle times of 1 MB / quota)."""
STATS_S = 1.0
"""How often each producer's librdkafka statistics (its requests timed out) are read."""
BACK = 0.8
"""A producer is back once it acknowledges this share of its rate before over BACK_WINDOW_S."""
BACK_WINDOW_S = 3.0
DESCENT_STEP_S = GracefulSlowdown.FLOOR_CLIMB_SECONDS
"""A paced descent (`paced_descent`) lowers the factor by one MAX_DROP this often, as graceful
slowdown's held floor does."""
DESCENT_HELD_S = 15.0
"""How long the descent's last factor is held before factor 0: the producers held at its
quotas, their first throttles past, as when a volume reaches its limit after graceful slowdown
lowered the factor that far."""
ESCAPING_CHECK_S = 5.0
"""How often the factor is applied again while waiting for the escaping count (the enforcer's
reconcile loop runs every 30 s by default; quicker here, as nothing else changes)."""


def principals(count: int) -> list[str]:
    return [f"p{i:03d}" for i in range(count)]


def own_quota(name: str) -> bool:
    """Half the principals (every other one) hold a quota of their own."""
    return int(name[1:]) % 2 == 0


@contextmanager
def cluster(
    work: Path, count: int, dist: KafkaDist | None, quota_samples: int | None = None
) -> Iterator[tuple[KafkaCluster, Prometheus]]:
    """One broker with `count` SASL users (`quota_samples`: its quota.window.num; Kafka's 11 by
    default) and a Prometheus scraping its JMX exporter."""
    users = {**DEFAULT_USERS, **{name: f"{name}-secret" for name in principals(count)}}
    properties = {} if quota_samples is None else {"quota.window.num": str(quota_samples)}
    with (
        KafkaCluster(
            work / "kafka",
            nodes=1,
            log_dirs_per_node=1,
            log_dir_bytes=512 << 20,
            dist=dist,
            users=users,
            jmx_exporter=True,
            broker_properties=properties,
        ) as kafka,
        run_prometheus(work / "prometheus", targets={"kafka": kafka.metrics_targets}) as prom,
    ):
        yield kafka, prom


@dataclass
class Held:
    """One factor-0 episode of the principals."""

    before: float
    """B/s all principals acknowledged together before it."""
    during: float
    """B/s they acknowledged together at factor 0, after `settle` seconds (each producer's
    counted in whole requests: `DeliveryLog.paced_rate`)."""
    quotas: Mapping[QuotaEntity, float]
    """What the enforcer set each throttled entity to."""
    allowed: float
    """B/s those quotas let all principals write together (each principal under the default
    user's quota holds one of its own)."""
    longest_throttle_s: float
    """The longest throttle time a broker handed a producer during it."""
    longest_held_throttle_s: float
    """The longest a broker handed a producer once it was held at its quota: after the first
    mute (the jump from its rate), while the rates at factor 0 were measured."""
    back_s: float | None
    """Seconds from the restore until every producer was back at its rate (None: not within
    the watch)."""
    timed_out: int = 0
    """Requests librdkafka timed out while the factor held, over all producers: each closes its
    connection, and the next one is not muted."""
    timing_out: int = 0
    """Producers with at least one of them."""
    escaping: int | None = None
    """The entities the enforcer counted as answered past librdkafka's timeout
    (`RequestSizes.escaping`) when it applied the factor again just before the restore; None
    without request sizes."""
    longest_descent_throttle_s: float = 0.0
    """The longest throttle time a broker handed a producer while a paced descent lowered the
    factor to the one factor 0 came from (0.0 without one)."""

    @property
    def share(self) -> float:
        return self.during / self.before


def hold_at_factor_zero(
    kafka: KafkaCluster,
    prometheus: Prometheus,
    journal_path: Path,
    policy: QuotaPolicy,
    offered: float,
    settle: float,
    measured: float,
    watch_after: float,
    topic: str = "many",
    factor: float = 0.0,
    measured_held: float | None = None,
    buffer_kbytes: int = BUFFER_KBYTES,
    producer_config: Mapping[str, str] | None = None,
    request_sizes: RequestSizes | None = None,
    escaping_wait: float = 0.0,
    descent: tuple[float, ...] = (),
) -> Held:
    """Every principal of the cluster offering `offered` B/s, measured for `measured` s; `factor`
    (0: the limit reached) applied by an Applier of `policy` with observed-rate references, held
    `settle` + `measured_held` (default: `measured`) s, then 1.0; watched for `watch_after` s
    after the restore. A held producer writes a buffer's worth in one request, then waits out its
    mute: its rate at factor 0 counts whole requests, or a window of a few of them would be
    off its quota by up to a request. Stops every producer it started, and restores. Once per
    cluster: the references are the highest rates over the last 5 minutes, which would include
    the catch-up after an earlier restore. `buffer_kbytes`: each producer's
    queue.buffering.max.kbytes; `producer_config`: more librdkafka properties of each;
    `request_sizes`: the Applier's, and the factor applied again before the restore, as the
    enforcer's reconcile loop does, to read what they found: every ESCAPING_CHECK_S s until
    they count every principal or `escaping_wait` s have passed. `descent`: factors applied
    before `factor`, DESCENT_STEP_S apart, the last held DESCENT_HELD_S (`paced_descent`)."""
    names = [u for u in kafka.users if u not in DEFAULT_USERS]
    client = KafkaQuotaClient(kafka.admin_properties)
    journal = Journal(journal_path)
    producers = load_producers(kafka, names, buffer_kbytes, producer_config or {})
    applier = Applier(
        "c1",
        policy,
        client,
        journal,
        EnforcerMetrics(("c1",), CLUSTER_LABEL_DEFAULT),
        observed_rates=ObservedRates(PrometheusFactor(prometheus.url)),
        request_sizes=request_sizes,
    )
    try:
        owners = [QuotaEntity.user(u) for u in names if own_quota(u)]

        def entity_of(user: str) -> QuotaEntity:
            return QuotaEntity.user(user) if own_quota(user) else QuotaEntity.default_user()

        client.alter([Change(e, P, QUOTA) for e in [*owners, QuotaEntity.default_user()]])
        for producer in producers:
            producer.run_steady([topic], offered)

        wait_for_rates(prometheus, len(names), offered)
        start = time.monotonic()
        time.sleep(measured)
        before = sum(p.log.rate(start, time.monotonic()) for p in producers)
        descended_at = time.monotonic()
        descend(applier, descent)
        step(applier, factor)
        held_at = time.monotonic()
        described = client.describe()
        quotas = {e: described[e][P] for e in [*owners, QuotaEntity.default_user()]}
        time.sleep(settle)
        start = time.monotonic()
        time.sleep(measured if measured_held is None else measured_held)
        during = sum(p.log.paced_rate(start, time.monotonic()) for p in producers)
        escaping = None
        if request_sizes is not None:
            escaping = count_escaping(applier, factor, request_sizes, len(names), escaping_wait)
        step(applier, 1.0)
        restored = time.monotonic()
        timeouts = [transport.request_timeouts for transport in held_transport(producers, held_at)]
        return Held(
            before,
            during,
            quotas,
            sum(quotas[entity_of(u)] for u in names),
            longest_throttle_s(producers, held_at, restored),
            longest_throttle_s(producers, start, restored),
            back_after(producers, offered, restored, watch_after),
            sum(timeouts),
            sum(1 for n in timeouts if n),
            escaping,
            longest_throttle_s(producers, descended_at, held_at),
        )
    finally:
        step(applier, 1.0)
        for producer in producers:
            producer.close()
        journal.close()
        client.close()


def load_producers(
    kafka: KafkaCluster, names: list[str], buffer_kbytes: int, config: Mapping[str, str]
) -> list[LoadProducer]:
    """One librdkafka producer per principal, its statistics recorded (`held_transport`)."""
    settings = {"queue.buffering.max.kbytes": buffer_kbytes, **config}
    return [
        LoadProducer(kafka.sasl_bootstrap, f"app-{u}", u, kafka.users[u], STATS_S, **settings)
        for u in names
    ]


def wait_for_rates(prometheus: Prometheus, count: int, offered: float) -> None:
    """Until Prometheus has `count` entities' rates near `offered` (the references)."""

    def seen() -> int:
        rates = [float(s["value"][1]) for s in prometheus.query(DEFAULT_QUERY)]
        return sum(1 for rate in rates if rate > 0.9 * offered)

    wait_until(lambda: seen() == count, 120, what="every principal's rate scraped")


def longest_throttle_s(producers: list[LoadProducer], start: float, end: float) -> float:
    """The longest throttle time (s) a broker handed any of `producers` in [start, end)."""
    return (
        max((ms for p in producers for t, ms in p.log.throttles if start <= t < end), default=0)
        / 1000
    )


def paced_descent(to: float) -> tuple[float, ...]:
    """The factors graceful slowdown's steps go through from 1.0 down to `to` (0 < to < 1):
    each MAX_DROP below the one before, then `to`."""
    factors, factor = [], 1.0
    while factor * (1.0 - GracefulSlowdown.MAX_DROP) > to:
        factor *= 1.0 - GracefulSlowdown.MAX_DROP
        factors.append(factor)
    return (*factors, to)


def descend(applier: Applier, descent: tuple[float, ...]) -> None:
    """Each factor of `descent` applied DESCENT_STEP_S after the one before; the last held
    DESCENT_HELD_S."""
    for n, factor in enumerate(descent):
        step(applier, factor)
        time.sleep(DESCENT_HELD_S if n == len(descent) - 1 else DESCENT_STEP_S)


def count_escaping(
    applier: Applier, factor: float, request_sizes: RequestSizes, every: int, wait: float
) -> int:
    """`factor` applied again every ESCAPING_CHECK_S s (the reconcile loop's steps) until
    `request_sizes` counts `every` entity as escaping or `wait` s have passed: Kafka's average
    throttle time shows an entity's long throttles only after its first answered request, and
    when that comes depends on how librdkafka's timeouts fall. The count it reached."""
    deadline = time.monotonic() + wait
    while True:
        step(applier, factor)
        counted = len(request_sizes.escaping)
        if counted >= every or time.monotonic() >= deadline:
            return counted
        time.sleep(ESCAPING_CHECK_S)


def step(applier: Applier, factor: float) -> None:
    """One step as the Enforcer takes it: the starting point (Kafka's copy of the originals read
    once), then `factor` applied."""
    applier.starting_point()
    applier.enforce(factor)


def held_transport(producers: list[LoadProducer], held_at: float) -> list[Transport]:
    """Each producer's connection counters from `held_at` until now (none recorded: zeros)."""
    now = time.monotonic()
    return [p.transport_between(held_at, now) or Transport() for p in producers]


def back_after(
    producers: list[LoadProducer], offered: float, restored: float, watch: float
) -> float | None:
    """Seconds from `restored` until every producer acknowledged BACK x `offered` over the last
    BACK_WINDOW_S (each on its own), watching at most `watch` s; None if one never was."""
    back: dict[int, float] = {}
    while time.monotonic() < restored + watch and len(back) < len(producers):
        time.sleep(0.2)
        now = time.monotonic()
        for i, producer in enumerate(producers):
            if i not in back and producer.log.rate(now - BACK_WINDOW_S, now) >= BACK * offered:
                back[i] = now - restored
    return max(back.values()) if len(back) == len(producers) else None
