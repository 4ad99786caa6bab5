"""Request sizes: how large the produce requests of each throttled quota entity are, from the
throttle times Kafka answers them with (observed-rate references only).

A producer held at its quota q sends its next request when its throttle time ends (KIP-219), and
Kafka answers a request of S bytes with about S / q (quota_plan.request_minimum): an entity whose
requests are large for its quota goes that long without an acknowledgement. Which entities those
are is not known in advance (a Java producer sends 16 KiB per partition, librdkafka what it
buffered), but Kafka says it: each quota entity's sensors include `throttle-time`, the average
throttle time of its throttled requests over the broker's metrics window (an `Avg` over
`metrics.num.samples` 2 x `metrics.sample.window.ms` 30 s by default: up to the last minute; the
enforcer reads the brokers' own with their quota window), which the JMX exporter rules in
deploy/jmx-exporter/ export as `kafka_server_quota_throttle_time` (ms).

So during an episode the enforcer asks Prometheus for it (at most every `ASK_SECONDS`) and
estimates each entity's request size as its throttle time x the quota its requests met
(`request_size`), without what a lowered quota adds to a throttle time of its own (the bytes
written at the higher quota still count in Kafka's window). Kafka averages over the throttled
requests only, so the estimate is low rather than high (on devcluster's model of Kafka's quota,
two thirds of a Java producer's 16 KiB batches while its quota is falling, all of them once it
holds). An episode keeps each entity's largest estimate (a window with fewer throttled requests
does not make them smaller); a restore or a new episode forgets them, as does a restart (the
next asks find them again from Kafka's window of the last minute).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from enforcer.log_lists import first_few
from enforcer.observed_rates import (
    CLIENT_ID_LABEL,
    USER_LABEL,
    ObservedRate,
    governing,
    parse_vector,
)
from enforcer.prometheus_check import PrometheusFactor
from enforcer.quota_plan import (
    KAFKA_THROTTLE_AVERAGE_SECONDS,
    PRODUCER_BYTE_RATE,
    Pair,
    QuotaPolicy,
    Requests,
)
from kvq.kafka.quota_entity import QuotaEntity

log = logging.getLogger("kvq.enforcer")

DEFAULT_THROTTLE_QUERY = (
    f"max by ({USER_LABEL}, {CLIENT_ID_LABEL}) "
    '(kafka_server_quota_throttle_time{resource="Produce"})'
)
"""Each quota entity's average produce throttle time (ms) on the broker that throttles it most."""
AVERAGED_SECONDS = KAFKA_THROTTLE_AVERAGE_SECONDS
"""How far back Kafka's average throttle time reaches with its defaults (`metrics.num.samples` 2
x `metrics.sample.window.ms` 30 s); the brokers' own, once read, is the policy's
`throttle_average_seconds`."""
SCRAPED_SECONDS = 30.0
"""How old the throttle time series may be: one scrape interval (30 s at most in the
recommended setups)."""
HELD_SECONDS = AVERAGED_SECONDS + SCRAPED_SECONDS
"""How far back the quotas an entity held count for a throttle time read now, with Kafka's
default average: the average, and the series' age."""
ASK_SECONDS = 5.0
"""How often an episode asks for the throttle times: one instant query every few of graceful
slowdown's steps at most; Kafka's average moves little faster."""
DEFAULT_USER_QUOTA = (QuotaEntity.default_user(), PRODUCER_BYTE_RATE)
"""The default user's producer quota: the users it holds are sized (and raised) one by one."""
GROWTH_LOGGED = 1.5
"""An entity's estimate is logged when first found and when it grows by this much."""
CLIENT_TIMEOUT_SECONDS = 60.0
"""librdkafka's default socket.timeout.ms. librdkafka does not wait out a throttle time itself
(no KIP-219: librdkafka#5592), so its next requests wait in the connection Kafka muted; one that
waits this long times out, librdkafka reconnects, and Kafka writes the first request of the new
connection at once. An entity whose requests take this long of its quota (request size / quota)
writes about one request per timeout, more than its quota (a Java producer waits them out: it
stalls instead)."""


Held = Sequence[tuple[float, float]]
"""(when, quota) an entity was planned at, oldest first."""


def in_force(held: Held, start: float, end: float) -> Iterator[tuple[float, float]]:
    """(quota, seconds) for each quota of `held` in force between `start` and `end`: each until
    the next was set, the last until `end`."""
    for i, (when, value) in enumerate(held):
        until = held[i + 1][0] if i + 1 < len(held) else end
        seconds = min(until, end) - max(when, start)
        if seconds > 0.0:
            yield value, seconds


def window_excess(held: Held, window_seconds: float, before: float | None = None) -> float:
    """The most a lowered quota adds to a request's throttle time (s): over the moments a quota
    took effect, the largest sum, over the `window_seconds` before it, of (earlier quota / it -
    1) x the seconds that earlier quota was in force there: what a producer held at its quotas
    wrote before, still in Kafka's window, over what the new quota allows, in seconds of it.
    `before`: the rate the entity wrote before its first quota (the episode's first drop);
    0.0 when no quota was lowered. A single drop by a ratio d adds (d - 1) x W; a quota falling
    by a fifth every 5 s adds 5.0 s on Kafka's 11 s window, where the ratio of the highest to
    the lowest within a window, 1.95, counted as one drop for all of it, made it 10.5 s."""
    steps = [(held[0][0] - window_seconds, before), *held] if held and before else list(held)
    worst = 0.0
    for j, (took_effect, value) in enumerate(steps):
        if value <= 0.0:
            continue
        earlier = in_force(steps[:j], took_effect - window_seconds, took_effect)
        excess = sum((q / value - 1.0) * seconds for q, seconds in earlier if q > value)
        worst = max(worst, excess)
    return worst


def harmonic_mean(held: Held, start: float, end: float) -> float:
    """The time-weighted harmonic mean of the quotas in force from `start` to `end` (the one
    held before `start` counts from it): the quota q for which a request of S bytes got S / q
    on average, when the throttle times are averaged over requests spread over that time."""
    spent, inverse = 0.0, 0.0
    for value, seconds in in_force(held, start, end):
        if value > 0.0:
            spent, inverse = spent + seconds, inverse + seconds / value
    if inverse == 0.0:
        return held[-1][1] if held else 0.0
    return spent / inverse


def drop_share(
    throttle_seconds: float, window_seconds: float, averaged_seconds: float = AVERAGED_SECONDS
) -> float:
    """The share of the requests Kafka averages (over `averaged_seconds`) that came within
    `window_seconds` after a drop: a producer held by its throttle sends about one request per
    throttle time, so about max(throttle time, W) / averaged_seconds of them (at least the one
    the drop answered); all of them once its throttle times outlast the average's window."""
    return min(1.0, max(throttle_seconds, window_seconds) / averaged_seconds)


def emptied_window(
    window_seconds: float, sample_seconds: float, longest_throttle_seconds: float
) -> float:
    """What Kafka's window took off the throttle time of a request whose producer's last
    throttle outlasted it, where that is the throttle time a raise is for: the window less a
    sample (quota.window.num=3 of 1 s: 2 s) if shorter than half `longest_throttle_seconds`,
    else 0.

    A producer held by its throttle sends its next request when the throttle ends: after one
    longer than the window, the request meets no other bytes in it, and Kafka answers (S / W' -
    q) / q x W' = S / q - W' for the window W' its rate is measured over (Rate.windowSize: the
    window less a sample when the only bytes are the request's). A raise holds an entity where
    its requests of S bytes take S / q of half the longest throttle time allowed
    (quota_plan.request_minimum): beyond a window that short, those are the requests Kafka
    answers so. On Kafka's 11 s window they meet the ones before them and S / q is what Kafka
    answers: 0."""
    shortest = window_seconds - sample_seconds
    return shortest if 0.0 < shortest < longest_throttle_seconds / 2.0 else 0.0


def request_size(
    throttle_seconds: float,
    held: Held,
    now: float,
    window_seconds: float,
    first_drop: float = 1.0,
    emptied_seconds: float = 0.0,
    averaged_seconds: float = AVERAGED_SECONDS,
) -> float:
    """The request size (bytes) that explains an average throttle time of `throttle_seconds`
    read `now` for an entity that held the quotas `held`: (throttle time - what drops added)
    x the quota its requests met (`harmonic_mean` over Kafka's averaging window,
    `averaged_seconds`); 0 when the drops explain it all.

    Kafka's throttle time is (B - q x W) / q for the B bytes its window of W seconds holds, this
    request's included. A quota lowered within the W seconds before a request leaves bytes
    written at the higher quotas in the window, more than the request explains: at most
    `window_excess` of the quotas held, with `first_drop`, the episode's first, from the rate
    the entity was seen writing to its first quota, for as long as the average may hold it. Only
    the requests within W after a drop carry it, and Kafka averages over the requests of its
    window A: a producer held by its throttle sends about one per throttle time, so those are
    about max(t, W) / A of them (`drop_share`). A factor of 0 at once answers every entity with
    the longest throttle time allowed (a minute), and nothing else: all of the average is the
    drop's. A quota falling step by step adds a little to the few requests after each step: on
    devcluster's model of Kafka's quota (its 11 s window), a producer sending 16 KiB while its
    quota falls by a tenth every 5 s is read at 0.7-0.9 of them while it falls (0.6-0.8 with a
    window's highest quota over its lowest counted as one drop for all of it); counted as every
    request's, the steps hid them (0 B) until the quota had held for a window, past the first
    long throttle times.

    `emptied_seconds` (`emptied_window`) is what Kafka took off the throttle times of requests
    that met an empty window: added back when the average throttle time is at least that long,
    since then the longest throttle times were (an average that long has throttle times at
    least as long in it, whose producer waited them out before its next request), for a size
    no larger than the largest request's. On devcluster's model of a 3 s window, a producer
    held at its quota with requests of 5 s or more of it is read at all of them with it, at
    0.6-0.8 without; one with requests of 2.7-4 s of it (throttle times alternating around
    the window) at 1.4-1.7 x them: within the margin `request_minimum` keeps for them."""
    if not held:
        return 0.0
    before = held[0][1] * first_drop if first_drop > 1.0 else None
    excess = window_excess(held, window_seconds, before)
    added = excess * drop_share(throttle_seconds, window_seconds, averaged_seconds)
    emptied = emptied_seconds if throttle_seconds >= emptied_seconds else 0.0
    of_requests = throttle_seconds - added + emptied
    quota = harmonic_mean(held, now - averaged_seconds, now)
    return max(of_requests, 0.0) * quota


@dataclass
class RequestSizes:
    """One cluster's estimates for its active episode."""

    prometheus: PrometheusFactor
    query: str = DEFAULT_THROTTLE_QUERY
    """kvq.enforcer.throttle.observed.throttle.query: each entity's throttle time in ms."""
    monotonic: Callable[[], float] = time.monotonic
    ask_seconds: float = ASK_SECONDS
    held_seconds: float = field(default=HELD_SECONDS, init=False)
    """How far back the quotas an entity held count: the brokers' average (the policy's
    `throttle_average_seconds`, as the last ask read it) and the series' age."""
    _held: dict[Pair, deque[tuple[float, float]]] = field(default_factory=dict, init=False)
    """Per producer pair of the episode, (when, quota) of each value planned for it."""
    _first: dict[Pair, tuple[float, float]] = field(default_factory=dict, init=False)
    """Per pair, (when, ratio) of its first drop: from the rate it was seen writing (its
    reference) to its first quota."""
    _sizes: dict[Pair, float] = field(default_factory=dict, init=False)
    _budgets: dict[Pair, int] = field(default_factory=dict, init=False)
    """Per pair, the most series (users, clients) Kafka was seen throttling under it at once."""
    _asked: float | None = field(default=None, init=False)
    _recalled: dict[Pair, float] | None = field(default=None, init=False)
    """The journal's sizes the episode started from (None: not read yet)."""
    _journaled: dict[Pair, float] = field(default_factory=dict, init=False)
    """What the journal holds of them now (`recall`, then `journaled`)."""
    escaping: dict[Pair, float] = field(default_factory=dict, init=False)
    """The pairs whose requests, as the last ask estimated them, take `CLIENT_TIMEOUT_SECONDS`
    or more of the quota they met, with that time (s): their librdkafka producers reconnect
    and write past their quota."""
    _warned: set[Pair] = field(default_factory=set, init=False)
    """The pairs of the episode said to be escaping (once each)."""

    def forget(self) -> None:
        """The episode ended (or a new one starts): its estimates and quotas no longer hold."""
        self._held.clear()
        self._first.clear()
        self._sizes.clear()
        self._budgets.clear()
        self._asked = None
        self._recalled = None
        self._journaled.clear()
        self.escaping.clear()
        self._warned.clear()

    @property
    def recalled(self) -> bool:
        """Whether the episode's journaled sizes were read (`recall`) since it began."""
        return self._recalled is not None

    def recall(self, sizes: Mapping[Pair, float]) -> None:
        """The sizes the journal holds for the episode: a new one's from the last episode's
        estimates (an entity's requests are its clients' batches and buffers, which an episode
        does not change), a running one's its own so far (the enforcer restarted). Each pair's
        estimate is the larger of these and what its throttle times say now."""
        self._recalled = dict(sizes)
        self._journaled = dict(sizes)

    @property
    def kept(self) -> dict[Pair, float]:
        """What the journal is to keep of the episode for the next: each pair's own largest
        estimate where it reaches the one the episode started from (or there was none). A
        smaller one does not replace it: an entity raised for its requests from the start is
        throttled less, and its requests, what it buffered while muted, are smaller than they
        are once it is held; an episode that estimates nothing (a step restored a second
        later) forgets nothing."""
        recalled = self._recalled or {}
        return {pair: size for pair, size in self._sizes.items() if size >= recalled.get(pair, 0.0)}

    @property
    def unjournaled(self) -> dict[Pair, float]:
        """What the journal is to keep (`kept`) and does not hold yet."""
        return {p: size for p, size in self.kept.items() if size != self._journaled.get(p)}

    def journaled(self, sizes: Mapping[Pair, float]) -> None:
        """`sizes` (of `unjournaled`) are in the journal now."""
        self._journaled.update(sizes)

    def requests(self, cluster: str, policy: QuotaPolicy, window_seconds: float) -> Requests:
        """Each pair's largest request size estimate of the episode, and its budgets, asking
        Prometheus again when the last ask is `ask_seconds` old (nothing new when it cannot
        answer)."""
        now = self.monotonic()
        self.held_seconds = policy.throttle_average_seconds + SCRAPED_SECONDS
        if self._held and (self._asked is None or now - self._asked >= self.ask_seconds):
            self._asked = now
            result = self.prometheus.instant(cluster, self.query)
            if result is not None:  # unanswered: what the last answer said still holds
                self._estimate(cluster, policy, parse_vector(result), window_seconds, now)
        sizes = dict(self._recalled or {})
        for pair, size in self._sizes.items():
            sizes[pair] = max(size, sizes.get(pair, 0.0))
        return Requests(sizes, dict(self._budgets))

    def held(self, desired: Mapping[Pair, float | None], references: Mapping[Pair, float]) -> None:
        """The quotas a plan of the episode sets (the producer pairs with a reference)."""
        now = self.monotonic()
        for pair, value in desired.items():
            if pair[1] != PRODUCER_BYTE_RATE or pair not in references or not value:
                continue
            if pair not in self._held and pair in self._sizes:
                self._separated(pair)
            values = self._held.setdefault(pair, deque())
            if not values:
                self._first[pair] = (now, max(references[pair] / value, 1.0))
            if not values or values[-1][1] != value:
                values.append((now, value))
            self._forget_older(values, now)

    def _separated(self, pair: Pair) -> None:
        """A user sized under the default user's quota now has a quota of its own: what it
        held and its first drop are the default user's (the quota it was held to until now)."""
        if DEFAULT_USER_QUOTA in self._held:
            self._held[pair] = deque(self._held[DEFAULT_USER_QUOTA])
            self._first[pair] = self._first[DEFAULT_USER_QUOTA]

    def _forget_older(self, values: deque[tuple[float, float]], now: float) -> None:
        """Drops the quotas replaced more than `held_seconds` before `now`: the throttle times
        Kafka averages now were not answered at them."""
        while len(values) > 1 and now - values[1][0] > self.held_seconds:
            values.popleft()

    def _estimate(
        self,
        cluster: str,
        policy: QuotaPolicy,
        seen: Iterable[ObservedRate],
        window_seconds: float,
        now: float,
    ) -> None:
        """Each series' throttle time (ms) as the request size of the pair that governs it; the
        estimates found or grown by half said in one line (an episode of hundreds of entities
        would say hundreds)."""
        holding = {entity for entity, _ in self._held}
        budgets: dict[Pair, int] = {}
        grown: dict[str, tuple[float, float, float]] = {}
        escaping: dict[Pair, tuple[float, float, float]] = {}
        emptied = emptied_window(
            window_seconds, policy.quota_sample_seconds, policy.request_throttle_seconds or 0.0
        )
        for series in seen:
            if series.user in policy.excluded_users:
                continue
            entity = governing(holding, series.user, series.client_id)
            quota = (entity, PRODUCER_BYTE_RATE)
            if entity is None or quota not in self._held:
                continue
            pair = self._sized(quota, series)
            budgets[pair] = budgets.get(pair, 0) + 1
            self._forget_older(self._held[quota], now)
            held = list(self._held[quota])
            since, ratio = self._first[quota]
            first_drop = ratio if now - since <= self.held_seconds else 1.0
            # parse_vector names the sample's value a rate: here it is a time in ms.
            throttle_seconds = series.rate / 1000.0
            averaged = policy.throttle_average_seconds
            size = request_size(
                throttle_seconds, held, now, window_seconds, first_drop, emptied, averaged
            )
            met = harmonic_mean(held, now - averaged, now)
            if self._grown(pair, size):
                grown[pair[0].label()] = (size, throttle_seconds, met)
            # Past the timeout by the request's own bytes, not by what a drop added: the
            # jump to factor 0 answers everyone with a minute once, which is no escape.
            escapes = met > 0.0 and size / met >= CLIENT_TIMEOUT_SECONDS
            if escapes and size > escaping.get(pair, (0.0, met, 0.0))[0]:
                escaping[pair] = (size, met, size / met)
        for pair, count in budgets.items():
            self._budgets[pair] = max(self._budgets.get(pair, 0), count)
        if grown:
            log.info("cluster %s: produce requests of about %s", cluster, _largest_first(grown))
        self._escaped(cluster, escaping)

    def _escaped(self, cluster: str, escaping: Mapping[Pair, tuple[float, float, float]]) -> None:
        """Keeps the pairs whose requests now take longer than librdkafka's timeout at their
        quota; a warning names the ones new to the episode, longest first (once each: it stays
        quiet while they stay so)."""
        self.escaping = {pair: seconds for pair, (_, _, seconds) in escaping.items()}
        new = {pair: held for pair, held in escaping.items() if pair not in self._warned}
        if not new:
            return
        self._warned.update(new)
        ranked = sorted(new.items(), key=lambda item: -item[1][2])
        log.warning(
            "cluster %s: Kafka throttles each produce request of %s for longer than "
            "librdkafka's socket.timeout.ms (%.0f s by default): a librdkafka producer then "
            "times out, reconnects and has its next request written at once, about one request "
            "per timeout, more than its quota (a Java producer waits them out). Smaller "
            "requests keep its throttle times short: batch.size and message.max.bytes on its "
            "producers (docs/enforcer.md#what-a-throttle-guarantees)",
            cluster,
            first_few(
                f"{pair[0].label()} (about {size:.0f} B at {met:.0f} B/s: {seconds:.0f} s)"
                for pair, (size, met, seconds) in ranked
            ),
            CLIENT_TIMEOUT_SECONDS,
        )

    @staticmethod
    def _sized(quota: Pair, series: ObservedRate) -> Pair:
        """The pair a series' request size is the size of: under the default user's quota, the
        user's own (`quota_plan.separated_user`: raised alone, the default user's quota holds
        every other user too), else the quota it is held to."""
        if quota != DEFAULT_USER_QUOTA or not series.user or series.client_id:
            return quota
        return (QuotaEntity.user(series.user), PRODUCER_BYTE_RATE)

    def _grown(self, pair: Pair, size: float) -> bool:
        """Keeps `size` as the pair's estimate if larger; whether it is new or grew by half (worth
        a log line)."""
        before = self._sizes.get(pair, 0.0)
        if size <= before:
            return False
        self._sizes[pair] = size
        return size >= GROWTH_LOGGED * before


def _largest_first(grown: Mapping[str, tuple[float, float, float]]) -> str:
    """Entities' request sizes, largest first (the ones a raise is for), as a log line says
    them: size, and the throttle time and quota it is read from."""
    ranked = sorted(grown.items(), key=lambda item: -item[1][0])
    return first_few(
        f"{label} {size:.0f} B (throttle times averaging {seconds:.1f} s at {met:.0f} B/s)"
        for label, (size, seconds, met) in ranked
    )
