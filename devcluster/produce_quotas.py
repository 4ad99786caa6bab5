"""Produce quotas as a Kafka broker enforces them (KIP-13, KIP-55, KIP-219).

- Which quota: the first KIP-55 level holding ``producer_byte_rate`` for the connection's (user,
  client-id), in the precedence order the enforcer plans for (``QuotaEntity.precedence``). The
  level also decides who shares the budget, as DefaultQuotaCallback.quotaMetricTags does: levels
  with a client-id component measure (user, client-id) together, user levels measure the user
  across client-ids, client-id levels the client-id across users. No quota: unlimited.
- The rate: Kafka's Rate over a WindowedSum of ``quota.window.num`` (11) samples of
  ``quota.window.size.seconds`` (1 s); a window that has not yet seen 10 full samples counts as
  if it had (Rate.windowSize).
- Over quota (rate > bound after recording the request's size): ``throttle_time_ms = (rate -
  bound) / bound x window size``, rounded (QuotaUtils.throttleTime); the response carries it at
  once and the broker mutes the channel for that long. As in Kafka, the time is narrowed to a
  32-bit int: a rate over about 195 kB/s against a 1 B/s quota wraps negative and is not
  throttled at all (a Kafka behaviour a throttle to 1 B/s runs into).
- Quota changes reach existing budgets at the next request: the store is read again whenever its
  version changes, as a Kafka broker updates its quota managers with the metadata delta that its
  DescribeClientQuotas answers from (once a describe shows a change, produce quotas apply it).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass

from kvq.kafka.quota_entity import CLIENT_ID, USER, QuotaEntity

PRODUCER_BYTE_RATE = "producer_byte_rate"
WINDOW_NUM = 11  # quota.window.num
WINDOW_MS = 1000  # quota.window.size.seconds

# Every KIP-55 level a client (user U, client-id C) can match, most specific first.
_LEVELS = sorted(
    (
        QuotaEntity.of(pairs)
        for pairs in (
            [(USER, "U"), (CLIENT_ID, "C")],
            [(USER, "U"), (CLIENT_ID, None)],
            [(USER, "U")],
            [(USER, None), (CLIENT_ID, "C")],
            [(USER, None), (CLIENT_ID, None)],
            [(USER, None)],
            [(CLIENT_ID, "C")],
            [(CLIENT_ID, None)],
        )
    ),
    key=lambda e: e.precedence,
)


def candidates(user: str, client_id: str) -> list[QuotaEntity]:
    """The entities whose quota could apply to (user, client-id), in KIP-55 precedence order."""
    names = {"U": user, "C": client_id}
    return [
        QuotaEntity(tuple((t, None if n is None else names[n]) for t, n in level.components))
        for level in _LEVELS
    ]


@dataclass(frozen=True)
class Budget:
    """Who shares a rate (Kafka's metric tags: "" = not part of the key) and its bound."""

    user: str
    client_id: str
    bound: float | None


def resolve(
    quotas: dict[QuotaEntity, dict[str, float]],
    user: str,
    client_id: str,
    key: str = PRODUCER_BYTE_RATE,
) -> Budget:
    for entity in candidates(user, client_id):
        value = quotas.get(entity, {}).get(key)
        if value is None:
            continue
        types = entity.types
        if USER in types and CLIENT_ID in types:
            return Budget(user, client_id, value)
        if USER in types:
            return Budget(user, "", value)
        return Budget("", client_id, value)
    return Budget("", client_id, None)  # no quota: Kafka measures by client-id, unbounded


class Rate:
    """Kafka's Rate over a WindowedSum (SampledStat with one extra overlapping sample).

    Each sample is a start, a last update and a value, kept in three lists indexed alike: the
    model of the slowdown scenario measures millions of times, and sums and minimums over lists
    run in C. `samples`: quota.window.num."""

    __slots__ = (
        "_samples",
        "_span_ms",
        "_starts",
        "_lasts",
        "_values",
        "_current",
        "_purge_from",
        "_oldest",
    )

    def __init__(self, samples: int = WINDOW_NUM) -> None:
        self._samples = samples
        self._span_ms = samples * WINDOW_MS
        """A sample not updated for this long is purged (SampledStat.purgeObsoleteSamples)."""
        self._starts: list[float] = []
        self._lasts: list[float] = []
        self._values: list[float] = []
        self._current = 0
        self._purge_from = math.inf
        """No sample can be obsolete before this (a millisecond early, against rounding): the
        scan Kafka does at every measure is skipped until then."""
        self._oldest = math.inf
        """The oldest sample's start, which the window is measured from: it changes only when
        a sample is reset, so it is found then, not at every measure."""

    def _reset(self, index: int, now_ms: float) -> None:
        if index == len(self._starts):
            self._starts.append(now_ms)
            self._lasts.append(now_ms)
            self._values.append(0.0)
        else:
            self._starts[index] = now_ms
            self._lasts[index] = now_ms
            self._values[index] = 0.0
        self._oldest = min(self._starts)
        self._purge_from = min(self._purge_from, now_ms + self._span_ms - 1)

    def record(self, value: float, now_ms: float) -> None:
        starts = self._starts
        if not starts:
            self._reset(0, now_ms)
        current = self._current
        if now_ms - starts[current] >= WINDOW_MS:
            current = self._current = (current + 1) % (self._samples + 1)
            self._reset(current, now_ms)
        self._values[current] += value
        self._lasts[current] = now_ms
        if now_ms + self._span_ms - 1 < self._purge_from:  # only if the clock went back
            self._purge_from = now_ms + self._span_ms - 1

    def _purge(self, now_ms: float) -> None:
        for i, last in enumerate(self._lasts):
            if now_ms - last >= self._span_ms:
                self._reset(i, now_ms)
        self._purge_from = min(self._lasts, default=math.inf) + self._span_ms - 1

    def window_ms(self, now_ms: float) -> float:
        if now_ms >= self._purge_from:
            self._purge(now_ms)
        if not self._starts:
            self._reset(0, now_ms)
        elapsed = now_ms - self._oldest
        samples = self._samples
        full = int(elapsed // WINDOW_MS)
        if full < samples - 1:
            elapsed += (samples - 1 - full) * WINDOW_MS
        return 1.0 if elapsed < 1.0 else elapsed

    def measure(self, now_ms: float) -> float:
        """Bytes per second."""
        return self.measure_in_window(now_ms)[0]

    def measure_in_window(self, now_ms: float) -> tuple[float, float]:
        """(bytes per second, the window in ms it was measured over): a throttle time is the
        excess over the quota for that window (QuotaUtils.throttleTime)."""
        window = self.window_ms(now_ms)  # purges first, as Kafka's measure does
        return sum(self._values) / (window / 1000), window


class QuotaLimits:
    """One quota key's budgets as a broker's quota manager sees them: the stored quotas, read
    again whenever ``version`` changes (the store's generation), as a Kafka broker updates its
    quota managers with the metadata delta its DescribeClientQuotas answers from. Without
    ``version`` the quotas are read for every lookup."""

    def __init__(
        self,
        key: str,
        read_quotas: Callable[[], dict[QuotaEntity, dict[str, float]]],
        version: Callable[[], Hashable] | None = None,
    ):
        self._key = key
        self._read_quotas = read_quotas
        self._version = version
        self._quotas: dict[QuotaEntity, dict[str, float]] = {}
        self._read_version: Hashable = _NEVER
        self._budgets: dict[tuple[str, str], Budget] = {}

    def budget(self, user: str, client_id: str) -> Budget:
        """The budget of (user, client-id) under the quotas stored now."""
        current = _NEVER if self._version is None else self._version()
        if current is _NEVER or current != self._read_version:
            self._quotas = self._read_quotas()
            self._budgets = {}
            self._read_version = current
        found = self._budgets.get((user, client_id))
        if found is None:
            found = resolve(self._quotas, user, client_id, self._key)
            self._budgets[(user, client_id)] = found
        return found


def java_round(value: float) -> int:
    """Java's Math.round, which Kafka's quota managers use for throttle times: halves round up
    (Python's round() rounds them to even: 2652.5 ms would be 2652 where Kafka answers 2653)."""
    return math.floor(value + 0.5)


class ProduceQuotas:
    """The produce quota manager of one broker: a Rate per budget (Kafka's sensors)."""

    def __init__(
        self,
        read_quotas: Callable[[], dict[QuotaEntity, dict[str, float]]],
        clock: Callable[[], float] = time.monotonic,
        version: Callable[[], Hashable] | None = None,
        window_samples: int = WINDOW_NUM,
    ):
        """``version``: see QuotaLimits; ``window_samples``: quota.window.num."""
        self._limits = QuotaLimits(PRODUCER_BYTE_RATE, read_quotas, version)
        self._clock = clock
        self._rates: dict[tuple[str, str], Rate] = {}
        self._samples = window_samples

    def budget(self, user: str, client_id: str) -> Budget:
        return self._limits.budget(user, client_id)

    def record(self, user: str, client_id: str, nbytes: int) -> int:
        """Record a produce request's size; the throttle time in ms (0 within quota)."""
        now_s = self._clock()
        budget = self.budget(user, client_id)
        key = (budget.user, budget.client_id)
        rate = self._rates.get(key)
        if rate is None:
            rate = self._rates[key] = Rate(self._samples)
        now_ms = now_s * 1000
        rate.record(nbytes, now_ms)
        if budget.bound is None:
            return 0
        observed, window_ms = rate.measure_in_window(now_ms)
        if observed <= budget.bound:
            return 0
        excess_ms = (observed - budget.bound) / budget.bound * window_ms
        throttle = java_round(excess_ms)
        # ClientQuotaManager.recordAndGetThrottleTimeMs narrows the long to an Int (throttleTime(
        # e, timeMs).toInt): past 2^31 ms it wraps, and KafkaApis throttles only when it is > 0.
        return max(0, _int32(throttle))


_NEVER = object()
"""The version of quotas never read."""


def _int32(value: int) -> int:
    """Java's long -> int narrowing: the low 32 bits, signed."""
    return (value + 2**31) % 2**32 - 2**31
