"""bench/slowdown's load as real Kafka and its producers shape it, by tenths of a second, for the
closed-loop model (issue 42; `devkit.slowdown_model.study.scenario`,
tests/kvq/model/test_graceful_slowdown.py's `kafka_retention_loop`).

The model's first load was smooth: the enforcer's quota held each second's writes to the factor
x the reference. On real Kafka a throttled producer writes in bursts, and one 5 s interval's
growth swings several-fold from one poll to the next (the exporter's archive of the real runs,
docs/results/slowdown-policy-graceful-slowdown-series.json: producers at 0-2 kB/s for seconds,
then 100-450 kB/s). What makes the bursts, as modelled here:

- Kafka's quota sensor, one per budget and broker (devcluster.produce_quotas: Kafka's Rate over
  11 samples of 1 s, ClientQuotaManager's budgets): each produce request's bytes are recorded,
  then the rate is checked against the quota; over it, the response carries a throttle time of
  (rate - quota) / quota x the window (QuotaUtils.throttleTime) and the broker mutes the
  connection for that long (KIP-219); the Java client does not send to that broker until then.
- The producers (demo/producers.py, devkit/producer_load.py, devkit/java_producer.py): 64 kB of
  buffer each; while a connection is muted what is meant for it stays buffered, and once the
  buffer is full the application blocks (a muted broker stalls the producer's other partition
  too); the librdkafka load catches up at most 1 s of what it could not offer, Kafka's
  ProducerPerformance (Java) keeps its average rate (a backlog without bound), and sends most of
  its records to one partition for its first seconds (JAVA_SKEW). An unmuted
  connection sends everything buffered for it in one request (librdkafka's batches hold up to
  1 MB; Java's five requests in flight of 16 KiB per partition hold more than its buffer): the
  burst is recorded at once, and its throttle time mutes it again.
- The topics: each producer's topic has two partitions, one led by broker 0, one by broker 1
  or 2, both with a replica on broker 0 (demo.producers.TOPICS); librdkafka spreads records
  evenly over them, Java's adaptive partitioner favours the partition with less queued.
- The quotas (demo.versus.VERSUS_QUOTAS): alice 25 kB/s, bob/app and dave 20 kB/s of their own
  per broker, carol and erin under the standing default-user quota (10 MB/s, a budget per user).
  The enforcer (observed-rate references) scales each entity's lower of its original and its
  reference, the highest rate Kafka's sensor showed on its busiest broker over the 5 min before
  the episode started (sampled each second, as Prometheus scrapes it), and holds it at its
  minimum (enforcer.quota_plan.desired_value with the enforcer's defaults); a factor of 1.0
  restores the originals.

Bytes are wire bytes (value bytes x WIRE_PER_VALUE, Kafka's record overhead as the real runs
measured it); broker 0's log dir gets every byte of the load.

Against the real runs (docs/policy-study.md, "On Kafka's quotas: the model with bursts"): it
reproduces the shipped policy (a few points low) and B as merged (its share, its long stalls);
for designs that hold the factor longer (B over windows of intervals, B paced) it wrote 10-12
points less than real Kafka and kept more headroom, mostly at factors near 0.3, where the
default-user principals wrote a third less than on real Kafka.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from demo.producers import JAVA_BATCH_BYTES, Setup
from demo.slowdown import SETUP as SLOWDOWN_SETUP
from demo.slowdown import many_principals
from devcluster.produce_quotas import WINDOW_NUM, Rate, java_round
from enforcer.observed_rates import DEFAULT_STEP_WINDOW, before_step
from enforcer.quota_plan import (
    BYTE_RATE_FLOOR,
    PRODUCER_BYTE_RATE,
    QuotaPolicy,
    desired_value,
)
from kvq.kafka.quota_entity import QuotaEntity

TOTAL = 32 << 20
"""Broker 0's volume (a tmpfs) ..."""
LIMIT = TOTAL // 4
"""... its limit (25 % available) ..."""
START = 24_047_616
"""... and its available bytes before bench/slowdown's load wrote anything."""
SEGMENT, RETENTION = 5.0, 60.0
"""Every topic's segment.ms and retention.ms, in seconds (demo.slowdown.SETUP)."""
WARM_UP = 30.0
"""Seconds the load runs before the scenario starts, with ... (the bench's warm-up when the study's
claims were made; bench/slowdown now warms up for demo.slowdown.WARM_UP_SECONDS, past the
enforcer's step window: tests/kvq/model/test_slowdown_study.py, docs/policy-study.md)"""
WARM_UP_SEGMENT, WARM_UP_RETENTION = 1.0, 1.0
"""... every topic's segment.ms and retention.ms then (demo.slowdown.WARM_UP_TOPIC_CONFIG)."""
BEFORE = 10.0
"""Each producer's rate before (demo.slowdown.BEFORE_SECONDS): over the warm-up's last seconds."""
DELETE_DELAY = 1.0
"""log.segment.delete.delay.ms (demo.apache): a deleted segment's file goes this much later."""
TICK = 0.1
"""Seconds per step of the model."""
TICKS_PER_SECOND = 10
WIRE_PER_VALUE = 1.13
"""Disk bytes on broker 0 per acknowledged value byte, as bench/slowdown measures it."""
OFFERED = SLOWDOWN_SETUP.producer_rate * WIRE_PER_VALUE
"""Each producer's offered rate (75 kB/s of values)."""
BUFFER = SLOWDOWN_SETUP.producer_buffer * 1024.0
"""Each producer's buffer (librdkafka's queue.buffering.max.kbytes=64, Java's buffer.memory)."""
BATCH = float(JAVA_BATCH_BYTES)
"""The Java client's batch.size (a request carries one batch per partition)."""
IN_FLIGHT = 5
"""The Java client's max.in.flight.requests.per.connection."""
JAVA_SKEW, JAVA_SKEW_SECONDS = 0.7, 10.0
"""For its first JAVA_SKEW_SECONDS a Java producer sends JAVA_SKEW of its records to one of its
two partitions (the one led by broker 1 or 2). Kafka's built-in partitioner weighs partitions
against what is queued for them, and at start the two leaders do not answer alike: on real Kafka
(bench/slowdown, Prometheus' kafka_server_quota_byte_rate) erin's rate read 63 kB/s on one broker
and 29 kB/s on the other 10 s into the load, 42-45 kB/s on both from 20 s on. The enforcer's
observed-rate reference is the busiest broker's highest rate: 63 kB/s for the default-user
quota (the run's journal), where an even split gives 43 kB/s; at a factor, the principals under
that quota write that much more."""
LOOKBACK = 300
"""kvq.enforcer.throttle.observed.rate.lookback (PT5M), in seconds."""
STEP_WINDOW = DEFAULT_STEP_WINDOW.total_seconds()
"""kvq.enforcer.throttle.observed.rate.step.window, in seconds."""
DEFAULT_PRODUCE = 10_000_000.0
"""The standing default-user quota, the enforcer's base (demo.stack.DemoStack.DEFAULT_PRODUCE)."""
POLICY = QuotaPolicy(
    keys=(PRODUCER_BYTE_RATE,),
    bases={PRODUCER_BYTE_RATE: DEFAULT_PRODUCE},
    byte_rate_floor=BYTE_RATE_FLOOR,
    longest_throttle_seconds=60.0,
    request_bytes=32768,
    request_throttle_seconds=8.0,
)
"""The enforcer's quota policy with its defaults (kvq.enforcer.throttle.*); a load's
`Load.burst_ratio` stands in for the burst ratio."""

DEFAULT = QuotaEntity.default_user()
ProducerSpec = tuple[str, str, str, str, str]
"""(name, budget (Kafka's sensor), quota entity, kind, topic)."""


@dataclass(frozen=True)
class Load:
    """Who writes: the producers, the quota entities the enforcer scales (entity -> its quota
    entity and original quota) and what each producer offers (wire bytes/s)."""

    producers: tuple[ProducerSpec, ...]
    entities: dict[str, tuple[QuotaEntity, float]]
    rate: float = OFFERED
    buffer: float = BUFFER
    """Bytes each librdkafka producer buffers (`Setup.producer_buffer`) ..."""
    java_buffer: float = BUFFER
    """... and each Java producer (`Setup.java_buffer`: at least a batch)."""
    reference_swing: float = 1.0
    """How far the enforcer's references sit above what the entities write sustained. The
    model's producers write steadily, so its sensors read their rates (1.0); on real Kafka a
    sensor over a 3 s quota window swings with the producers' batches, and the highest rate
    over the lookback was 1.26-1.50 times the highest 30 s average (bench/slowdown)."""
    burst_ratio: float = 1.0
    """The enforcer's kvq.enforcer.throttle.observed.rate.burst.ratio (`QuotaPolicy.burst_ratio`):
    1.0, a factor scales the reference itself, for references that do not swing."""


TOPICS = ("orders", "clicks", "java-orders", "java-clicks")
"""Each of two partitions, the first led by broker 0, the other by broker 1 (orders) or 2
(clicks); broker 0 holds a replica of both (demo.producers.TOPICS, demo.producers.APACHE)."""
PARTITIONS = 2 * len(TOPICS)
"""Broker 0's replicas: `TOPICS` index x 2 + partition."""


def load_of(setup: Setup) -> Load:
    """The demo's producers and quotas as the model's: each producer's budget is its user (Kafka's
    sensor), its quota entity the most specific quota its user (and client-id) has, else the
    default user's; at the setup's rate in wire bytes."""

    def named(key: tuple) -> str:
        user = dict(key)["user"]
        return "default" if user is None else user

    def entity(user: str, client_id: str) -> str:
        for key in ((("client-id", client_id), ("user", user)), (("user", user),)):
            if key in setup.quotas:
                return named(key)
        return "default"

    producers = tuple(
        (f"{user} / {client_id}", user, entity(user, client_id), kind, topic)
        for kind, specs in (("librdkafka", setup.librdkafka), ("Java", setup.java))
        for user, client_id, topic in specs
    )
    entities = {
        named(key): (QuotaEntity.of(list(key)), value) for key, value in setup.quotas.items()
    }
    return Load(
        producers,
        entities,
        setup.producer_rate * WIRE_PER_VALUE,
        setup.producer_buffer * 1024.0,
        float(setup.java_buffer),
    )


SIX = load_of(SLOWDOWN_SETUP)
"""bench/slowdown's load: alice 25 kB/s, bob/app and dave 20 kB/s of their own per broker,
carol and erin under the standing default-user quota (demo.versus.VERSUS_QUOTAS)."""


def principals(count: int, buffer_kb: int | None = None) -> Load:
    """`python -m bench.slowdown --principals count [--producer-buffer buffer_kb]`
    (demo.slowdown.many_principals)."""
    setup = many_principals(count)
    if buffer_kb is not None:
        setup = replace(setup, producer_buffer=buffer_kb)
    return load_of(setup)


@dataclass(slots=True)
class Connection:
    """A producer's connection to the leader of one of its partitions."""

    unsent: float = 0.0
    """Bytes buffered for the partition, not yet in a request."""
    requests: deque[float] = field(default_factory=deque)
    """Requests sent and not yet answered (their bytes), oldest first: the broker reads the
    next one only once the channel is no longer muted."""
    muted_until: float = float("-inf")
    """The broker's mute after a throttled response (KIP-219), which the Java client honours
    too (it sends nothing more until then); librdkafka does not (confluentinc/librdkafka#5592)
    and keeps sending requests the broker reads later."""


@dataclass(slots=True)
class Producer:
    name: str
    budget: str
    entity: str
    java: bool
    topic: int
    """Its topic's index in TOPICS."""
    rate: float = OFFERED
    buffer: float = BUFFER
    """Bytes its client buffers: the application blocks once that much is queued."""
    owed: float = 0.0
    """Bytes the application means to have handed to the client by now and has not."""
    connections: tuple[Connection, Connection] = field(
        default_factory=lambda: (Connection(), Connection())
    )
    age: float = 0.0
    """Seconds since the producer started."""
    acked: list[float] = field(default_factory=list)
    """Bytes acknowledged each tick from the scenario's start."""
    before: float | None = None
    """Its rate over the warm-up's last BEFORE seconds (None without a warm-up)."""
    throttles: list[tuple[float, float]] = field(default_factory=list)
    """(time, throttle seconds) of each throttled response."""

    def offer(self) -> None:
        """The application's tick: what it offers goes into the buffer (requests in flight
        count: librdkafka's queue and Java's buffer.memory hold a record until it is
        acknowledged) while there is room; a full buffer blocks it."""
        owed = self.owed + self.rate * TICK
        if not self.java:  # devkit/producer_load.run_steady: no catching up beyond 1 s
            owed = min(owed, self.rate)
        first, second = self.connections  # buffered bytes, summed inline: the model's hottest loop
        queued_first = first.unsent + sum(first.requests)
        queued_second = second.unsent + sum(second.requests)
        handed = min(owed, max(self.buffer - (queued_first + queued_second), 0.0))
        self.owed = owed - handed
        skewed = self.java and self.age < JAVA_SKEW_SECONDS
        self.age += TICK
        if handed == 0.0:  # a full buffer: the application blocks
            return
        if skewed:
            first.unsent += handed * (1 - JAVA_SKEW)
            second.unsent += handed * JAVA_SKEW
        elif self.java:  # the adaptive partitioner: the partition with less queued gets more
            low, high = (first, second) if queued_first <= queued_second else (second, first)
            gap = queued_second - queued_first if low is first else queued_first - queued_second
            topped = min(handed, gap)
            low.unsent += topped + (handed - topped) / 2
            high.unsent += (handed - topped) / 2
        else:
            first.unsent += handed / 2
            second.unsent += handed / 2

    def send(self, t: float) -> None:
        """The client's requests this tick. librdkafka: what is buffered for a partition in one
        request (its batches hold up to 1 MB; linger.ms=5), throttled or not, any number in
        flight. Java: batches of BATCH bytes, at most IN_FLIGHT requests a connection, none
        while the connection is throttled."""
        for connection in self.connections:
            if not self.java:
                if connection.unsent > 0.0:
                    connection.requests.append(connection.unsent)
                    connection.unsent = 0.0
                continue
            if t < connection.muted_until:
                continue
            while connection.unsent > 0.0 and len(connection.requests) < IN_FLIGHT:
                batch = min(connection.unsent, BATCH)
                connection.requests.append(batch)
                connection.unsent -= batch


class KafkaLoad:
    """The scenario's producers, Kafka's quota sensors and the enforcer's quotas; `tick` runs
    one TICK and gives the bytes broker 0's replicas got (one entry per PARTITIONS)."""

    def __init__(
        self,
        load_step: tuple[float, float] | None = None,
        step_window: float = STEP_WINDOW,
        load: Load = SIX,
        window_samples: int = WINDOW_NUM,
    ) -> None:
        self.writers = load
        self.window_samples = window_samples
        """Every broker's quota.window.num: its sensors' samples of 1 s, and the window the
        enforcer's own minimums follow (it reads it from the brokers)."""
        self.policy = replace(
            POLICY, quota_window_seconds=float(window_samples), burst_ratio=load.burst_ratio
        )
        self.producers = [
            Producer(
                name,
                budget,
                entity,
                kind == "Java",
                TOPICS.index(topic),
                load.rate,
                load.java_buffer if kind == "Java" else load.buffer,
            )
            for name, budget, entity, kind, topic in load.producers
        ]
        self.load_step = load_step
        self.step_window = step_window
        """The enforcer's kvq.enforcer.throttle.observed.rate.step.window, in seconds (0: off):
        its references are no higher than over the lookback ending this long earlier."""
        self.stepped = False
        self.sensors: dict[tuple[str, int], Rate] = {}
        self.routes = [self.route(p) for p in self.producers]
        """Per producer, per partition: its connection, its leader's sensor and broker 0's
        replica (`written`'s index), in the order `tick` takes them (the sensors made in it)."""
        self.seen: dict[str, deque[tuple[float, float]]] = {e: deque() for e in load.entities}
        """Per quota entity: (second, its highest sensor rate on any broker), the lookback."""
        self.references: dict[str, float] = {}
        self.quotas = {e: original for e, (_, original) in load.entities.items()}
        self.factor = 1.0

    def enforce(self, factor: float, t: float) -> None:
        """The enforcer's quotas at `factor` (in force from now): a new episode (from 1.0)
        takes its references, never below the last episode's."""
        if factor < 1.0 <= self.factor:
            recent = {e: self.highest(e, t) for e in self.seen}
            earlier = {e: self.highest(e, t - self.step_window) for e in self.seen}
            seen_then = {e: rate for e, rate in earlier.items() if rate > 0.0}
            observed = before_step(recent, seen_then) if self.step_window > 0.0 else recent
            for entity, rate in observed.items():
                if rate > 0.0:
                    seen = rate * self.writers.reference_swing
                    self.references[entity] = max(seen, self.references.get(entity, 0.0))
        self.factor = factor
        for entity, (quota_entity, original) in self.writers.entities.items():
            value = desired_value(
                self.policy,
                (quota_entity, PRODUCER_BYTE_RATE),
                None if entity == "default" else original,
                factor,
                None,
                self.references.get(entity),
            )
            self.quotas[entity] = original if value is None else value

    def highest(self, entity: str, end: float) -> float:
        """The entity's highest scraped rate over the lookback ending at `end` (0.0: none)."""
        seen = self.seen[entity]
        return max((rate for at, rate in seen if end - LOOKBACK < at <= end), default=0.0)

    def step_load(self) -> None:
        """The same principals offering `times` the load: one more librdkafka producer per
        librdkafka producer (demo.slowdown.step_load), together (times - 1) x the load."""
        assert self.load_step is not None
        times = self.load_step[1]
        librdkafka = [p for p in self.producers if not p.java]
        extra = (times - 1) * self.writers.rate * len(self.producers) / len(librdkafka)
        stepped = [
            Producer(p.name + " (step)", p.budget, p.entity, False, p.topic, extra, p.buffer)
            for p in librdkafka
        ]
        self.producers += stepped
        self.routes += [self.route(p) for p in stepped]

    def sensor(self, budget: str, broker: int) -> Rate:
        sensor = self.sensors.get((budget, broker))
        if sensor is None:
            sensor = self.sensors[budget, broker] = Rate(self.window_samples)
        return sensor

    def route(self, producer: Producer) -> list[tuple[Connection, Rate, int]]:
        """(connection, its leader's sensor, broker 0's replica) for each of its partitions."""
        return [
            (connection, self.sensor(producer.budget, broker), 2 * producer.topic + partition)
            for partition, (connection, broker) in enumerate(
                zip(producer.connections, (0, 1 + producer.topic % 2), strict=True)
            )
        ]

    def tick(self, t: float) -> list[float]:
        if self.load_step and t >= self.load_step[0] and not self.stepped:
            self.stepped = True
            self.step_load()
        now_ms = round(t * 1000)
        written = [0.0] * PARTITIONS
        for producer, route in zip(self.producers, self.routes, strict=True):
            producer.offer()
            producer.send(t)
            acked = 0.0
            quota = self.quotas[producer.entity]
            for connection, sensor, index in route:
                requests = connection.requests
                while requests and t >= connection.muted_until:
                    request = requests.popleft()
                    sensor.record(request, now_ms)
                    rate, window = sensor.measure_in_window(now_ms)
                    acked += request
                    written[index] += request
                    if rate > quota:
                        throttle = java_round((rate - quota) / quota * window) / 1000
                        connection.muted_until = t + throttle
                        producer.throttles.append((t, throttle))
            producer.acked.append(acked)
        if round(t * TICKS_PER_SECOND) % TICKS_PER_SECOND == 0:
            self.scrape(t, now_ms)
        return written

    def scrape(self, t: float, now_ms: int) -> None:
        """Prometheus' scrape of Kafka's byte-rate per entity, busiest broker (each second)."""
        for entity in self.seen:
            budgets = {p.budget for p in self.producers if p.entity == entity}
            rates = [
                sensor.measure(now_ms)
                for (budget, _), sensor in self.sensors.items()
                if budget in budgets
            ]
            seen = self.seen[entity]
            seen.append((t, max(rates, default=0.0)))
            while seen and seen[0][0] <= t - LOOKBACK - self.step_window:
                seen.popleft()

    def groups(self) -> dict[str, list[Producer]]:
        """The producers judged together for "back at their rate" (demo.slowdown's
        entities_back_at_rate): those sharing a quota of their own together, the others
        alone; the load step's extra producers are left out, as in the bench."""
        groups: dict[str, list[Producer]] = {}
        for producer in self.producers[: len(self.writers.producers)]:
            key = producer.name if producer.entity == "default" else producer.entity
            groups.setdefault(key, []).append(producer)
        return groups


def rate_over(producers: list[Producer], start: float, end: float) -> float:
    """The producers' acknowledged bytes per second from `start` to `end` (seconds)."""
    first, last = round(start * TICKS_PER_SECOND), round(end * TICKS_PER_SECOND)
    return sum(sum(p.acked[first:last]) for p in producers) / max(end - start, TICK)


def longest_stall(producer: Producer, start: float, end: float) -> float:
    """The longest time `producer` went without an acknowledgement from `start` to `end`."""
    first, last = round(start * TICKS_PER_SECOND), round(end * TICKS_PER_SECOND)
    times = [first, *(i for i in range(first, last) if producer.acked[i] > 0), last]
    return max(b - a for a, b in zip(times, times[1:], strict=False)) * TICK


def back_at_rate(
    producers: list[Producer], before: float, freed: float, most: float = 30.0
) -> float | None:
    """Seconds from `freed` until `producers` together were back at 80 % of `before` over 3 s
    (demo.slowdown.Outcome.back_at_rate), None if not within `most`."""
    at = freed
    while at <= freed + most and round(at * TICKS_PER_SECOND) <= len(producers[0].acked):
        if rate_over(producers, at - 3.0, at) >= 0.8 * before:
            return at - freed
        at += 0.2
    return None


def retain(
    segments: list[list[float]],
    t: float,
    written: float,
    check: bool,
    segment: float = SEGMENT,
    retention: float = RETENTION,
) -> float:
    """Kafka's log of one replica after `written` bytes at `t` (UnifiedLog): the active segment
    rolls when a write comes `segment` s after its first; at a retention check (`check`, every
    second: log.retention.check.interval.ms) a segment other than the active one is deleted
    once its newest write is more than `retention` s old. `segments`: [first write, newest
    write, bytes], changed in place. The bytes deleted."""
    if written > 0.0:
        if not segments or t - segments[-1][0] >= segment:
            segments.append([t, t, 0.0])
        segments[-1][1] = t
        segments[-1][2] += written
    if not check:
        return 0.0
    kept = [s for s in segments[:-1] if t - s[1] <= retention]
    deleted = sum(s[2] for s in segments[:-1]) - sum(s[2] for s in kept)
    segments[:-1] = kept
    return deleted


QUIET_BEFORE = 20
"""Seconds the exporter polls broker 0 before the load starts."""
Decide = Callable[[float, int, int, float, float], float | None]
"""The exporter and policy at a whole second: (time, available bytes, total bytes, bytes the
replicas grew by since the last reading taken in, bytes they dropped by) -> the factor to
publish, or None (a check not taken in)."""


@dataclass
class KafkaRun:
    load: KafkaLoad
    written: list[float]
    """Bytes broker 0 got each second."""
    lowest: float
    """Lowest headroom (available - limit) before the space was freed."""
    factors: list[tuple[float, float]]
    """(time, factor) published."""
    slowed: float | None
    """When the quotas were first lowered."""
    freed: float | None
    lowest_after_freed: float | None = None
    """Lowest headroom once the space was freed (None: never freed)."""


def run(
    decide: Decide,
    delay: float = 3.0,
    load_step: tuple[float, float] | None = None,
    duration: float = 700.0,
    sizes_every: float = 1.0,
    calls_every: float = 1.0,
    freed_after: float | None = None,
    phase: int = 0,
    step_window: float = STEP_WINDOW,
    warm_up: float = WARM_UP,
    writers: Load = SIX,
    retention_check: float = 1.0,
    quota_window_samples: int = WINDOW_NUM,
) -> KafkaRun:
    """bench/slowdown's broker 0 by tenths of a second: the load (`KafkaLoad`) fills its
    replicas, retention deletes; the exporter reads the replicas' sizes every `sizes_every` s
    and calls `decide` every `calls_every` s; the factor published is in force (Kafka's quotas)
    `delay` s later. The load starts `warm_up` s before the scenario (time 0), with every
    topic's retention WARM_UP_RETENTION in segments of WARM_UP_SEGMENT until then.
    `freed_after` s after the first slowdown the volume is grown by its size
    (demo.producers.grow_full_volume: the tmpfs remounted twice as large). The exporter runs
    QUIET_BEFORE s before the load starts (demo.slowdown.quiet_before_load waits for four
    polls): its history holds intervals without growth. `phase`: the exporter's clock is this
    many seconds ahead of the load's (its polls fall that much earlier in the load).
    `step_window`, `writers` (its `load`): `KafkaLoad`'s. `retention_check`: seconds between
    Kafka's retention checks (log.retention.check.interval.ms; bench/slowdown's 1 s) once the
    scenario starts (the warm-up's second by second: its data gone before).
    `quota_window_samples`: every broker's quota.window.num (`KafkaLoad`'s `window_samples`)."""
    started = -round(warm_up)
    for before in range(started - QUIET_BEFORE, started):
        if before % round(calls_every) == 0:
            decide(float(before + phase), START, TOTAL, 0.0, 0.0)
    load = KafkaLoad(load_step, step_window, writers, quota_window_samples)
    broker = BrokerLog(retention_check)
    quotas = Quotas(load, delay, started)
    exporter = ExporterReadings(decide, sizes_every, calls_every, phase)
    grown_by = 0.0
    freed = None
    lowest = float(START - LIMIT)
    lowest_after: float | None = None
    written_each_second: list[float] = []
    second = 0.0
    for tick in range(started * TICKS_PER_SECOND, round(duration * TICKS_PER_SECOND) + 1):
        t = tick / TICKS_PER_SECOND
        whole = tick % TICKS_PER_SECOND == 0
        if tick == 0 and started < 0:  # the scenario starts: what was acknowledged counts now
            start_scenario(load)
            second = 0.0
        quotas.take_effect(t)
        slowed = quotas.slowed
        late = slowed is not None and freed_after is not None and t >= slowed + freed_after
        if late and freed is None:
            freed, grown_by = t, float(TOTAL)
        written = load.tick(t)
        broker.write(t, tick, whole, written)
        second += sum(written)
        if not whole:
            continue
        if t >= 0.0:
            written_each_second.append(second)
        second = 0.0
        sizes = broker.sizes()
        available = START + round(grown_by) - round(broker.used(sizes))
        if freed is None:
            lowest = min(lowest, available - LIMIT)
        else:
            after = available - LIMIT
            lowest_after = after if lowest_after is None else min(lowest_after, after)
        decided = exporter.at_second(tick, t, sizes, available, TOTAL + round(grown_by))
        if decided is not None:
            quotas.publish(t, decided)
    factors = quotas.factors
    return KafkaRun(load, written_each_second, lowest, factors, quotas.slowed, freed, lowest_after)


def start_scenario(load: KafkaLoad) -> None:
    """Time 0: each producer's rate before is its acknowledged rate over the warm-up's last
    BEFORE s, and what it gets acknowledged counts from now on."""
    for producer in load.producers:
        producer.before = sum(producer.acked[-round(BEFORE * TICKS_PER_SECOND) :]) / BEFORE
        producer.acked.clear()


class Quotas:
    """The factors published and the one in Kafka's quotas: each takes effect `delay` s after
    it was published."""

    def __init__(self, load: KafkaLoad, delay: float, started: int) -> None:
        self.load, self.delay = load, delay
        self.published: deque[tuple[float, float]] = deque([(started - delay, 1.0)])
        self.in_force = 1.0
        self.slowed: float | None = None
        """When the quotas were first lowered."""
        self.factors: list[tuple[float, float]] = []

    def publish(self, t: float, factor: float) -> None:
        self.published.append((t, factor))
        self.factors.append((t, factor))

    def take_effect(self, t: float) -> None:
        """The newest factor published `delay` s ago or earlier, into the quotas if it changed."""
        published = self.published
        while len(published) > 1 and published[1][0] <= t - self.delay + 1e-9:
            published.popleft()
        if published[0][1] != self.in_force:
            self.in_force = published[0][1]
            self.load.enforce(self.in_force, t)
            if self.slowed is None and self.in_force < 1.0:
                self.slowed = t


class BrokerLog:
    """Broker 0's replicas (`retain` each) and the bytes deleted but not yet gone from the disk
    (DELETE_DELAY: Kafka deletes a segment's files a moment after it left the log)."""

    def __init__(self, retention_check: float) -> None:
        self.retention_check = retention_check
        self.logs: list[list[list[float]]] = [[] for _ in range(PARTITIONS)]
        self.lingering: deque[tuple[float, float]] = deque()

    def write(self, t: float, tick: int, whole: bool, written: list[float]) -> None:
        """Each replica's bytes of this tick, and retention: during the warm-up its own segments
        and retention, checked every second; from time 0 the scenario's, every
        `retention_check` s."""
        kept = (SEGMENT, RETENTION) if t >= 0.0 else (WARM_UP_SEGMENT, WARM_UP_RETENTION)
        for i, log in enumerate(self.logs):
            every = round(self.retention_check * TICKS_PER_SECOND)
            checked = whole if t < 0.0 else tick % every == 0
            deleted = retain(log, t, written[i], checked, *kept)
            if deleted:
                self.lingering.append((t + DELETE_DELAY, deleted))
        while self.lingering and self.lingering[0][0] <= t:
            self.lingering.popleft()

    def sizes(self) -> list[float]:
        return [sum(s[2] for s in log) for log in self.logs]

    def used(self, sizes: list[float]) -> float:
        return sum(sizes) + sum(b for _, b in self.lingering)


def growth_and_drops(sizes: list[float], read: list[float]) -> tuple[float, float]:
    """What the replicas grew by and dropped by since they were `read`, one replica at a time (a
    replica that grew and lost a segment between two readings shows only the difference)."""
    grew = sum(max(n - r, 0.0) for n, r in zip(sizes, read, strict=True))
    fell = sum(max(r - n, 0.0) for n, r in zip(sizes, read, strict=True))
    return grew, fell


class ExporterReadings:
    """The exporter: the replicas' sizes read every `sizes_every` s, the growth and drops since
    the last reading taken in handed to `decide` every `calls_every` s (its clock `phase` s
    ahead of the load's)."""

    def __init__(self, decide: Decide, sizes_every: float, calls_every: float, phase: int) -> None:
        self.decide, self.phase = decide, phase
        self.sizes_ticks = round(sizes_every * TICKS_PER_SECOND)
        self.calls_ticks = round(calls_every * TICKS_PER_SECOND)
        self.read = [0.0] * PARTITIONS
        self.grown = self.dropped = 0.0

    def at_second(
        self, tick: int, t: float, sizes: list[float], available: int, total: int
    ) -> float | None:
        """What `decide` published at this whole second (None: not called, or nothing)."""
        if tick % self.sizes_ticks == 0:
            grew, fell = growth_and_drops(sizes, self.read)
            self.grown, self.dropped, self.read = self.grown + grew, self.dropped + fell, sizes
        if tick % self.calls_ticks != 0:
            return None
        decided = self.decide(t + self.phase, available, total, self.grown, self.dropped)
        if decided is not None:
            self.grown = self.dropped = 0.0
        return decided
