"""ThrottleFactorPolicy: how each volume's state becomes the throttle factor producers are held to.

A policy is declared once and evaluated in two places: on plain numbers by the exporter, one
observation at a time (`PolicyRun`, inside `kvq.model.throttle_factor_source`), and on Spark
Columns by the backfill, every success of the archive at once (`spark.volume_history`). So its
methods use only arithmetic, comparisons, `&`/`|` and the operations of the `Expressions` they
are handed (`choose`, `least`, `greatest`), never an `if` on their inputs, as
`Limit.is_violated` does.

Each judged volume (observed now, or cached) asks for a factor in [0, 1]; the cluster's factor is
the smallest of them, 1.0 without any volume (`cluster_factor`): the volume closest to its limit
decides. A cached volume keeps the factor it got when it was last observed. A policy that needs
a volume's history says how many previous usable readings it reads (`history`; most recent
first, fewer while the volume has fewer: a declaration may branch on `len(previous)`), which
`PolicyRun` keeps in the exporter and windows over the volume's descriptions give in the
backfill. A policy that `accumulates` also reads a per-volume *depth*: the running sum of its
`depth_step` increments since the volume's last restart, never below its held floor (0 at the
least; `depth_floor`, which reads the volume's *peak*: the running maximum of its `peak_sample`s
since the last restart). All of it is running sums, minimums and maximums since the last
restart, which Spark's windows compute in the same order as the exporter, so both give the same
bits. Both branches of `choose` are evaluated on numbers: a declaration keeps each one defined
(divide by `greatest(elapsed, 1.0)`, not by `elapsed`).

The limit stays the limit whatever the policy: violations are counted and published
(`log_dir_violating`, `limit_violated_total`) and decide the violation hold.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple, Protocol

from kvq.model.limits import Limit, MinAvailableRatio
from kvq.model.volume import Volume

THROTTLED = 0.0
UNTHROTTLED = 1.0


class VolumeReading(NamedTuple):
    """One volume at one successful observation, as a policy reads it: plain numbers in the
    exporter, Spark Columns in the backfill. `time`: the observation's, seconds since the epoch;
    `available_ratio` as `Volume.available_ratio` (0.0 for a volume of 0 bytes). A tuple: the
    exporter makes one per volume and poll."""

    time: Any
    total_bytes: Any
    available_bytes: Any
    available_ratio: Any

    @classmethod
    def of(cls, volume: Volume, time: float) -> VolumeReading:
        """The exporter's reading of `volume` observed at `time`."""
        return cls(time, volume.total_bytes, volume.available_bytes, volume.available_ratio)


class Expressions(Protocol):
    """What a policy may do beyond operators: plain Python (`PLAIN`) or Spark's functions
    (`spark.volume_history.SPARK_EXPRESSIONS`)."""

    def choose(self, condition: Any, if_true: Any, if_false: Any) -> Any: ...

    def least(self, *values: Any) -> Any: ...

    def greatest(self, *values: Any) -> Any: ...

    def sqrt(self, value: Any) -> Any:
        """The square root, correctly rounded (IEEE 754) on both sides: the same bits."""
        ...


class PlainExpressions:
    """`Expressions` on plain numbers and booleans."""

    def choose(self, condition: Any, if_true: Any, if_false: Any) -> Any:
        return if_true if condition else if_false

    def least(self, *values: Any) -> Any:
        return min(values)

    def greatest(self, *values: Any) -> Any:
        return max(values)

    def sqrt(self, value: Any) -> Any:
        return math.sqrt(value)


PLAIN = PlainExpressions()


class ThrottleFactorPolicy(Protocol):
    """A rule from one volume's reading (and, if it needs them, its previous ones and its depth)
    to the factor that volume asks for. See the module's docstring for what a declaration may
    use."""

    @property
    def limit(self) -> Limit: ...

    history: ClassVar[int]
    """How many previous usable readings of a volume the methods read (0: none; the backfill then
    needs no success times and no windows)."""

    accumulates: ClassVar[bool]
    """Whether `volume_factor` reads the volume's depth (`depth_step` feeds it)."""

    gauges: ClassVar[tuple[str, ...]]
    """The short names (`kvq.contract.metric_families`) of the per-volume gauges
    `volume_gauges` gives, in order; the volume's factor is published beside them when there are
    any. Empty: the policy publishes nothing of its own."""

    def depth_step(
        self, reading: VolumeReading, previous: tuple[VolumeReading, ...], ops: Expressions
    ) -> tuple[Any, Any]:
        """(increment, restart) of the volume's depth at this reading: restart sets it to its
        floor (the increment is then ignored), else the increment is added and the depth kept
        at or above the floor (`depth_floor`)."""
        ...

    def peak_sample(
        self, reading: VolumeReading, previous: tuple[VolumeReading, ...], ops: Expressions
    ) -> Any:
        """What the volume's *peak* is the running maximum of, since its last restart (the
        restart's own reading included); `depth_floor` reads the peak."""
        ...

    def depth_floor(
        self,
        reading: VolumeReading,
        previous: tuple[VolumeReading, ...],
        peak: Any,
        ops: Expressions,
    ) -> tuple[Any, Any]:
        """(floor, at once): the floors this reading sets the volume's depth (each >= 0). The
        depth is kept at or above the *held floor*: the least, over the readings since the
        last restart, of each one's floor plus `floor_climb` per second since it (it follows a
        floor down at once and up at most that fast), or this reading's floor at once if that
        is higher."""
        ...

    @property
    def floor_climb(self) -> float:
        """How fast the held floor may climb, in depth per second."""
        ...

    def closing_fast(self, reading: VolumeReading, last: VolumeReading) -> bool:
        """Whether the volume, at the rate it filled at since `last` (one interval, plain
        numbers), would reach its limit so soon that a check showing it is to be taken in as a
        poll: the policy's own fill rate then sees the rate a poll sooner."""
        ...

    def volume_factor(
        self,
        reading: VolumeReading,
        previous: tuple[VolumeReading, ...],
        depth: Any,
        ops: Expressions,
    ) -> Any: ...

    def volume_gauges(
        self, reading: VolumeReading, previous: tuple[VolumeReading, ...], ops: Expressions
    ) -> tuple[Any, ...]: ...


@dataclass(frozen=True, slots=True)
class StopOnViolation:
    """The proposal's rule: message production stops (factor 0.0) while any volume violates the
    limit, else it runs unthrottled (1.0)."""

    limit: Limit
    history: ClassVar[int] = 0
    accumulates: ClassVar[bool] = False
    gauges: ClassVar[tuple[str, ...]] = ()

    def depth_step(
        self, reading: VolumeReading, previous: tuple[VolumeReading, ...], ops: Expressions
    ) -> tuple[Any, Any]:
        return 0.0, False

    def peak_sample(
        self, reading: VolumeReading, previous: tuple[VolumeReading, ...], ops: Expressions
    ) -> Any:
        return 0.0

    def depth_floor(
        self,
        reading: VolumeReading,
        previous: tuple[VolumeReading, ...],
        peak: Any,
        ops: Expressions,
    ) -> tuple[Any, Any]:
        return 0.0, 0.0

    @property
    def floor_climb(self) -> float:
        return 0.0

    def closing_fast(self, reading: VolumeReading, last: VolumeReading) -> bool:
        return False

    def volume_factor(
        self,
        reading: VolumeReading,
        previous: tuple[VolumeReading, ...],
        depth: Any,
        ops: Expressions,
    ) -> Any:
        violated = self.limit.is_violated(reading.available_bytes, reading.available_ratio)
        return ops.choose(violated, THROTTLED, UNTHROTTLED)

    def volume_gauges(
        self, reading: VolumeReading, previous: tuple[VolumeReading, ...], ops: Expressions
    ) -> tuple[Any, ...]:
        return ()


NOT_FILLING_SECONDS = 365 * 86400.0
"""The predicted time to the limit of a volume that is not filling (and the most ever shown)."""
MIN_ELAPSED_SECONDS = 0.001
"""Observations closer than this (equal timestamps) count as this far apart."""


@dataclass(frozen=True, slots=True)
class GracefulSlowdown:
    """Slow producers down early and just enough that no volume reaches its limit sooner than
    `horizon_seconds` from now, and let them go at once when space is freed; 0.0 the moment a
    volume is at or past its limit (the proposal's rule, the last line of defence).

    Per volume:
    - fill rate: the median of the rates over the last three intervals between its readings,
      each `max(0, growth of used bytes) / elapsed`: one noisy reading spoils two intervals in
      opposite directions and the median ignores both; a segment deleted by retention (a drop)
      counts as an interval of no growth, which the median ignores too; a broker away in
      between gives one long interval at the average rate;
    - predicted seconds to the limit: headroom (available bytes above the limit) / fill rate;
    - factor `(1 + depth / 16) ** -16` (`factor_at_depth`): close to e ** -depth, so a step of
      the depth lowers the factor by the same share whatever the factor already is;
    - the depth grows while the volume would reach the limit within the horizon (in proportion
      to how much too fast it fills, over `RESPONSE_SECONDS`): each step lowers the factor by
      at most `MAX_DROP` (20%) and `MAX_DROP_PER_SECOND` (5% a second), so a quota stays
      close to the rate it meets and Kafka's throttle times, (rate - quota) / quota x its
      window, stay within a few seconds; it shrinks while the volume fills slower than that,
      and restarts (factor 1.0 at once, peak forgotten) when space is freed (`FREED_SHARE`)
      and the limit is `RESTART_MARGIN` horizons away or more;
    - the depth never falls below its held floor (`depth_floor`): the factor stays at or below
      the share of the volume's peak fill rate (the fastest it filled since its last restart)
      at which its headroom would last the horizon with nothing deleted. With time-based
      retention, the volume holds about what was written over the last retention time, so
      once a throttle's segments are reached retention deletes more than is written and the
      fill rate reads 0 or less whatever the factor: a rise from there shows in the fill rate
      only a retention time later, with the producers back near 1.0 and no headroom left to
      absorb them. The floor climbs as the headroom shrinks or the peak rises; the held floor
      follows it at most one `MAX_DROP` every `FLOOR_CLIMB_SECONDS`, except that a volume
      that would reach its limit within `RESPONSE_SECONDS` at its fill rate (a load step)
      gets at once the factor at which its headroom lasts that long at its peak.
    At a steady load the factor settles where the volume fills just as fast as it may: its
    headroom shrinks at most by a factor e every horizon, it never reaches the limit; with
    retention it settles where the headroom left lasts the horizon at the factor's share of the
    peak: below the factor at which retention would hold the volume at the limit.
    """

    limit: Limit
    horizon_seconds: float
    history: ClassVar[int] = 3
    accumulates: ClassVar[bool] = True
    gauges: ClassVar[tuple[str, ...]] = (
        "log_dir_fill_rate_bytes_per_second",
        "log_dir_seconds_to_limit",
    )
    RESPONSE_SECONDS: ClassVar[float] = 30.0
    """The depth grows by (predicted time too short, relative) x elapsed / this: the reaction
    time of the loop, longer than the alert and enforcer delays so that it does not overshoot.
    A volume that would reach its limit sooner than this is past what paced steps can slow
    (`depth_floor` holds it at once; the exporter takes in a check showing it)."""
    RISE_SECONDS: ClassVar[float] = 15.0
    """... and shrinks by (predicted time longer than the horizon, relative, at most 1) x elapsed
    / this: producers get their rate back faster than they lose it."""
    MAX_DROP: ClassVar[float] = 0.2
    """The most one step lowers the factor by (a share of it)."""
    MAX_DROP_PER_SECOND: ClassVar[float] = 0.05
    COMPOUNDING: ClassVar[int] = 4
    """The factor is (1 + depth / 2 ** this) ** -(2 ** this): squarings, not `exp`, so that the
    exporter and Spark (whose `exp` is Java's StrictMath) compute the same bits."""
    RESTART_MARGIN: ClassVar[float] = 2.0
    LOWEST_CAP: ClassVar[float] = 0.01
    """The lowest factor `depth_floor` holds a volume to (at or near its limit): a floor that
    the depth climbs back from within a minute or so once there is room again."""
    FLOOR_CLIMB_SECONDS: ClassVar[float] = 5.0
    """The held floor climbs by at most one `MAX_DROP` every this many seconds (the exporter's
    recommended poll interval): a factor it lowers stays close to the rate it meets."""
    FREED_SHARE: ClassVar[float] = 0.1
    """Space freed: available bytes up by this share of the volume in one interval, or the volume
    grown (retention deleting a segment frees less; a volume that merely stopped filling because
    it is throttled frees nothing)."""

    @classmethod
    def factor_at_depth(cls, depth: Any) -> Any:
        """(1 + depth / n) ** -n for n = 2 ** COMPOUNDING, by products alone: 1.0 at depth 0."""
        parts = 2.0**cls.COMPOUNDING
        factor = 1.0 / (1.0 + depth / parts)
        for _ in range(cls.COMPOUNDING):
            factor = factor * factor
        return factor

    @classmethod
    def depth_of_drop(cls, share: float) -> float:
        """The depth step that lowers a factor of 1.0 by `share`; it lowers any smaller factor
        by less (at most by that share)."""
        parts = 2.0**cls.COMPOUNDING
        return parts * ((1.0 / (1.0 - share)) ** (1.0 / parts) - 1.0)

    def limit_bytes(self, reading: VolumeReading) -> Any:
        """The limit in bytes for this volume (a ratio limit: of its total)."""
        if isinstance(self.limit, MinAvailableRatio):
            return self.limit.min_ratio * reading.total_bytes
        return self.limit.threshold

    def fill_rate(
        self, reading: VolumeReading, previous: tuple[VolumeReading, ...], ops: Expressions
    ) -> Any:
        """Bytes per second the volume fills at (0.0 at its first reading)."""
        readings = (reading, *previous)
        rates = [
            ops.greatest(
                (later.total_bytes - later.available_bytes)
                - (earlier.total_bytes - earlier.available_bytes),
                0,
            )
            / ops.greatest(later.time - earlier.time, MIN_ELAPSED_SECONDS)
            for later, earlier in zip(readings, readings[1:], strict=False)
        ]
        if len(rates) < 2:
            return rates[0] if rates else 0.0
        if len(rates) == 2:  # while the history builds up: the lower, so one spike is ignored
            return ops.least(*rates)
        a, b, c = rates
        return ops.greatest(ops.least(a, b), ops.least(ops.greatest(a, b), c))

    def headroom(self, reading: VolumeReading) -> Any:
        """Bytes available above the limit (<= 0: at or past it)."""
        return reading.available_bytes - self.limit_bytes(reading)

    def seconds_to_limit(
        self, reading: VolumeReading, previous: tuple[VolumeReading, ...], ops: Expressions
    ) -> Any:
        rate = self.fill_rate(reading, previous, ops)
        headroom = ops.greatest(self.headroom(reading), 0)
        predicted = headroom / ops.greatest(rate, MIN_ELAPSED_SECONDS)
        return ops.choose(rate > 0, ops.least(predicted, NOT_FILLING_SECONDS), NOT_FILLING_SECONDS)

    def depth_step(
        self, reading: VolumeReading, previous: tuple[VolumeReading, ...], ops: Expressions
    ) -> tuple[Any, Any]:
        if not previous:
            return 0.0, False
        rate = self.fill_rate(reading, previous, ops)
        # How much too fast the volume approaches its limit: horizon / predicted time - 1
        # (-1: not filling; > 0: it would reach the limit within the horizon).
        too_fast = self.horizon_seconds * rate / ops.greatest(self.headroom(reading), 1) - 1.0
        last = previous[0]
        elapsed = ops.greatest(reading.time - last.time, MIN_ELAPSED_SECONDS)
        per_second = self.depth_of_drop(self.MAX_DROP_PER_SECOND)
        bound = ops.least(self.depth_of_drop(self.MAX_DROP), per_second * elapsed)
        pace = ops.choose(
            too_fast < 0,
            1.0 / self.RISE_SECONDS,
            1.0 / self.RESPONSE_SECONDS,
        )
        step = ops.least(ops.greatest(too_fast, -1.0) * elapsed * pace, bound)
        freed = (
            reading.available_bytes - last.available_bytes >= self.FREED_SHARE * reading.total_bytes
        ) | (reading.total_bytes > last.total_bytes)
        restart = (too_fast <= 1.0 / self.RESTART_MARGIN - 1.0) & freed
        return step, restart

    def peak_sample(
        self, reading: VolumeReading, previous: tuple[VolumeReading, ...], ops: Expressions
    ) -> Any:
        """The fill rate, once it is the median of three intervals (a single interval may be a
        burst of other data the median would ignore): the peak is the fastest the volume filled
        since its last restart."""
        if len(previous) < self.history:
            return 0.0
        return self.fill_rate(reading, previous, ops)

    def depth_floor(
        self,
        reading: VolumeReading,
        previous: tuple[VolumeReading, ...],
        peak: Any,
        ops: Expressions,
    ) -> tuple[Any, Any]:
        """(held, at once): the depth of the highest factor at which the volume, filling at
        that share of its peak with nothing deleted, would still take the horizon to reach its
        limit (0 while that is 1.0 or more; never past the depth of `LOWEST_CAP`). While
        retention deletes what was written before a throttle, the fill rate says nothing of
        what a higher factor will write once those segments are gone; the peak does.

        At once, while the volume at its fill rate would reach its limit within
        `RESPONSE_SECONDS` from this reading and from the one before (one spuriously low
        reading is not enough), sooner than the held floor's climb and the paced steps could
        slow it (a load step, or the load another volume's throttle held coming back when that
        throttle is lifted): the depth of the factor at which its headroom lasts
        `RESPONSE_SECONDS` at its peak (0 otherwise); the held floor then climbs on from there.
        A level, not a step: readings that still show the rate from before it took effect ask
        for no more than it."""
        headroom = ops.greatest(self.headroom(reading), 1.0)
        held = self.depth_sharing(self.horizon_seconds * peak / headroom, ops)
        if not previous:
            return held, 0.0
        surest = ops.greatest(headroom, self.headroom(previous[0]))
        imminent = self.imminent(self.fill_rate(reading, previous, ops), surest)
        at_once = self.depth_sharing(self.RESPONSE_SECONDS * peak / headroom, ops)
        return held, ops.choose(imminent, at_once, 0.0)

    @property
    def floor_climb(self) -> float:
        return self.depth_of_drop(self.MAX_DROP) / self.FLOOR_CLIMB_SECONDS

    def imminent(self, rate: Any, headroom: Any) -> Any:
        """Whether `headroom` lasts less than `RESPONSE_SECONDS` at `rate`."""
        return self.RESPONSE_SECONDS * rate > headroom

    def closing_fast(self, reading: VolumeReading, last: VolumeReading) -> bool:
        """The limit within `RESPONSE_SECONDS` at the rate of this one interval: the fill
        rate, a median of three, would see it only a poll later."""
        rate = self.fill_rate(reading, (last,), PLAIN)
        return bool(self.imminent(rate, self.headroom(reading)))

    @classmethod
    def depth_sharing(cls, reach: Any, ops: Expressions) -> Any:
        """The depth at which `factor_at_depth` is about 1 / `reach`, the share at which a load
        `reach` times too fast fits (0 at a reach of 1 or less; never past the depth of
        `LOWEST_CAP`): its inverse, the root by square roots alone (bit for bit the same in the
        exporter and Spark)."""
        root = ops.least(ops.greatest(reach, 1.0), 1.0 / cls.LOWEST_CAP)
        for _ in range(cls.COMPOUNDING):
            root = ops.sqrt(root)
        return 2.0**cls.COMPOUNDING * (root - 1.0)

    def volume_factor(
        self,
        reading: VolumeReading,
        previous: tuple[VolumeReading, ...],
        depth: Any,
        ops: Expressions,
    ) -> Any:
        violated = self.limit.is_violated(reading.available_bytes, reading.available_ratio)
        return ops.choose(violated, THROTTLED, self.factor_at_depth(depth))

    def volume_gauges(
        self, reading: VolumeReading, previous: tuple[VolumeReading, ...], ops: Expressions
    ) -> tuple[Any, ...]:
        return (
            self.fill_rate(reading, previous, ops),
            self.seconds_to_limit(reading, previous, ops),
        )


def cluster_factor(volume_factors: Iterable[float]) -> float:
    """The cluster's factor: the smallest any judged volume asks for, 1.0 without any volume."""
    return min(volume_factors, default=UNTHROTTLED)


@dataclass(frozen=True, slots=True)
class FactorCalculation:
    """The factor computed from one set of volumes and the volumes that violated the limit."""

    factor: float
    violating: tuple[Volume, ...]


@dataclass(slots=True)
class _Depth:
    """A volume's accumulators as the backfill computes them, each since the last restart: its
    peak (the running maximum of its samples); its held floor (`climb` x time plus the running
    minimum of each floor less `climb` x its time, or the floor that holds at once if higher);
    the sum of its steps and the running minimum of that sum less the held floor (0 included).
    The depth is the sum less that minimum: the sum, kept at or above the held floor as it
    comes."""

    peak: float = 0.0
    climb_from: float = math.inf
    total: float = 0.0
    lowest: float = 0.0

    def take_peak(self, sample: float, restart: bool) -> float:
        self.peak = sample if restart else max(self.peak, sample)
        return self.peak

    def take(
        self,
        step: float,
        restart: bool,
        floor: float,
        at_once: float,
        time: float,
        climb: float,
    ) -> float:
        start = floor - climb * time
        if restart:
            self.total = self.lowest = 0.0
            self.climb_from = start
        else:
            self.total += step
            self.climb_from = min(self.climb_from, start)
        held = max(climb * time + self.climb_from, at_once)
        self.lowest = min(self.lowest, self.total - held)
        return self.total - self.lowest


class PolicyRun:
    """A policy applied to successive observations (the exporter's side of the seam): keeps the
    factor each volume got when last observed (a cached volume keeps it), and for a policy that
    needs them each volume's last usable readings, its depth and its gauges."""

    def __init__(self, policy: ThrottleFactorPolicy) -> None:
        self.policy = policy
        self._factors: dict[tuple[int, str], float] = {}
        self._readings: dict[tuple[int, str], tuple[VolumeReading, ...]] = {}
        self._depths: dict[tuple[int, str], _Depth] = {}
        self.columns: dict[tuple[int, str], tuple[float, ...]] = {}
        """Per judged volume: the policy's gauges and then its factor (only for a policy that
        has gauges), as last observed."""

    def calculate(
        self, observed: Iterable[Volume], cached: Iterable[Volume] = (), time: float = 0.0
    ) -> FactorCalculation:
        """The factor of `observed` (read at `time`) and `cached` (judged as last observed)."""
        observed, cached = tuple(observed), tuple(cached)
        policy, limit, history = self.policy, self.policy.limit, self.policy.history
        known, self._factors = self._factors, {}
        columns, self.columns = self.columns, {}
        gauged = bool(policy.gauges)
        factors: list[float] = []
        violating: list[Volume] = []
        for volume in observed:
            key = volume.key
            ratio = volume.available_ratio
            reading = VolumeReading.of(volume, time)
            previous = self._readings.get(key, ()) if history else ()
            depth = 0.0
            if policy.accumulates:
                step, restart = policy.depth_step(reading, previous, PLAIN)
                sample = float(policy.peak_sample(reading, previous, PLAIN))
                accumulated = self._depths.setdefault(key, _Depth())
                peak = accumulated.take_peak(sample, bool(restart))
                floor, at_once = policy.depth_floor(reading, previous, peak, PLAIN)
                depth = accumulated.take(
                    float(step),
                    bool(restart),
                    float(floor),
                    float(at_once),
                    time,
                    policy.floor_climb,
                )
            factor = float(policy.volume_factor(reading, previous, depth, PLAIN))
            if gauged:
                gauges = policy.volume_gauges(reading, previous, PLAIN)
                self.columns[key] = (*map(float, gauges), factor)
            if history:
                self._readings[key] = (reading, *previous)[:history]
            factors.append(factor)
            self._factors[key] = factor
            if limit.is_violated(volume.available_bytes, ratio):
                violating.append(volume)
        for volume in cached:  # cached volumes were observed earlier, by this run
            key = volume.key
            factors.append(known[key])
            self._factors[key] = known[key]
            if gauged:
                self.columns[key] = columns[key]
            if limit.violated_by(volume):
                violating.append(volume)
        return FactorCalculation(cluster_factor(factors), tuple(violating))

    def decisive(self, observed: Iterable[Volume], time: float) -> bool:
        """Whether `observed`, read at `time`, shows a volume at or past its limit, a throttled
        one whose depth would restart (space freed: its factor back to 1.0 at once) or one
        closing on its limit fast (`closing_fast`), judged against the readings kept so far
        without taking them in: a check between polls that shows none of these lifts nothing,
        crosses nothing and hastens nothing (the exporter drops it, `exporter.poller`). A
        volume not throttled restarts on any growth; that is no reason."""
        policy = self.policy
        for volume in observed:
            if policy.limit.violated_by(volume):
                return True
            previous = self._readings.get(volume.key, ())
            if not previous:
                continue
            reading = VolumeReading.of(volume, time)
            throttled = self._factors.get(volume.key, UNTHROTTLED) < UNTHROTTLED
            freed = (
                throttled and policy.accumulates and policy.depth_step(reading, previous, PLAIN)[1]
            )
            if bool(freed) or policy.closing_fast(reading, previous[0]):
                return True
        return False
