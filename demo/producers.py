"""`make demo SCENARIO=producers`: real producers fill a small disk, with kvq and without it.

On the embedded stack (devcluster, exporter, Prometheus, Alertmanager, enforcer), four
confluent-kafka producers (three SASL users, four client-ids) write a steady total of
``RATE`` value bytes/s into two topics whose replicas all have a copy on broker 0, so broker 0's
volume (a virtual disk of ``CAPACITY`` bytes, most of it other data) fills first: it reaches its
limit about 10 s after the load starts, and the limit leaves it 20 s more at that rate. The run
prints the timeline, each producer's acknowledged rate before / while / after the throttle, the
lowest headroom (usable bytes) reached on any volume and the bound predicted from the configured
intervals: limit - R x (poll + scrape + evaluation + group_wait + apply), R the fullest volume's
fill rate. Then the same load runs with the enforcer stopped, until the disk fills (the storage
error). Meanwhile, while throttled, the full broker is stopped for longer than the validity
duration and started again still full: the throttle must hold throughout (the violation hold).
Exit 0 only if, with kvq, no volume reached 0 usable bytes, no producer got a storage error and
the throttle held through the restart (the lowest headroom against the bound is reported: a
timing figure). A volume that fills stops the run there: NOT PROTECTED, with the timeline.

``--kafka apache`` (make demo SCENARIO=producers KAFKA=apache) runs it on a real 3-node Apache
Kafka cluster, each broker's log dir a 32 MiB tmpfs (real bytes, real ENOSPC; on broker 0's, a
16 MiB file of other data), with two Java producers (Kafka's own ProducerPerformance,
devkit/java_producer.py) beside the librdkafka ones,
75 kB/s each; the operator's fix is a real one (the full tmpfs remounted twice as large), and the
time from that moment until each producer is back at its rate is printed per client kind. Without
kvq, Kafka takes the full log dir offline and, as it was the broker's only one, the broker halts.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import confluent_kafka.admin as ck

from demo import apache
from demo.scenario import Timeline, firing, holds, throttled
from demo.stack import CLUSTER, KAFKA_BACKENDS, STACK_PARTS, DemoStack
from devkit import loop_settings
from devkit.java_producer import JavaPerfProducer
from devkit.kafka_cluster import KafkaClusterError
from devkit.kafka_dist import KafkaDistError
from devkit.processes import wait_until
from devkit.producer_load import LoadProducer
from enforcer.quota_client import KafkaQuotaClient
from enforcer.quota_plan import BYTE_RATE_FLOOR, Change
from exporter.cluster_client import KafkaClusterClient
from kvq.kafka.quota_entity import QuotaEntity

KEY = "producer_byte_rate"
USERS = {"alice": "alice-secret", "bob": "bob-secret", "carol": "carol-secret"}
PRODUCERS = (  # user, client-id, topic
    ("alice", "web", "orders"),
    ("alice", "batch", "clicks"),
    ("bob", "app", "orders"),
    ("carol", "etl", "clicks"),
)
# Every partition has a replica on broker 0: it takes all R bytes/s, brokers 1 and 2 half each.
TOPICS = {"orders": [[0, 1], [1, 0]], "clicks": [[0, 2], [2, 0]]}
ORIGINAL_QUOTAS = {
    (("user", "alice"),): 5_000_000.0,
    (("client-id", "app"), ("user", "bob")): 1_000_000.0,
    (("client-id", "etl"),): 2_000_000.0,
}
RATE = 600_000  # value bytes/s, all producers together
CAPACITY = 48_000_000  # each log dir: a virtual disk
OTHER_DATA = 30_000_000
"""Bytes already on broker 0's volume when the load starts (what else the disk holds): the load
reaches the limit in a sixth of the time, and the limit, the headroom left once throttled and
the room the operator's fix makes are the same as on an empty disk. The limit (12 MB) lasts the
load 20 s: four times the loop's configured waits, so that a loaded machine (a CI runner) whose
exporter misses polls for seconds still shows the disk protected, not a race."""
MIN_AVAILABLE_RATIO = 0.25
MESSAGE_BYTES = 1000
TRANSPORT_SECONDS = 1.0  # how often librdkafka producers record their connections' counters
LOOP = loop_settings.demo()  # poll, scrape, evaluation, group_wait: 1 s each
APPLY_SECONDS = 1.0  # enforcer AlterClientQuotas + brokers re-read quotas (0.25 s) + next request
# The configured intervals between a byte crossing the limit and the producers being held.
INTERVALS = {
    "exporter poll": LOOP.poll,
    "scrape": LOOP.scrape,
    "rule evaluation": LOOP.evaluation,
    "group_wait": LOOP.group_wait,
    "apply": APPLY_SECONDS,
}
HOLD_SECONDS = 3  # how long the scenario keeps the cluster throttled before growing the disk
VALIDITY_SECONDS = 5  # throttle.factor.validity.duration: how long a departed broker is cached
AWAY_SECONDS = VALIDITY_SECONDS + 5  # the full broker stays stopped longer than that
VIOLATION_HOLD = "PT1H"  # kvq.departed.broker.violation.hold (its default)
RECOVERED_SHARE = 0.8  # a producer is back at its rate at 80 % of what it offers, over 3 s


JAVA_BATCH_BYTES = 16384
"""The Java producer's batch.size (its default): its buffer.memory holds one batch at least."""


@dataclass(frozen=True)
class Setup:
    """What differs between the devcluster run and the real Kafka run."""

    kafka: str
    capacity: int
    """Bytes of each log dir: devcluster's virtual disk, or Kafka's tmpfs."""
    producer_rate: float
    """Value bytes/s each producer offers."""
    librdkafka: tuple[tuple[str, str, str], ...] = PRODUCERS
    java: tuple[tuple[str, str, str], ...] = ()
    """(user, client-id, topic) of Kafka's ProducerPerformance JVMs: a topic of its own each
    (its acknowledged bytes are read from the topic's high watermarks)."""
    topics: dict[str, list[list[int]]] = field(default_factory=lambda: dict(TOPICS))
    users: dict[str, str] = field(default_factory=lambda: dict(USERS))
    quotas: dict[tuple, float] = field(default_factory=lambda: dict(ORIGINAL_QUOTAS))
    """producer_byte_rate per entity (per broker, as Kafka enforces it) before any throttle."""
    loop: loop_settings.LoopSettings = LOOP
    topic_config: dict[str, str] = field(default_factory=dict)
    """Every topic's configs (retention, segments)."""
    broker_properties: dict[str, str] = field(default_factory=dict)
    """Real Kafka's broker properties beyond demo.apache's."""
    other_data: int = 0
    """Bytes of other data on broker 0's volume, there before the stack's exporter starts."""
    producer_buffer: int = 64
    """kB each producer buffers (librdkafka's queue.buffering.max.kbytes, Java's buffer.memory:
    at least its 16 KiB batch): while throttled a producer blocks once this much is queued,
    rather than piling up a backlog that floods the disks after the restore."""
    librdkafka_config: dict[str, str] = field(default_factory=dict)
    """librdkafka properties of every librdkafka producer beyond the load's own."""
    burst_ratio: float | None = None
    """The enforcer's kvq.enforcer.throttle.observed.rate.burst.ratio in a graceful-slowdown run
    (None: its default)."""
    kafka_scrape: float | None = None
    """Seconds between Prometheus' scrapes of the brokers' quota sensors (None: the loop's scrape
    interval, 1 s)."""

    @property
    def java_buffer(self) -> int:
        """Bytes a Java producer buffers: `producer_buffer`, at least one batch."""
        return max(self.producer_buffer << 10, JAVA_BATCH_BYTES)

    @property
    def producers(self) -> int:
        return len(self.librdkafka) + len(self.java)

    @property
    def rate(self) -> float:
        return self.producer_rate * self.producers

    @property
    def limit(self) -> int:
        return int(self.capacity * MIN_AVAILABLE_RATIO)


DEVCLUSTER = Setup("devcluster", CAPACITY, RATE / len(PRODUCERS), other_data=OTHER_DATA)
APACHE = Setup(
    "apache",
    capacity=32 << 20,
    producer_rate=75_000,
    java=(("dave", "java-web", "java-orders"), ("erin", "java-etl", "java-clicks")),
    # Each partition has a replica on broker 0, as above.
    topics={**TOPICS, "java-orders": [[0, 1], [1, 0]], "java-clicks": [[0, 2], [2, 0]]},
    users={**USERS, "dave": "dave-secret", "erin": "erin-secret"},
)
SETUPS = {"devcluster": DEVCLUSTER, "apache": replace(APACHE, other_data=16 << 20)}


@dataclass
class Sample:
    at: float
    usable: dict[tuple[int, int], int]
    storage_errors: int
    """devcluster: storage errors it answered; Kafka: log dirs DescribeLogDirs reports offline."""
    halted: int = 0
    """Kafka brokers whose JVM exited unasked (a broker halts when no live log dir remains)."""


@dataclass
class DiskWatch:
    """Every volume's usable bytes and the storage errors: devcluster's control API, or on Kafka
    each tmpfs log dir's `statvfs` and, every second, DescribeLogDirs' error codes."""

    stack: DemoStack
    interval: float = 0.1
    samples: list[Sample] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _offline: set[tuple[int, str]] = field(default_factory=set)
    _offline_read: float = 0.0

    def __post_init__(self) -> None:
        self._thread = threading.Thread(target=self._run, name="disk-watch", daemon=True)
        self._client = (
            KafkaClusterClient(self.stack.admin_properties, 2.0)
            if self.stack.kafka is not None
            else None
        )

    def start(self) -> DiskWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        if self._client is not None:
            self._client.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                sample = self._read_kafka() if self._client is not None else self._read_control()
            except Exception:  # noqa: BLE001 - the stack is going down
                break
            self.samples.append(sample)
            self._stop.wait(self.interval)

    def _read_control(self) -> Sample:
        state = self.stack.control.state()
        usable = {
            (b["id"], d["index"]): d["usable_bytes"]
            for b in state["brokers"]
            for d in b["log_dirs"]
            if d["usable_bytes"] is not None
        }
        return Sample(time.monotonic(), usable, len(state["storage_errors"]))

    def _read_kafka(self) -> Sample:
        kafka = self.stack.kafka
        assert kafka is not None and self._client is not None
        usable = {
            (node.node_id, index): apache.usable_bytes(path)
            for node in kafka.node_list
            for index, path in enumerate(node.log_dirs)
        }
        running = [node.node_id for node in kafka.node_list if node.running]
        if time.monotonic() - self._offline_read >= 1.0:
            self._offline_read = time.monotonic()
            for answer in self._client.describe_log_dirs(running).values():
                if not isinstance(answer, Exception):
                    self._offline.update((d.broker_id, d.log_dir) for d in answer if d.error_code)
        halted = sum(1 for node in kafka.node_list if node.wanted and not node.running)
        return Sample(time.monotonic(), usable, len(self._offline), halted)

    def lowest(
        self, since: float = 0.0, until: float = float("inf")
    ) -> tuple[int, tuple[int, int]]:
        """(lowest usable bytes on any volume, that volume) seen within [since, until]."""
        return min(
            (value, volume)
            for s in self.samples
            if since <= s.at <= until
            for volume, value in s.usable.items()
        )

    def lowest_at(self, volume: tuple[int, int], start: float, end: float) -> float:
        """When ``volume`` first had its lowest usable bytes within [start, end]."""
        window = [s for s in self.samples if start <= s.at <= end and volume in s.usable]
        return min(window, key=lambda s: (s.usable[volume], s.at)).at

    def first(self, predicate: Callable[[Sample], bool]) -> float | None:
        return next((s.at for s in self.samples if predicate(s)), None)

    def filled_at(self) -> float | None:
        """When a volume first filled: 0 usable bytes, a storage error or a halted broker."""
        return self.first(
            lambda s: s.storage_errors > 0 or s.halted > 0 or min(s.usable.values(), default=1) <= 0
        )

    def fill_rate(self, volume: tuple[int, int], start: float, end: float) -> float:
        """Bytes/s the volume filled at over [start, end]."""
        window = [s for s in self.samples if start <= s.at <= end and volume in s.usable]
        if len(window) < 2:
            return 0.0
        first, last = window[0], window[-1]
        return (first.usable[volume] - last.usable[volume]) / max(last.at - first.at, 1e-9)


@dataclass
class Run:
    timeline: Timeline
    producers: list[LoadProducer | JavaPerfProducer]
    watch: DiskWatch
    load_started: float
    limit: int
    setup: Setup = DEVCLUSTER
    marks: dict[str, float] = field(default_factory=dict)
    released: list[float] = field(default_factory=list)
    """Moments the throttle was found released while the full broker was away or back."""
    back: dict[str, float] = field(default_factory=dict)
    """client-id -> first moment after the restore its producer was back at its rate."""

    def rate_table(self, phases: dict[str, tuple[float, float]]) -> str:
        head = f"  {'producer':30}" + "".join(f"{name:>14}" for name in phases)
        rows = [head]
        for p in self.producers:
            cells = "".join(
                f"{p.log.rate(a, b) / 1000:>10.0f} kB/s" if b > a else f"{'-':>14}"
                for a, b in phases.values()
            )
            rows.append(f"  {name(p, self.setup):30}{cells}")
        return "\n".join(rows)

    def recovery_table(self) -> str:
        """Per producer: seconds from the operator's fix (space freed) and from the restore
        until it was back at its rate."""
        freed, restored = self.marks["grown"], self.marks["restored"]
        rows = [f"  {'producer':30}{'after space freed':>20}{'after restore':>16}"]
        for p in self.producers:
            at = self.back.get(p.client_id)
            cells = (
                f"{at - freed:>18.1f} s{at - restored:>14.1f} s"
                if at is not None
                else f"{'not back':>20}{'':>16}"
            )
            rows.append(f"  {name(p, self.setup):30}{cells}")
        return "\n".join(rows)


def name(producer: LoadProducer | JavaPerfProducer, setup: Setup) -> str:
    """`user / client-id`, with the client kind when the run has both kinds."""
    label = f"{producer.user} / {producer.client_id}"
    return f"{label} ({producer.kind})" if setup.java else label


def validity_seconds(loop: loop_settings.LoopSettings) -> float:
    """throttle.factor.validity.duration: VALIDITY_SECONDS, but always 2 s longer than a poll
    interval. A factor valid for only one interval expires whenever a poll ends later than the
    one before (a broker back from a restart answers slowly): the fallback (1.0) is then in force
    until it ends, and a scrape in between resolves the alert, so the enforcer restores."""
    return max(VALIDITY_SECONDS, loop.poll + 2)


def make_stack(
    work: Path,
    setup: Setup = DEVCLUSTER,
    extra_properties: str = "",
    *,
    validity: str | None = None,
    **options,
) -> DemoStack:
    """The stack of `setup`, its factor valid for `validity` (this scenario's, `validity_seconds`,
    unless given); `options` are further DemoStack arguments."""
    return DemoStack(
        work,
        brokers=3,
        log_dirs_per_broker=1,
        capacity_bytes=setup.capacity,
        min_available_ratio=MIN_AVAILABLE_RATIO,
        loop=setup.loop,
        sasl_users=setup.users,
        validity=validity or f"PT{validity_seconds(setup.loop):g}S",
        extra_properties=f"kvq.departed.broker.violation.hold={VIOLATION_HOLD}\n{extra_properties}",
        kafka=setup.kafka,
        broker_properties=setup.broker_properties,
        other_data=setup.other_data,
        kafka_scrape=setup.kafka_scrape,
        **options,
    )


def prepare(stack: DemoStack, setup: Setup = DEVCLUSTER) -> dict:
    """Topics and the original quotas; returns Kafka's quotas as they are then."""
    admin = ck.AdminClient({"bootstrap.servers": stack.bootstrap, "log_level": 0})
    futures = admin.create_topics(
        [
            ck.NewTopic(name, len(a), replica_assignment=a, config=setup.topic_config)
            for name, a in setup.topics.items()
        ]
    )
    for future in futures.values():
        future.result(30)
    client = KafkaQuotaClient(stack.admin_properties)
    try:
        client.alter([Change(QuotaEntity.of(e), KEY, v) for e, v in setup.quotas.items()])
    finally:
        client.close()
    # Kafka's brokers learn quotas from the metadata log: wait until they show them.
    return wait_until(lambda: holds(stack.quotas(), setup.quotas), 30, what="quotas set")


def start_load(
    stack: DemoStack, active: list, setup: Setup = DEVCLUSTER
) -> list[LoadProducer | JavaPerfProducer]:
    """Start every producer; each is added to ``active`` at once (the caller closes them)."""
    producers: list[LoadProducer | JavaPerfProducer] = []
    for user, client_id, topic in setup.librdkafka:
        producer = LoadProducer(
            stack.sasl_bootstrap,
            client_id=client_id,
            user=user,
            password=setup.users[user],
            stats_seconds=TRANSPORT_SECONDS,
            **{"queue.buffering.max.kbytes": setup.producer_buffer, **setup.librdkafka_config},
        )
        active.append(producer)
        producer.run_steady([topic], setup.producer_rate, MESSAGE_BYTES)
        producers.append(producer)
    for user, client_id, topic in setup.java:
        assert stack.kafka is not None
        java = JavaPerfProducer(
            stack.kafka,
            stack.work_dir / "java-producers" / client_id,
            topic,
            len(setup.topics[topic]),
            setup.producer_rate,
            user,
            client_id,
            MESSAGE_BYTES,
            {"buffer.memory": str(setup.java_buffer)},
        )
        active.append(java)
        producers.append(java)
    return producers


def run_with_kvq(
    stack: DemoStack,
    timeline: Timeline,
    log: Callable[[str], None],
    active: list,
    restart: bool = True,
    setup: Setup = DEVCLUSTER,
) -> Run:
    factor = f'kafka_volume_quota_throttle_factor{{cluster="{CLUSTER}"}}'
    wait_until(lambda: stack.prometheus.query(factor), 30, what="Prometheus scraping")
    patience = 30.0 if stack.kafka is None else 120.0  # real Kafka on a loaded machine is slower
    before = prepare(stack, setup)
    watch = DiskWatch(stack).start()
    active.append(watch)
    limit = setup.limit
    producers = start_load(stack, active, setup)
    started = timeline.mark(f"load started: {setup.rate:.0f} B/s")
    run = Run(timeline, producers, watch, started, limit, setup)
    log(f"{len(producers)} producers at {setup.rate / 1000:.0f} kB/s in total; limit {limit} bytes")
    if setup.other_data:
        log(f"broker 0's volume already holds {setup.other_data:,} bytes of other data")
    full = (0, 0)
    capacity = setup.capacity

    def crossed() -> bool:
        return any(s.usable.get(full, capacity) <= limit for s in watch.samples[-3:])

    wait_until(crossed, 300, interval=0.05, what="broker 0's volume crossing the limit")
    crossed_at = watch.first(lambda s: s.usable.get(full, capacity) <= limit)
    assert crossed_at is not None, "waited for above"
    run.marks["crossed"] = crossed_at
    timeline.events.append((run.marks["crossed"], "broker 0's volume crossed the limit"))
    wait_until(lambda: stack.exporter_status()["throttle_factor"] == 0.0, patience, what="factor 0")
    run.marks["seen"] = timeline.mark("exporter: throttle factor 0")
    wait_until(lambda: firing(stack), patience, what="alert firing")
    run.marks["fired"] = timeline.mark("alert firing in Prometheus")
    wait_until(lambda: throttled(stack.quotas(), before), patience, what="quotas throttled")
    run.marks["applied"] = timeline.mark(
        f"quotas throttled in Kafka ({BYTE_RATE_FLOOR:.0f} bytes/s, the enforcer's floor)"
    )
    wait_until(
        lambda: all(held(p, run.marks["applied"] - 1, setup) for p in producers),
        patience,
        what="every producer throttled",
    )
    run.marks["held"] = timeline.mark("every producer throttled by the brokers")
    stop_if_filled(run)
    if restart:
        restart_full_broker(stack, run, log, before)
    time.sleep(HOLD_SECONDS)  # the throttle holding: the disk must not grow meanwhile
    grow_full_volume(stack, setup)
    run.marks["grown"] = timeline.mark("operator doubled broker 0's volume")
    run.marks["lowest"] = watch.lowest_at(full, run.marks["crossed"], run.marks["grown"])
    timeline.events.append((run.marks["lowest"], "broker 0's volume stopped filling (lowest)"))
    log("broker 0's volume grown; waiting for the restore")
    wait_until(lambda: stack.exporter_status()["throttle_factor"] == 1.0, patience, what="factor 1")
    timeline.mark("exporter: throttle factor 1")
    wait_until(lambda: stack.quotas() == before, patience, what="quotas restored")
    run.marks["restored"] = timeline.mark("quotas restored byte for byte")
    try:
        wait_until(lambda: _recovered(run, 3.0), 300, interval=0.2, what="producers back")
    except TimeoutError as exc:
        now = time.monotonic()
        detail = "; ".join(
            f"{p.client_id}: {p.log.rate(now - 3, now) / 1000:.0f} kB/s, last throttles "
            f"{[(round(t - now, 1), ms) for t, ms in p.log.throttles[-2:]]}"
            for p in producers
        )
        raise TimeoutError(f"{exc}: {detail}") from None
    run.marks["recovered"] = timeline.mark("producers back at their rate")
    time.sleep(8)  # the 'after' measurement period
    run.marks["end"] = timeline.mark("load stopped")
    return run


class NotProtected(Exception):
    """A volume filled while kvq protected it: the run stops there, saying when."""


def stop_if_filled(run: Run) -> None:
    """Raise NotProtected if a volume filled so far, with the time the loop took against the
    time the limit left the load."""
    filled = run.watch.filled_at()
    if filled is None:
        return
    run.timeline.events.append((filled, "a volume filled (0 usable bytes or a storage error)"))
    crossed, setup = run.marks["crossed"], run.setup
    raise NotProtected(
        f"a volume filled {filled - crossed:.1f} s after broker 0's crossed the limit, which "
        f"leaves {setup.limit / setup.rate:.0f} s at {setup.rate / 1000:.0f} kB/s; the loop's "
        f"configured waits add up to {sum(INTERVALS.values()):.0f} s (see the timeline: a "
        "step far slower than its wait points at a loaded machine or a stalled component)"
    )


def held(
    producer: LoadProducer | JavaPerfProducer, since: float, setup: Setup, by_rate: bool = False
) -> bool:
    """The brokers hold the producer back: a broker reported a throttle to it since ``since``;
    with ``by_rate`` (quotas that bind anyway throttle before the throttle counts), or before any
    throttle was reported to it: its acknowledged rate over the last 3 s fell below a quarter of
    what it offers."""
    if producer.log.throttles and not by_rate:
        return any(t >= since for t, _ in producer.log.throttles)
    now = time.monotonic()
    return now - since >= 3 and producer.log.rate(now - 3, now) < 0.25 * setup.producer_rate


def grow_full_volume(stack: DemoStack, setup: Setup) -> None:
    """The operator's fix: broker 0's volume twice as large (Kafka: its tmpfs remounted)."""
    if stack.kafka is not None:
        apache.resize(stack.kafka.log_dirs(0)[0], setup.capacity * 2)
    else:
        stack.control.set_log_dir(0, 0, capacity_bytes=setup.capacity * 2)


def restart_full_broker(
    stack: DemoStack, run: Run, log: Callable[[str], None], before: dict
) -> None:
    """Stop broker 0 (full, throttled) for longer than the validity duration: the throttle must
    hold the whole time, and still hold once it is back, still below the limit."""
    if stack.kafka is not None:
        stack.kafka.stop_node(0)
    else:
        stack.control.stop_broker(0)
    stopped = run.marks["stopped"] = run.timeline.mark(
        "broker 0 (the full one) stopped while throttled"
    )
    log(f"broker 0 stopped; away {AWAY_SECONDS} s (validity PT{VALIDITY_SECONDS}S)")
    released = []
    while time.monotonic() < stopped + AWAY_SECONDS:
        status = stack.exporter_status()
        if status["throttle_factor"] != 0.0 or not throttled(stack.quotas(), before):
            released.append(time.monotonic())
        if not run.marks.get("held_seen") and status.get("held_log_dirs"):
            run.marks["held_seen"] = run.timeline.mark(
                "exporter holds broker 0's violating volume (broker away)"
            )
        time.sleep(0.2)
    run.timeline.mark(f"validity passed ({VALIDITY_SECONDS} s): still throttled")
    if stack.kafka is not None:
        stack.kafka.start_node(0)  # returns once every node lists it again
    else:
        stack.control.start_broker(0)
    run.marks["back"] = run.timeline.mark("broker 0 started again (still below the limit)")
    wait_until(
        lambda: run.watch.filled_at() is not None or seen_again(stack.exporter_status()),
        60,
        what="broker 0 seen again",
        seen=lambda: exporter_sight(stack.exporter_status()),
    )
    stop_if_filled(run)  # then its log dir, seen again offline, stays held: that wait never ends
    if stack.exporter_status()["throttle_factor"] != 0.0 or not throttled(stack.quotas(), before):
        released.append(time.monotonic())
    run.marks["seen_again"] = run.timeline.mark("exporter sees broker 0 again: still violating")
    run.released = released


def seen_again(status: dict) -> bool:
    """The exporter's /status lists every broker and holds no volume of an absent one."""
    return status["active_brokers"] == 3 and not status.get("held_log_dirs")


def exporter_sight(status: dict) -> str:
    """What the exporter's /status says it sees of the brokers, in one line."""
    held = [f"{d['broker_id']}:{d['log_dir']}" for d in status.get("held_log_dirs", [])]
    error = status.get("last_error") or {}
    return (
        f"exporter: {status.get('active_brokers')} active brokers, held {held or 'none'}, "
        f"last poll {status.get('last_successful_poll')}, "
        f"last error {error.get('stage')}: {error.get('error')} at {error.get('at')}"
    )


def run_without_kvq(
    stack: DemoStack,
    timeline: Timeline,
    log: Callable[[str], None],
    active: list,
    setup: Setup = DEVCLUSTER,
) -> Run:
    prepare(stack, setup)
    stack.stop_enforcer()
    timeline.mark("enforcer stopped: nothing will apply quotas")
    watch = DiskWatch(stack).start()
    active.append(watch)
    producers = start_load(stack, active, setup)
    started = timeline.mark(f"load started: {setup.rate:.0f} B/s")
    run = Run(timeline, producers, watch, started, 0, setup)
    log("same load without the enforcer; waiting for the disk to fill")
    wait_until(
        lambda: watch.samples and failed(watch.samples[-1]),
        400,
        interval=0.1,
        what="a storage error",
    )
    full_at = watch.first(failed)
    assert full_at is not None, "waited for above"
    run.marks["full"] = full_at
    what = (
        "broker 0's disk full: log dir offline"
        if stack.kafka is not None
        else "broker 0's disk full: KAFKA_STORAGE_ERROR, log dir offline"
    )
    last = watch.samples[-1]
    if last.halted:
        what += f", {last.halted} broker(s) halted"
    timeline.events.append((run.marks["full"], what))
    run.marks["end"] = timeline.mark("load stopped")
    return run


def failed(sample: Sample) -> bool:
    return sample.storage_errors > 0 or sample.halted > 0


def _recovered(run: Run, seconds: float) -> bool:
    """Every producer acknowledged at least RECOVERED_SHARE of its rate over the last
    ``seconds``; notes the first moment each one did."""
    now = time.monotonic()
    offered = run.setup.producer_rate
    for p in run.producers:
        if p.client_id not in run.back and p.log.rate(now - seconds, now) >= (
            RECOVERED_SHARE * offered
        ):
            run.back[p.client_id] = now
    return len(run.back) == len(run.producers)


def stop_all(active: list) -> None:
    """Close every producer and disk watch started (also after a failure)."""
    while active:
        item = active.pop()
        if isinstance(item, LoadProducer | JavaPerfProducer):
            item.close()
        else:
            item.stop()


@dataclass
class Verdict:
    lowest: int
    volume: tuple[int, int]
    bound: float
    fill_rate: float
    storage_errors: int
    delivery_errors: dict
    fill_seconds_without: float | None
    released_during_restart: int = 0
    halted: int = 0
    lowest_from_restart: int | None = None
    """Lowest usable bytes on any volume from the full broker's stop on (None: no restart). The
    producers' reconnections then each get one request through, beyond the bound's budget."""

    @property
    def ok(self) -> bool:
        return (
            self.lowest > 0
            and (self.lowest_from_restart is None or self.lowest_from_restart > 0)
            and self.storage_errors == 0
            and self.halted == 0
            and not self.delivery_errors
            and self.released_during_restart == 0
        )

    @property
    def within_bound(self) -> bool:
        """Whether the loop reacted within its predicted waits: a timing figure, which a loaded
        machine can miss by a fraction of a second, so it is reported and not part of `ok`."""
        return self.lowest >= self.bound


def judge(run: Run) -> Verdict:
    """The bound predicts the loop's reaction: it is held against the lowest headroom before the
    full broker's restart; after it, every volume must still stay above 0."""
    restart = run.marks.get("stopped")
    lowest, volume = run.watch.lowest(until=restart or float("inf"))
    after_restart = None if restart is None else run.watch.lowest(since=restart)[0]
    start = run.load_started + 5
    rate = run.watch.fill_rate((0, 0), start, run.marks["crossed"])
    bound = run.limit - rate * sum(INTERVALS.values())
    errors: dict = {}
    for p in run.producers:
        for code, count in p.log.errors.items():
            errors[code] = errors.get(code, 0) + count
    storage = max((s.storage_errors for s in run.watch.samples), default=0)
    halted = max((s.halted for s in run.watch.samples), default=0)
    return Verdict(
        lowest, volume, bound, rate, storage, errors, None, len(run.released), halted, after_restart
    )


def report(with_kvq: Run, verdict: Verdict, without: Run | None, out=print) -> None:
    m = with_kvq.marks
    out("\ntimeline with kvq:")
    out(with_kvq.timeline.render())
    out("\nacknowledged rate per producer:")
    out(
        with_kvq.rate_table(
            {
                "before": (with_kvq.load_started + 5, m["crossed"]),
                "while": (m["held"], m["grown"]),
                "after": (m["recovered"] + 3, m["end"]),
            }
        )
    )
    if with_kvq.setup.java:
        out(f"\nback at their rate ({RECOVERED_SHARE:.0%} of it over 3 s):")
        out(with_kvq.recovery_table())
    out(f"\nfullest volume (broker 0) filled at {verdict.fill_rate / 1000:.0f} kB/s")
    out(f"limit (min.available.ratio {MIN_AVAILABLE_RATIO})     {with_kvq.limit:>12,} bytes")
    out(f"predicted bound: limit - R x ({' + '.join(INTERVALS)} = {sum(INTERVALS.values()):.0f} s)")
    out(f"                                   {verdict.bound:>12,.0f} bytes")
    out(
        f"lowest headroom reached            {verdict.lowest:>12,} bytes "
        f"(broker {verdict.volume[0]}, log dir {verdict.volume[1]})"
    )
    below = verdict.bound - verdict.lowest
    within = "yes" if verdict.within_bound else f"NO, {below:,.0f} bytes below"
    out(f"lowest headroom at or above bound  {within:>12}")
    if verdict.lowest_from_restart is not None:
        out(f"lowest headroom from the restart on {verdict.lowest_from_restart:>11,} bytes")
    out(f"storage errors                     {verdict.storage_errors:>12}")
    if with_kvq.setup.kafka == "apache":
        out(f"brokers halted                     {verdict.halted:>12}")
    out(f"producer delivery errors           {verdict.delivery_errors or 'none':>12}")
    if "back" in m:
        held = "held" if not verdict.released_during_restart else "RELEASED"
        out(
            f"throttle while broker 0 was away {AWAY_SECONDS} s (> validity "
            f"{VALIDITY_SECONDS} s) and after it came back: {held}"
        )
    if without is not None:
        out("\ntimeline without kvq (enforcer stopped):")
        out(without.timeline.render())
        filled = without.marks["full"] - without.load_started
        out(f"\nwithout kvq the disk filled {filled:.1f} s after the load started")


def protected_run(
    work: Path, timeline: Timeline, log: Callable[[str], None], setup: Setup = DEVCLUSTER
):
    """The run with kvq on a fresh stack in ``work``: (Run, Verdict); everything stopped after."""
    active: list = []
    with make_stack(work, setup) as stack:
        timeline.mark(f"stack up: {STACK_PARTS[setup.kafka]}")
        try:
            run = run_with_kvq(stack, timeline, log, active, setup=setup)
        finally:
            stop_all(active)
    return run, judge(run)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make demo SCENARIO=producers", description=__doc__)
    parser.add_argument(
        "--skip-without", action="store_true", help="only the run with kvq (faster)"
    )
    parser.add_argument("--kafka", choices=KAFKA_BACKENDS, default="devcluster")
    args = parser.parse_args(argv)
    setup = SETUPS[args.kafka]
    log = lambda text: print(f"- {text}", flush=True)  # noqa: E731
    with tempfile.TemporaryDirectory(prefix="kvq-demo-producers-") as work_name:
        work = Path(work_name)
        timeline = Timeline()
        without = None
        active: list = []
        try:
            run, verdict = protected_run(work / "with-kvq", timeline, log, setup)
            if not args.skip_without:
                with make_stack(work / "without-kvq", setup) as stack:
                    try:
                        without = run_without_kvq(stack, Timeline(), log, active, setup)
                    finally:
                        stop_all(active)
        except NotProtected as exc:
            print("\ntimeline so far:")
            print(timeline.render())
            print(f"\nNOT PROTECTED: {exc}", file=sys.stderr)
            return 1
        except (TimeoutError, KafkaClusterError, KafkaDistError) as exc:
            print("\ntimeline so far:")
            print(timeline.render())
            print(f"\nscenario failed: {exc}", file=sys.stderr)
            return 1
        report(run, verdict, without)
        verdict.fill_seconds_without = (
            None if without is None else without.marks["full"] - without.load_started
        )
        if verdict.ok:
            print(
                "\nPROTECTED: no volume reached 0 usable bytes, no storage error, no delivery "
                "error, throttle held through the full broker's restart"
            )
            return 0
        print("\nNOT PROTECTED: see the numbers above", file=sys.stderr)
        return 1


if __name__ == "__main__":
    from devkit.processes import run_until_interrupted

    raise SystemExit(run_until_interrupted(main))
