"""A model-only design study (issue 42): graceful-slowdown against policy variants that read what
DescribeLogDirs v4 can also tell the exporter: each partition replica's size in a log dir.

bench/slowdown's broker 0 second by second, as `kafka_retention_loop` in
test_graceful_slowdown.py (the same load, enforcer and retention), with the load spread over the
scenario's eight replicas on broker 0 (four topics, two partitions each), each rolling its 5 s
segments at its own phase. Per policy: the share of the bound (`demo.slowdown.at_the_limit`: the
room above the limit refilled at the rate retention frees it) written over the 150 s episode and
over 600 s, the lowest headroom, the swing of the factor, and the lowest headroom under a 10x load
step. `python -m tests.kvq.model.test_slowdown_study` prints the table (docs/policy-study.md
has it).

The variants live here only. Variant B is what the shipped policy does once the exporter reads
the partitions' sizes (`kvq.throttle.slowdown.partition.sizes`): `graceful(grown=True)` runs the
real `GracefulSlowdown` on readings with grown bytes, which the tests hold to the issue's goals.
"""

from __future__ import annotations

import bisect
import math
import sys
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache, partial
from typing import Any, ClassVar

import pytest

from demo.slowdown import MANY_PRINCIPALS_RATE, WARM_UP_SECONDS, at_the_limit
from kvq.model.graceful_slowdown import MIN_ELAPSED_SECONDS, GracefulSlowdown
from kvq.model.limits import MinAvailableRatio
from kvq.model.policy_expressions import PLAIN, Expressions
from kvq.model.policy_run import PolicyRun
from kvq.model.retention_forecast import AHEAD_SECONDS
from kvq.model.slowdown_depth import depth_of_drop, depth_sharing
from kvq.model.throttle_factor_policy import VolumeReading
from kvq.model.volume import Volume
from tests.kvq.model import kafka_load
from tests.kvq.model.test_graceful_slowdown import (
    KAFKA_FULL,
    KAFKA_LIMIT,
    KAFKA_START,
    KAFKA_TOTAL,
    retain,
)

PARTITIONS = 8
"""Broker 0's replicas in the scenario: orders, clicks, java-orders, java-clicks, two each."""
SEGMENT, POLL = 5.0, 5.0
"""The scenario's segment.ms and the exporter's poll interval (retention: `retain`'s 60 s)."""
HORIZON = 40.0
"""The scenario's kvq.throttle.slowdown.horizon."""
RESPONSE = 14.0
"""The scenario's loop: two polls, scrape, rule, alert to enforce (demo.slowdown)."""
ROOM = KAFKA_START - KAFKA_LIMIT
EPISODE = 150.0
LONG_EPISODE = 600.0


@dataclass(frozen=True)
class Poll:
    """What one DescribeLogDirs v4 poll (with its topics) tells of broker 0's log dir."""

    time: float
    available: int
    grown: float
    """Bytes the log dir's partition replicas grew by since the last poll: the sum of each
    one's growth between two readings of their sizes (Kafka's `UnifiedLog.size`)."""
    dropped: float
    """Bytes they dropped by: the sum of each one's shrinking (segments retention deleted)."""
    total: int = KAFKA_TOTAL
    """The volume's size (twice as large once the space is freed: `kafka_load.run`)."""


Controller = Callable[[Poll], float | None]
"""The factor to publish for a poll; None for a check between polls that is not taken in."""


def graceful(
    response: float = RESPONSE, grown: bool = False, checks: bool = False, horizon: float = HORIZON
) -> Controller:
    """The shipped graceful-slowdown: on the volume's totals alone, or (`grown`) on readings
    that also carry the partitions' growth since the last reading taken in
    (`Volume.grown_bytes`, as the exporter hands it out: summed over every read of the sizes in
    between); polled every POLL s, and (`checks`) checked every second between polls as the
    exporter does (`checked`)."""
    policy = GracefulSlowdown(MinAvailableRatio(0.25), horizon, response)
    return checked(policy, grown=grown, checks=checks)


@dataclass(frozen=True, slots=True)
class GrossFill(GracefulSlowdown):
    """Graceful-slowdown with the gross write rate in place of the net fill rate: the volume's
    written bytes (the running sum of each partition's growth between polls, by the reading's
    time) stand in for its used bytes; retention's deletions no longer hide the load."""

    written: dict[float, float] = field(default_factory=dict)

    def fill_rate(
        self, reading: VolumeReading, previous: tuple[VolumeReading, ...], ops: Expressions
    ) -> float:
        readings = (reading, *previous)
        rates = [
            (self.written[later.time] - self.written[earlier.time])
            / max(later.time - earlier.time, MIN_ELAPSED_SECONDS)
            for later, earlier in zip(readings, readings[1:], strict=False)
        ]
        return sorted(rates)[len(rates) // 2] if rates else 0.0


def gross_fill(response: float = RESPONSE) -> Controller:
    policy = GrossFill(MinAvailableRatio(0.25), HORIZON, response)
    run, total = PolicyRun(policy), [0.0]

    def factor(poll: Poll) -> float:
        total[0] += poll.grown
        policy.written[poll.time] = total[0]
        return run.calculate([Volume(0, "/d", KAFKA_TOTAL, poll.available)], time=poll.time).factor

    return factor


@dataclass(frozen=True, slots=True)
class ShippedBefore(GracefulSlowdown):
    """The level on the sizes as shipped before the closed loop in the approach, the step
    escape's guard, freed space believed at once, the burst margin and the peaks kept at a
    restart (docs/policy-study.md, "Many principals"): the earlier designs below build on it,
    so that their recorded numbers stay theirs."""

    STEP_PEAK_RATIO: ClassVar[float] = 0.0
    MARGIN_BURSTS: ClassVar[float] = 0.0

    def in_approach(self, reading: VolumeReading, ops: Expressions) -> Any:
        return False

    def forgets_peaks(self, reading: VolumeReading, ops: Expressions) -> Any:
        return True

    def freed_rate(self, reading: VolumeReading, ops: Expressions) -> Any:
        grown, used, seconds = self.growth_window(reading, ops)
        return (grown - used) / seconds


@dataclass(frozen=True, slots=True)
class PacedLevel(ShippedBefore):
    """B with its level paced (the design this study tried on Kafka's quotas): the level is the
    held floor's, which climbs one MAX_DROP every `pace_seconds` at most (the factor falls that
    fast, and Kafka's throttle times stay within ~10 s), and falls at once; the gross and freed
    rates are taken over the last `window` intervals whose growth was read (one interval's
    growth swings several-fold under bursts), and the peak only once that window is full (a
    first interval's burst is no peak; the first slowdown waits for the references to mature);
    `margin_seconds` and `settle_seconds` as B's. `escape`: the floor at once while the limit is
    within the response time at the fill rate (the exporter's checks taken in for it), as
    graceful-slowdown's; without it every drop is paced. `rise_seconds`: the rises paced too.
    `unfreed_seconds`: more margin while retention frees less than the peak."""

    history: ClassVar[int] = 3
    window: int = 3
    pace_seconds: float = 5.0
    margin_seconds: float = 6.0
    settle_seconds: float = 10.0
    escape: bool = True
    rise_seconds: float | None = None
    """The factor rises one MAX_DROP every this many seconds at most (None: at once)."""
    unfreed_seconds: float = 0.0
    """More margin while retention frees less than the peak: this many seconds of the
    difference."""

    def depth_step(
        self, reading: VolumeReading, previous: tuple[VolumeReading, ...], ops: Expressions
    ) -> tuple[float, bool]:
        step, restart = super(PacedLevel, self).depth_step(reading, previous, ops)
        if not previous:
            return step, restart
        if self.rise_seconds is None:  # at once, as B's level rose (not the shipped LEVEL_RISE)
            at_once = -2 * depth_of_drop(1.0 - self.LOWEST_CAP)
            return ops.choose(self.follows_retention(reading, ops), at_once, step), restart
        elapsed = self.elapsed(reading, previous[0], ops)
        return -depth_of_drop(self.MAX_DROP) / self.rise_seconds * elapsed, restart

    @property
    def floor_climb(self) -> float:
        return depth_of_drop(self.MAX_DROP) / self.pace_seconds

    def growth_window(
        self,
        reading: VolumeReading,
        previous: tuple[VolumeReading, ...],
        ops: Expressions,
        intervals: int | None = None,
    ) -> tuple[float, float, float]:
        """(grown, used grown, seconds) over the last `window` intervals whose growth was read
        (`intervals`, if given)."""
        window = self.window if intervals is None else intervals
        grown, start = ops.or_zero(reading.grown_bytes), previous[0]
        start_time, start_used = start.time, used_bytes(start)
        whole = ops.known(reading.grown_bytes)
        pairs = list(zip(previous, previous[1:], strict=False))[: window - 1]
        for later, earlier in pairs:
            whole = whole & ops.known(later.grown_bytes)
            grown = ops.choose(whole, grown + ops.or_zero(later.grown_bytes), grown)
            start_time = ops.choose(whole, earlier.time, start_time)
            start_used = ops.choose(whole, used_bytes(earlier), start_used)
        seconds = ops.greatest(reading.time - start_time, MIN_ELAPSED_SECONDS)
        return grown, used_bytes(reading) - start_used, seconds

    def peak_sample(
        self, reading: VolumeReading, previous: tuple[VolumeReading, ...], ops: Expressions
    ) -> tuple[Any, float]:
        if len(previous) < max(self.window, self.history):
            return 0.0, 0.0
        grown, _, seconds = self.growth_window(reading, previous, ops)
        return ops.greatest(grown / seconds, self.fill_rate(reading, previous, ops)), 0.0

    def depth_floor(
        self,
        reading: VolumeReading,
        previous: tuple[VolumeReading, ...],
        peaks: tuple[Any, ...],
        ops: Expressions,
        levels: tuple[Any, Any] | None = None,
    ) -> tuple[float, float]:
        peak = peaks[0]
        headroom = ops.greatest(self.headroom(reading), 1.0)
        capped = ops.choose(headroom < self.horizon_seconds * peak, 1.0 / self.HELD_CAP, 1.0)
        if not previous:
            return depth_sharing(capped, self.LOWEST_CAP, ops), 0.0
        grown, used, seconds = self.growth_window(reading, previous, ops)
        freed, net = (grown - used) / seconds, -used / seconds
        elapsed = self.elapsed(reading, previous[0], ops)
        applied = ops.greatest(self.response_seconds - 2 * elapsed, 0.0)
        foreseen = self.headroom(reading) + ops.least(net, 0.0) * applied
        margin = self.margin_seconds * peak + self.unfreed_seconds * ops.greatest(peak - freed, 0.0)
        target = freed + (foreseen - margin) / self.settle_seconds
        level = ops.greatest(peak, 1.0) / ops.greatest(target, 1.0)
        held = depth_sharing(ops.greatest(capped, level), self.LOWEST_CAP, ops)
        surest = ops.greatest(headroom, self.headroom(previous[0]))
        imminent = self.imminent(self.fill_rate(reading, previous, ops), surest) & self.escape
        at_once = depth_sharing(self.response_seconds * peak / headroom, self.LOWEST_CAP, ops)
        return held, ops.choose(imminent, at_once, 0.0)

    def closing_fast(self, reading: VolumeReading, last: VolumeReading, throttled: bool) -> bool:
        rate = self.fill_rate(reading, (last,), PLAIN)
        return self.escape and bool(self.imminent(rate, self.headroom(reading)))


@dataclass(frozen=True, slots=True)
class PolledWindow(PacedLevel):
    """`windowed_level` as the policy's declarations could run it (not in the product): B's level
    on the growth and deletions of the last `window` readings taken in (6 polls: 30 s), its drops
    the held floor's climb (one MAX_DROP every `pace_seconds`, about 4.4 % a second), rises at
    once, 8 s of the peak as margin; the peak (the window's gross rate, or the fill rate) from the
    first interval on; the escape as graceful-slowdown's (the floor at once while the limit is
    within the response time at the fill rate, a median of three), and no check taken in for
    closing fast once the growth is read (a taken-in check would shorten the window)."""

    history: ClassVar[int] = 6
    window: int = 6
    margin_seconds: float = 8.0

    def fill_rate(
        self, reading: VolumeReading, previous: tuple[VolumeReading, ...], ops: Expressions
    ) -> float:
        return super(PolledWindow, self).fill_rate(reading, previous[:3], ops)

    def peak_sample(
        self, reading: VolumeReading, previous: tuple[VolumeReading, ...], ops: Expressions
    ) -> tuple[Any, float]:
        if not previous:
            return 0.0, 0.0
        grown, _, seconds = self.growth_window(reading, previous, ops)
        net = self.fill_rate(reading, previous, ops) if len(previous) >= 3 else 0.0
        return ops.greatest(grown / seconds, net), 0.0

    def closing_fast(self, reading: VolumeReading, last: VolumeReading, throttled: bool) -> bool:
        return False


def used_bytes(reading: VolumeReading) -> float:
    return reading.total_bytes - reading.available_bytes


AS_RUN = {
    "escape": False,
    "window": 2,
    "margin_seconds": 3.0,
    "unfreed_seconds": 4.0,
    "settle_seconds": 7.0,
}
"""`PacedLevel` closer to the limit, as it was run once on real Kafka: every drop paced (no
escape), rates over two intervals, half B's margin plus 4 s of what retention frees less than
the peak (the most before retention first frees anything: the approach to the limit then needs
it), the headroom spent over 7 s."""
CLOSER = {**AS_RUN, "margin_seconds": 5.0, "unfreed_seconds": 8.0}
"""AS_RUN with more margin: 5 s of the peak, and 8 s of what retention frees less than it."""
CLOSER_46 = {**AS_RUN, "margin_seconds": 4.0, "unfreed_seconds": 6.0}
"""Between the two: 4 s of the peak and 6 s of what retention frees less than it, the margin
that met the four steady-load goals in its one real run (87 % of the bound)."""


@dataclass(frozen=True, slots=True)
class PaceCeiling(PacedLevel):
    """`PacedLevel` with a ceiling held at once: the highest factor from which the held
    floor's paced descent to what retention frees keeps `keep_seconds` of the peak above the
    limit. A descent of one MAX_DROP every `pace_seconds` lowers the factor as e ** (-t /
    `descent`) (22.4 s), so from a share s of the peak it writes about (s x peak - freed) x
    descent more than retention frees: the ceiling is (freed + (headroom - keep x peak) /
    descent) / peak. The paced level stays under it at a steady load; where it does not (the
    approach to the limit before retention frees anything, a load step) the ceiling drops the
    factor at once, only as far as the headroom asks. `early_cap`: the held cap as soon as one
    interval's gross rate says the headroom would not last the horizon (not only the window's
    peak), so that a load step after it meets quotas set from the enforcer's references taken
    before it. `over_level`: the ceiling above the level (level + (foreseen headroom - keep x
    peak) / (peak x descent)) instead of above what retention frees; `approach_only`: the
    ceiling only while retention frees less than a tenth of the peak; `most_freed`: what
    retention freed as the most over the last one, two or three intervals, not over the
    level's window."""

    keep_seconds: float = 1.0
    early_cap: bool = True
    over_level: bool = False
    approach_only: bool = False
    most_freed: bool = False

    @property
    def descent(self) -> float:
        return self.pace_seconds / math.log(1.0 / (1.0 - self.MAX_DROP))

    def depth_floor(
        self,
        reading: VolumeReading,
        previous: tuple[VolumeReading, ...],
        peaks: tuple[Any, ...],
        ops: Expressions,
        levels: tuple[Any, Any] | None = None,
    ) -> tuple[float, float]:
        held, at_once = super(PaceCeiling, self).depth_floor(reading, previous, peaks, ops, levels)
        if not previous:
            return held, at_once
        peak = peaks[0]
        gross = ops.or_zero(reading.grown_bytes) / self.elapsed(reading, previous[0], ops)
        capped = self.early_cap & (self.headroom(reading) < self.horizon_seconds * gross)
        cap = depth_sharing(1.0 / self.HELD_CAP, self.LOWEST_CAP, ops)
        held = ops.greatest(held, ops.choose(capped, cap, 0.0))
        grown, used, seconds = self.growth_window(reading, previous, ops)
        freed = (grown - used) / seconds
        for intervals in (1, 3) if self.most_freed else ():
            grown_over, used_over, over = self.growth_window(reading, previous, ops, intervals)
            freed = ops.greatest(freed, (grown_over - used_over) / over)
        peak = ops.greatest(peak, 1.0)
        headroom, keep = self.headroom(reading), self.keep_seconds * peak
        share = (ops.greatest(freed, 0.0) + (headroom - keep) / self.descent) / peak
        if self.over_level:
            elapsed = self.elapsed(reading, previous[0], ops)
            applied = ops.greatest(self.response_seconds - 2 * elapsed, 0.0)
            foreseen = headroom + ops.least(-used / seconds, 0.0) * applied
            margin = self.margin_seconds * peak + self.unfreed_seconds * ops.greatest(
                peak - freed, 0.0
            )
            level = ops.greatest(freed + (foreseen - margin) / self.settle_seconds, 1.0) / peak
            share = level + (foreseen - keep) / (peak * self.descent)
        if self.approach_only:
            share = ops.choose(freed < 0.1 * peak, share, 1.0)
        ceiling = depth_sharing(1.0 / ops.greatest(share, self.LOWEST_CAP), self.LOWEST_CAP, ops)
        return held, ops.greatest(at_once, ceiling)


def pace_ceiling(unthrottled_checks: bool = True, **settings) -> Controller:
    """`PaceCeiling` (CLOSER_46's level) on readings with the growth, checked every second as
    the exporter does; with `unthrottled_checks` a check is also taken in while the factor
    published last is 1.0 and the partitions' growth since the last reading taken in would
    reach the limit within the response time (a load step before the first slowdown: slowed
    a check interval after it shows, not at the next poll)."""
    policy = PaceCeiling(MinAvailableRatio(0.25), HORIZON, RESPONSE, **{**CLOSER_46, **settings})
    run, last = PolicyRun(policy), {"time": -math.inf, "factor": 1.0}

    def factor(poll: Poll) -> float | None:
        volume = Volume(0, "/d", poll.total, poll.available, round(poll.grown))
        gross = poll.grown / max(poll.time - last["time"], 1.0)
        step = unthrottled_checks and last["factor"] >= 1.0
        step = step and RESPONSE * gross > poll.available - KAFKA_LIMIT
        if poll.time % POLL and not step and not run.decisive([volume], poll.time):
            return None
        last["time"], last["factor"] = poll.time, run.calculate([volume], time=poll.time).factor
        return last["factor"]

    return factor


def polled_window() -> Controller:
    """`PolledWindow` on readings with the growth, checked every second as the exporter does."""
    return checked(PolledWindow(MinAvailableRatio(0.25), HORIZON, RESPONSE))


def paced_level(**settings) -> Controller:
    """`PacedLevel` on readings with the growth, checked every second as the exporter does."""
    return checked(PacedLevel(MinAvailableRatio(0.25), HORIZON, RESPONSE, **settings))


def checked(policy: GracefulSlowdown, grown: bool = True, checks: bool = True) -> Controller:
    """`policy` on readings with the growth (unless not `grown`: the totals alone), polled
    every POLL s and (`checks`) checked every second between polls as the exporter does
    (`exporter.poller`): a check taken in only when decisive (a volume closing on its limit
    within the response time, space freed, the limit reached)."""
    run = PolicyRun(policy)

    def factor(poll: Poll) -> float | None:
        volume = Volume(0, "/d", poll.total, poll.available, round(poll.grown) if grown else None)
        if checks and poll.time % POLL and not run.decisive([volume], poll.time):
            return None
        return run.calculate([volume], time=poll.time).factor

    return factor


class OnePolicy:
    """A policy run on each reading taken in: its factor is the one published."""

    def __init__(self, policy: GracefulSlowdown | None = None) -> None:
        self.run = PolicyRun(policy or GracefulSlowdown(MinAvailableRatio(0.25), HORIZON, RESPONSE))

    def decisive(self, volume: Volume, time: float) -> bool:
        return self.run.decisive([volume], time)

    def factor(self, volume: Volume, time: float) -> float:
        return self.run.calculate([volume], time=time).factor


def reading_the_forecast(
    kept: float = kafka_load.RETENTION + kafka_load.SEGMENT + 1.0,
    retention: float = kafka_load.RETENTION,
    decider: Callable[[], OnePolicy] = OnePolicy,
) -> Controller:
    """The shipped policy on the partitions' sizes, checked every second, with what retention
    frees by each of `AHEAD_SECONDS` after each reading foreseen as Kafka's offsets give it
    (`exporter.retention_forecast_source`): what was written by a time is gone `kept` s later
    (the retention time, a segment and a check), unknown (-1) past the retention time
    (`kvq.model.retention_forecast.volume_freed_bytes`). The harness hands out what grew since
    the last factor published: counted once, when a reading is taken in. `decider`: what turns
    the readings into factors (the shipped policy)."""
    decide = decider()
    written: list[tuple[float, float]] = []  # (time, bytes the partitions grew by so far)
    deleted = [0.0]

    def factor(poll: Poll) -> float | None:
        so_far = (written[-1][1] if written else 0.0) + poll.grown
        history = [*written, (poll.time, so_far)]
        gone = deleted[0] + poll.dropped
        freed = tuple(
            -1
            if ahead > retention
            else round(foreseen_deletions(history, gone, poll.time, poll.time + ahead, kept))
            for ahead in AHEAD_SECONDS
        )
        volume = Volume(0, "/d", poll.total, poll.available, round(poll.grown), freed)
        if poll.time % POLL and not decide.decisive(volume, poll.time):
            return None
        written.append((poll.time, so_far))
        deleted[0] = gone
        return decide.factor(volume, poll.time)

    return factor


@dataclass(frozen=True, slots=True)
class PacedFromTheStep(GracefulSlowdown):
    """The forecast's level with its drops paced from wherever the factor is, as shipped before
    `GracefulSlowdown.paced_reach`: a factor a load step left far above the level comes down a
    fifth every 5 s."""

    def paced_reach(self, reading: VolumeReading, peak: Any, ops: Expressions) -> Any:
        return 0.0


@dataclass(frozen=True, slots=True)
class PeakMargin(PacedFromTheStep):
    """The forecast's level on its margin of 4 s of the peak alone, as shipped before its rises
    were held (`GracefulSlowdown.RISE_HOLD_SECONDS`) and its drops paced only from where a paced
    descent holds (`PacedFromTheStep`)."""

    level_hold_seconds: ClassVar[float] = 0.0


@dataclass(frozen=True, slots=True)
class WindowMargin(PacedFromTheStep):
    """The forecast's level on its first margin alone: 4 s of the window's rate, not of the
    peak, rises included (its drops paced from wherever the factor is, `PacedFromTheStep`)."""

    def depth_floor(
        self,
        reading: VolumeReading,
        previous: tuple[VolumeReading, ...],
        peaks: tuple[Any, ...],
        ops: Expressions,
        levels: tuple[Any, Any] | None = None,
    ) -> tuple[Any, Any]:
        on_window = levels and (levels[0], levels[0])
        # GracefulSlowdown's by name: a slots dataclass is a new class, which super() does not see.
        return GracefulSlowdown.depth_floor(self, reading, previous, peaks, ops, on_window)


@dataclass(frozen=True, slots=True)
class SpendSooner(PeakMargin):
    """The forecast's level on the peak's margin (`PeakMargin`) spending what the forecast
    leaves over `SPEND_SECONDS`, not evenly until retention frees what is written now: the
    higher of the even rate (the most a steady rate may be) and the rate now of a plan that
    spends the spare at a rate falling by e every `SPEND_SECONDS` on top of a steady one, each
    bounded by what is foreseen freed by each time ahead (`foreseen_reach`'s bounds, the spare
    at each time ahead shrunk by what the plan spent by then)."""

    SPEND_SECONDS: ClassVar[float] = 20.0

    def foreseen_rate(
        self, reading: VolumeReading, spare: Any, never: Any, ops: Expressions
    ) -> Any:
        applied = self.applied_seconds()
        falling = []
        freed: Any = 0.0
        for ahead, by_then in zip(AHEAD_SECONDS, reading.retention_freed or (), strict=True):
            if ahead > applied:
                seconds = ahead - applied
                left = spare * math.exp(-seconds / self.SPEND_SECONDS)
                falling.append(ops.choose(by_then < 0, never, (left + freed) / seconds))
            freed = ops.greatest(by_then, 0)
        sooner = ops.least(*falling) + spare / self.SPEND_SECONDS
        even = GracefulSlowdown.foreseen_rate(self, reading, spare, never, ops)
        return ops.greatest(even, sooner)


def forecast_policy(policy: type[GracefulSlowdown], **constants: float) -> Controller:
    """`reading_the_forecast` with `policy` (its class constants set to `constants`)."""
    if constants:
        policy = type(policy.__name__, (policy,), {"__slots__": (), **constants})
    return reading_the_forecast(
        decider=lambda: OnePolicy(policy(MinAvailableRatio(0.25), HORIZON, RESPONSE))
    )


def hold_freed(
    settle_seconds: float = 10.0,
    margin_seconds: float = 6.0,
    apply_seconds: float = RESPONSE - 2 * POLL,
) -> Controller:
    """Hold the gross write rate at what retention frees, plus the headroom above a margin
    spent over `settle_seconds`: target = deleted + (headroom - margin) / settle, the factor
    target / peak (the fastest gross rate since the last restart). `deleted`: the partitions'
    drops since the last poll, a rate; gross: their growth. The margin: what the peak writes in
    `margin_seconds`. With `apply_seconds`, the headroom is the one foreseen when the factor
    takes effect (at the gross and deletion rates of the last interval). Past the limit 0.0;
    else `level`."""
    state = {"peak": 0.0, "time": -POLL}

    def factor(poll: Poll) -> float:
        elapsed, state["time"] = poll.time - state["time"], poll.time
        gross, deleted = poll.grown / elapsed, poll.dropped / elapsed
        headroom = poll.available - KAFKA_LIMIT
        if headroom <= 0:
            return 0.0
        state["peak"] = max(state["peak"], gross)
        return freed_level(
            gross, deleted, headroom, state, settle_seconds, margin_seconds, apply_seconds
        )

    return factor


def freed_level(
    gross: float,
    deleted: float,
    headroom: float,
    state: dict[str, float],
    settle_seconds: float,
    margin_seconds: float,
    apply_seconds: float,
) -> float:
    """B's level (`hold_freed`): the gross rate held at `deleted`, plus the headroom foreseen
    `apply_seconds` ahead above `margin_seconds` of the peak spent over `settle_seconds`."""
    then = headroom + (deleted - gross) * apply_seconds
    target = deleted + (then - margin_seconds * state["peak"]) / settle_seconds
    return level(target, headroom, state)


def windowed_level(
    window_seconds: float = 30.0,
    keep: float = 0.95,
    margin_seconds: float = 8.0,
    settle_seconds: float = 10.0,
    apply_seconds: float = RESPONSE - 2 * POLL,
) -> Controller:
    """`hold_freed`'s level with its rates over a window: the gross rate and what retention freed
    summed over the last `window_seconds` (Kafka's quotas mute a producer, then let its backlog
    through: one interval's growth swings 2-3 times, a window of several bursts much less), and
    each call lowering the factor by at most 1 - `keep` (`paced`; 5 % a second when called every
    second: a drop that small gets a throttle time of a fraction of Kafka's window); rises at
    once. 1.0 until the level first asks for less than the held cap (the warm-up's volume lasts
    about the horizon at the peak). Past the limit 0.0."""
    state = {"peak": 0.0, "slowed": 0.0}
    seen: deque[tuple[float, float, float, float]] = deque()  # time, grown, dropped, elapsed

    def factor(poll: Poll) -> float:
        elapsed = poll.time - seen[-1][0] if seen else 1.0
        seen.append((poll.time, poll.grown, poll.dropped, elapsed))
        while seen[0][0] <= poll.time - window_seconds:
            seen.popleft()
        span = sum(e for *_, e in seen)
        gross = sum(g for _, g, _, _ in seen) / span
        deleted = sum(d for _, _, d, _ in seen) / span
        headroom = poll.available - KAFKA_LIMIT
        if headroom <= 0:
            return 0.0
        state["peak"] = max(state["peak"], gross)
        wanted = freed_level(
            gross, deleted, headroom, state, settle_seconds, margin_seconds, apply_seconds
        )
        if not state["slowed"] and wanted >= GracefulSlowdown.HELD_CAP:
            return 1.0
        state["slowed"] = 1.0
        return wanted

    return paced(factor, keep)


def paced(controller: Controller, keep: float = 2 / 3) -> Controller:
    """`controller`'s factor lowered by at most a third a poll (graceful-slowdown's own test
    holds its steps to that: Kafka's throttle times within half its window), except at the
    limit."""
    last = [1.0]

    def factor(poll: Poll) -> float:
        wanted = controller(poll)
        last[0] = max(wanted, keep * last[0]) if wanted > 0 else wanted
        return last[0]

    return factor


def interpolate(history: list[tuple[float, float]], value: float) -> float:
    """The time at which the running sum in `history` ([(time, sum)], oldest first) reached
    `value` (its first time when it had already; its last when not yet)."""
    for (t0, w0), (t1, w1) in zip(history, history[1:], strict=False):
        if w0 <= value <= w1:
            return t0 + (t1 - t0) * ((value - w0) / (w1 - w0) if w1 > w0 else 1.0)
    return history[0][0] if value < history[0][1] else history[-1][0]


def foresee_deletions(
    apply_seconds: float = RESPONSE - 2 * POLL,
    settle_seconds: float = 10.0,
    margin_seconds: float = 8.0,
    kept_seconds: float = 600.0,
) -> Controller:
    """Retention deletes bytes in the order they were written (each partition is a log): the
    bytes deleted so far (the running sum of the partitions' drops) were written by the time the
    running sum of their growth reached them, so what retention deletes next is what was
    written right after that, as long as it keeps bytes as long as it has. The factor published
    now holds from `apply_seconds` on (scrape, rule, alert to enforce) for a poll: the volume's
    headroom then (now less the current gross rate, plus the deletions foreseen) minus a margin
    (what the peak writes in `margin_seconds`), spent over `settle_seconds`, plus the deletions
    foreseen over that poll, is the rate to hold; the factor is that rate over the peak gross
    rate (since the last restart). Without deletions seen yet, none foreseen. Past the limit
    0.0; else `level`."""
    state = {"written": 0.0, "deleted": 0.0, "peak": 0.0}
    history: list[tuple[float, float]] = []

    def factor(poll: Poll) -> float:
        grown, dropped = poll.grown, poll.dropped
        elapsed = poll.time - history[-1][0] if history else POLL
        state["written"] += grown
        state["deleted"] += dropped
        history.append((poll.time, state["written"]))
        del history[: max(0, len(history) - int(kept_seconds / POLL))]
        rate = grown / elapsed
        headroom = poll.available - KAFKA_LIMIT
        if headroom <= 0:
            return 0.0
        peak = state["peak"] = max(state["peak"], rate)
        if state["deleted"] > 0:  # written at `since`: deletions foreseen from there on
            since = interpolate(history, state["deleted"])

            def deleted(start: float, end: float) -> float:
                return interpolate_sum(history, since + start, since + end)

        else:

            def deleted(start: float, end: float) -> float:
                return 0.0

        then = headroom - rate * apply_seconds + deleted(0.0, apply_seconds)
        target = (
            deleted(apply_seconds, apply_seconds + POLL) / POLL
            + (then - margin_seconds * peak) / settle_seconds
        )
        return level(target, headroom, state)

    return factor


def level(target: float, headroom: float, state: dict[str, float]) -> float:
    """The factor that holds the gross rate at `target`: its share of the peak, never below
    graceful-slowdown's lowest cap, and at most its held cap while the headroom would not last
    the horizon at the peak (the quotas stay set: a lift lets the producers' backlog through);
    1.0, the peak forgotten, once the headroom lasts two horizons at the peak (space freed)."""
    peak = state["peak"]
    if headroom >= GracefulSlowdown.RESTART_MARGIN * HORIZON * peak:
        state["peak"] = 0.0
        return 1.0
    cap = GracefulSlowdown.HELD_CAP if headroom < HORIZON * peak else 1.0
    return min(cap, max(GracefulSlowdown.LOWEST_CAP, target / max(peak, 1.0)))


def interpolate_sum(history: list[tuple[float, float]], start: float, end: float) -> float:
    """What the running sum in `history` grew by from `start` to `end` (linear between polls;
    nothing past the last)."""
    return sum_at(history, end) - sum_at(history, start)


def sum_at(history: list[tuple[float, float]], time: float) -> float:
    """The running sum in `history` ([(time, sum)], oldest first) at `time`: linear between its
    entries, the first before them, the last after them."""
    i = bisect.bisect_right(history, time, key=lambda entry: entry[0])
    if i == 0:
        return history[0][1]
    if i == len(history):
        return history[-1][1]
    (t0, w0), (t1, w1) = history[i - 1], history[i]
    return w0 + (w1 - w0) * (time - t0) / (t1 - t0)


def foreseen_deletions(
    written: list[tuple[float, float]], deleted: float, start: float, end: float, kept: float
) -> float:
    """Bytes retention deletes between `start` and `end` (now or later), `deleted` deleted so
    far, from the running sum of what was `written` ([(time, bytes so far)]): what was written
    by a time is gone `kept` s later (the retention time, a segment and a check)."""
    due = sum_at(written, end - kept)
    done = max(deleted, sum_at(written, start - kept))
    return max(due - done, 0.0)


def foresee_retention(
    margin_seconds: float = 4.0,
    margin_bursts: float = 1.0,
    lag: float = kafka_load.SEGMENT + 1.0,
    retention: float = kafka_load.RETENTION,
    apply_seconds: float = RESPONSE - 2 * POLL,
    keep: float = 1.0 - GracefulSlowdown.MAX_DROP_PER_SECOND,
    aheads: tuple[float, ...] | None = None,
) -> Controller:
    """D: retention's deletions foreseen from the topics' retention time, from the start. Kafka
    deletes a segment once its newest write is `retention` s old (checked every second; the
    newest write is at most a segment.ms after the segment's first): the bytes written by `t`
    are gone by `t + retention + lag` at the latest, and deletions come in the order bytes were
    written (each partition is a log). So what retention deletes between now and a later time
    is foreseen from the running sum of the partitions' growth `retention + lag` earlier, less
    what it has deleted already; before deletions it foresees none until then, instead of
    waiting to see them (C, `foresee_deletions`).

    The factor published now holds from `apply_seconds` on (scrape, rule, alert to enforce):
    the rate to hold is the lowest, over the next `retention` s, of the headroom foreseen then
    (now less the window's gross rate, plus the deletions foreseen) above a margin, plus the
    deletions foreseen up to each second, over that second's distance: so that the headroom
    lasts, at that one rate, until retention frees what the producers write now. The margin:
    `margin_seconds` of the gross rate over the last `GROWTH_WINDOW_SECONDS` (30 s), at least
    `margin_bursts` of the last `STEP_WINDOW_SECONDS`' growth above it. The factor is that rate
    over the peak (the fastest gross rate over 30 s or over the last 5 s: the 30 s window is
    short of readings while the load is young), lowered by at most 1 - `keep` a second as the
    shipped policy's, at most its held cap while the headroom would not last the horizon at
    the peak, 1.0 until it first asks for less than the cap and once the headroom lasts two
    horizons at the peak (space freed). Past the limit 0.0. `aheads`: the deletions foreseen
    by those seconds ahead of each poll only (`sampled_rate_to_hold`), as a forecast from Kafka
    gives them."""
    window, step = GracefulSlowdown.GROWTH_WINDOW_SECONDS, GracefulSlowdown.STEP_WINDOW_SECONDS
    history: list[tuple[float, float]] = []  # (time, bytes the partitions grew by so far)
    seen: deque[tuple[float, float]] = deque()  # (time, grown) over the window
    state = {"written": 0.0, "deleted": 0.0, "peak": 0.0, "last": 1.0}

    def foreseen(start: float, end: float) -> float:
        return foreseen_deletions(history, state["deleted"], start, end, retention + lag)

    def rate_to_hold(now: float, headroom: float, gross: float, margin: float) -> float:
        if aheads is not None:
            return sampled_rate_to_hold(now, headroom - gross * apply_seconds - margin)
        then = headroom - gross * apply_seconds + foreseen(now, now + apply_seconds)
        start = now + apply_seconds
        return min(
            (then - margin + foreseen(start, start + ahead)) / ahead
            for ahead in range(1, round(retention) + 1)
        )

    def sampled_rate_to_hold(now: float, spare: float) -> float:
        """As a forecast from Kafka gives it (`aheads`): the deletions by each of those
        seconds from now only, each known to hold from its time on (up to the next); none past
        a retention time (`kvq.model.retention_forecast.volume_freed_bytes`: from about then on
        retention frees what is written at the rate held; up to a retention time after the
        factor takes effect, as D, changes nothing here)."""
        assert aheads is not None
        known = [(0.0, 0.0)] + [(a, foreseen(now, now + a)) for a in aheads]
        bounds = []
        for (_, freed), (until, _) in zip(known, known[1:], strict=False):
            if apply_seconds < until <= retention:
                bounds.append((spare + freed) / (until - apply_seconds))
        return min(bounds)

    def factor(poll: Poll) -> float:
        state["written"] += poll.grown
        state["deleted"] += poll.dropped
        history.append((poll.time, state["written"]))
        seen.append((poll.time, poll.grown))
        while seen[0][0] <= poll.time - window:
            seen.popleft()
        gross = sum(g for _, g in seen) / window
        recent = sum(g for t, g in seen if t > poll.time - step)
        peak = state["peak"] = max(state["peak"], gross, recent / step)
        headroom = poll.available - KAFKA_LIMIT
        if headroom <= 0:
            state["last"] = 0.0
            return 0.0
        if headroom >= GracefulSlowdown.RESTART_MARGIN * HORIZON * peak:
            state["last"] = 1.0
            return 1.0
        margin = max(margin_seconds * gross, margin_bursts * max(recent - gross * step, 0.0))
        wanted = rate_to_hold(poll.time, headroom, gross, margin) / max(peak, 1.0)
        cap = GracefulSlowdown.HELD_CAP if headroom < HORIZON * peak else 1.0
        wanted = min(cap, max(GracefulSlowdown.LOWEST_CAP, wanted))
        if state["last"] == 1.0 and wanted >= GracefulSlowdown.HELD_CAP:
            return 1.0
        state["last"] = max(wanted, keep * state["last"]) if state["last"] > 0 else wanted
        return state["last"]

    return factor


@dataclass
class Outcome:
    slowed: float
    written: list[float]
    """Bytes written each second."""
    lowest: float
    """Lowest headroom (available - limit) in the run."""
    factors: list[tuple[float, float]]
    kafka: kafka_load.KafkaRun | None = None
    """With Kafka's quotas and producers (`scenario`'s `kafka`): the producers, and when the
    space was freed."""

    def share(self, seconds: float) -> float:
        start = int(self.slowed)
        return sum(self.written[start : start + int(seconds)]) / at_the_limit(ROOM, seconds)

    def steepest(self) -> float:
        """The lowest ratio of a factor to the one before, the limit's 0.0 aside."""
        factors = [f for _, f in self.factors]
        return min(b / a for a, b in zip(factors, factors[1:], strict=False) if a > 0 < b)

    def swing(self, seconds: float = EPISODE) -> tuple[float, float]:
        late = [f for t, f in self.factors if self.slowed + 30 <= t < self.slowed + seconds]
        return min(late), max(late)

    def producers(self) -> list[kafka_load.Producer]:
        assert self.kafka is not None, "only with Kafka's quotas (scenario(kafka=True))"
        return self.kafka.load.producers[: len(self.kafka.load.writers.producers)]

    def end(self, seconds: float = EPISODE) -> float:
        """When the episode ended: the space freed, else `seconds` after the first slowdown."""
        freed = self.kafka.freed if self.kafka else None
        return freed if freed is not None else self.slowed + seconds

    def stall(self, seconds: float = EPISODE) -> float:
        """The longest time a producer went without an acknowledgement in the episode
        (demo.slowdown.Outcome.longest_stall)."""
        end = self.end(seconds)
        return max(kafka_load.longest_stall(p, self.slowed, end) for p in self.producers())

    def longest_throttle(self, seconds: float = EPISODE) -> float:
        """The longest throttle time Kafka answered a producer with in the episode."""
        end = self.end(seconds)
        throttles = [s for p in self.producers() for t, s in p.throttles if self.slowed <= t < end]
        return max(throttles, default=0.0)

    def back(self) -> float | None:
        """Seconds from the space freed until every quota entity was back at its rate
        (demo.slowdown.Outcome.entities_back_at_rate: its rate over the warm-up's last 10 s;
        without a warm-up, from 5 s after the start to 15 s, or to the first slowdown if later);
        None: one was not within 30 s."""
        assert self.kafka is not None and self.kafka.freed is not None
        times = []
        for producers in self.kafka.load.groups().values():
            befores = [p.before for p in producers]
            before = (
                kafka_load.rate_over(producers, 5.0, max(15.0, self.slowed))
                if None in befores
                else sum(b for b in befores if b is not None)
            )
            times.append(kafka_load.back_at_rate(producers, before, self.kafka.freed))
        return None if None in times else max(t for t in times if t is not None)


EXACT = 0.0
"""`sizes_every` for a log dir whose exact bytes written and deleted are known (no netting)."""


def scenario(
    controller: Controller,
    delay: float = 3.0,
    load_step=None,
    duration: float = 700.0,
    sizes_every: float = POLL,
    calls_every: float = POLL,
    kafka: bool = False,
    freed_after: float | None = None,
    phase: int = 0,
    step_window: float = kafka_load.STEP_WINDOW,
    warm_up: float = kafka_load.WARM_UP,
    writers: kafka_load.Load = kafka_load.SIX,
    retention_check: float = 1.0,
    quota_window_samples: int = kafka_load.WINDOW_NUM,
) -> Outcome:
    """With `kafka`: the load as Kafka's quotas and the producers shape it (`kafka_load.run`,
    by tenths of a second; the space freed `freed_after` s after the first slowdown; the
    exporter's polls `phase` s earlier in the load; `step_window`: the enforcer's
    kvq.enforcer.throttle.observed.rate.step.window in seconds, 0: off; the load warming up
    `warm_up` s before the scenario starts; `writers`: who writes, bench/slowdown's six or
    `kafka_load.principals`; `retention_check`: Kafka's log.retention.check.interval.ms, in
    seconds; `quota_window_samples`: every broker's quota.window.num). Else
    `kafka_retention_loop` with the load spread over PARTITIONS replicas: the enforcer holds
    the load to the factor in force (computed `delay` s before) x the highest 10 s rate of the
    300 s before the episode, never below 90 kB/s; at 1.0 the producers catch up on their
    backlog at up to three times the rate. `load_step` (time, times): from then on the same
    principals offer that many times the load (held by the same quotas: at 1.0 three times
    the rate). The partitions' sizes are read every
    `sizes_every` s (with each poll: the poll's; EXACT: the bytes written and deleted, none
    netted): a replica that grew and lost a segment between two readings shows only the
    difference. The controller is called every `calls_every` s (1.0: the exporter's checks
    between polls, `checked`); what it returns is published."""
    if kafka:

        def decide(t: float, available: int, total: int, grown: float, dropped: float):
            return controller(Poll(t, available, grown, dropped, total))

        every = {"sizes_every": sizes_every, "calls_every": calls_every}
        run = kafka_load.run(
            decide,
            delay,
            load_step,
            duration,
            freed_after=freed_after,
            phase=phase,
            step_window=step_window,
            warm_up=warm_up,
            writers=writers,
            retention_check=retention_check,
            quota_window_samples=quota_window_samples,
            **every,
        )
        assert run.slowed is not None
        return Outcome(run.slowed, run.written, run.lowest, run.factors, run)
    assert freed_after is None, "the space is freed only with Kafka's quotas"
    full, floor, backlog_most = KAFKA_FULL, 90e3, 4e6
    logs: list[list[list[float]]] = [[] for _ in range(PARTITIONS)]
    published = [(-delay, 1.0)]
    written_each_second, reference, factor = [full] * 300, full, 1.0
    slowed, lowest, backlog, t = None, float(ROOM), 0.0, 0.0
    written_log, factors = [], []
    sizes = read = [0.0] * PARTITIONS
    grown = dropped = 0.0
    while t <= duration:
        factor, before = [f for at, f in published if at <= t - delay][-1], factor
        if factor < 1.0 <= before:
            recent = written_each_second[-300:]
            reference = max(sum(recent[i : i + 10]) / 10 for i in range(len(recent) - 9))
            slowed = t if slowed is None else slowed
        times = load_step[1] if load_step and t >= load_step[0] else 1
        offered = full * times + backlog
        allowed = max(floor, factor * reference) if factor < 1.0 else 3 * full
        written = min(offered, allowed)
        backlog = min(offered - written, backlog_most)
        written_each_second.append(written)
        written_log.append(written)
        before_sizes = sizes
        for i, log in enumerate(logs):  # each replica's segments roll at a phase of its own
            logs[i] = retain(log, t + i * SEGMENT / PARTITIONS, written / PARTITIONS)
        sizes = [sum(s[2] for s in log) for log in logs]
        if sizes_every == EXACT:
            grown += written
            dropped += round(sum(before_sizes) + written - sum(sizes))
        elif t % sizes_every == 0:
            grown += sum(max(n - r, 0.0) for n, r in zip(sizes, read, strict=True))
            dropped += sum(max(r - n, 0.0) for n, r in zip(sizes, read, strict=True))
            read = sizes
        available = KAFKA_START - int(sum(sizes))
        lowest = min(lowest, available - KAFKA_LIMIT)
        decided = controller(Poll(t, available, grown, dropped)) if t % calls_every == 0 else None
        if decided is not None:
            published.append((t, decided))
            factors.append(published[-1])
            grown = dropped = 0.0
        t += 1.0
    assert slowed is not None
    return Outcome(slowed, written_log, lowest, factors)


SHIPPED: dict[str, Callable[[], Controller]] = {
    "graceful-slowdown, response 14 s, polls only": graceful,
    "graceful-slowdown, response 30 s, polls only": lambda: graceful(30.0),
}
"""Policies that read the volume's totals alone: the partitions' sizes change nothing."""
CHECKED: dict[str, Callable[[], Controller]] = {
    "graceful-slowdown, response 14 s, checked": lambda: graceful(checks=True),
    "graceful-slowdown, response 30 s, checked": lambda: graceful(30.0, checks=True),
}
"""The same, with the exporter's checks between polls (partition sizes off)."""
WITH_GROWTH: dict[str, Callable[[], Controller]] = {
    "graceful-slowdown, response 14 s, grown bytes": lambda: graceful(grown=True),
    "graceful-slowdown, response 30 s, grown bytes": lambda: graceful(30.0, grown=True),
}
"""The shipped policy with the partitions' sizes read, polls alone."""
AS_SHIPPED: dict[str, Callable[[], Controller]] = {
    "graceful-slowdown, 14 s, grown bytes, checked": lambda: graceful(grown=True, checks=True),
    "graceful-slowdown, 30 s, grown bytes, checked": lambda: graceful(30.0, True, True),
}
"""What the exporter runs by default: the partitions' sizes read with each poll and check."""
VARIANTS: dict[str, Callable[[], Controller]] = {
    "A: gross write rate as graceful's fill rate": gross_fill,
    "B: hold the gross rate at what retention frees": hold_freed,
    "B': B (margin 8 s) lowered a third a poll at most": lambda: paced(
        hold_freed(margin_seconds=8.0)
    ),
    "C: B with retention's next deletions foreseen": foresee_deletions,
}
OBSERVATIONS = {
    "sizes with each 5 s poll": POLL,
    "sizes every 1 s": 1.0,
    "exact bytes written, deleted": EXACT,
}
"""How the partitions' growth and drops are read (`scenario`'s `sizes_every`)."""
STEPS = (10.0, 45.0)
"""When the 10x load steps: before the first slowdown, and 30 s after it (as in
test_graceful_slowdown.py)."""


def row(make: Callable[[], Controller], sizes_every: float, calls_every: float = POLL) -> str:
    """share over 150 s and 600 s, lowest headroom (loop 3 s; 5 s and 8 s), the factor's range
    from 30 s after the first slowdown to the end of the episode, its steepest one-poll drop
    (the new factor's share of the one before), and the lowest headroom under the 10x steps
    (the lower of a 3 s and a 5 s loop)."""
    every = {"sizes_every": sizes_every, "calls_every": calls_every}
    run = scenario(make(), **every)
    slower = [scenario(make(), delay, **every).lowest for delay in (5.0, 8.0)]
    steps = [
        min(scenario(make(), delay, (at, 10), **every).lowest for delay in (3.0, 5.0))
        for at in STEPS
    ]
    low, high = run.swing()
    lowest = "/".join(f"{b / 1e6:.1f}" for b in (run.lowest, *slower))
    return (
        f"{run.share(EPISODE):5.0%} {run.share(LONG_EPISODE):5.0%} {lowest:>15} "
        f"{low:5.2f}-{high:.2f} {run.steepest():5.2f} " + " ".join(f"{b / 1e6:6.1f}" for b in steps)
    )


ON_KAFKA: dict[str, Callable[[], Controller]] = {
    "shipped: totals, checked, response 14 s": lambda: graceful(checks=True),
    "shipped: partition sizes, checked, response 14 s": lambda: graceful(grown=True, checks=True),
    "B paced (PacedLevel)": paced_level,
    "B over 30 s, drops paced 5 %/s (windowed_level)": windowed_level,
    "B over 6 polls, drops paced by the held floor (PolledWindow)": lambda: polled_window(),
    "B paced, rises paced too": lambda: paced_level(rise_seconds=5.0),
    "B paced closer, as run on real Kafka": lambda: paced_level(**AS_RUN),
    "B paced closer, more margin (CLOSER)": lambda: paced_level(**CLOSER),
    "B paced closer, with the escape": lambda: paced_level(**{**CLOSER, "escape": True}),
    "B paced closer, 4 + 6 s (CLOSER_46)": lambda: paced_level(**CLOSER_46),
    "CLOSER_46 under the pace's ceiling (PaceCeiling)": pace_ceiling,
    "  without the early cap": lambda: pace_ceiling(early_cap=False),
    "  without the checks while unthrottled": lambda: pace_ceiling(unthrottled_checks=False),
    "  the ceiling over the level": lambda: pace_ceiling(over_level=True),
    "  the ceiling only before retention frees": lambda: pace_ceiling(approach_only=True),
    "  the ceiling on the most freed of 1-3": lambda: pace_ceiling(most_freed=True),
    "D: retention foreseen from its retention time": foresee_retention,
    "shipped: partition sizes and Kafka's retention forecast": reading_the_forecast,
    "  drops paced from wherever the factor is (PacedFromTheStep)": lambda: forecast_policy(
        PacedFromTheStep
    ),
    "  on 4 s of the peak alone (PeakMargin)": lambda: forecast_policy(PeakMargin),
    "  on 4 s of the window's rate alone (WindowMargin)": lambda: forecast_policy(WindowMargin),
    "  spends what is left over 20 s (SpendSooner)": lambda: forecast_policy(
        SpendSooner, SPEND_SECONDS=20.0
    ),
    "  spends what is left over 40 s (SpendSooner)": lambda: forecast_policy(
        SpendSooner, SPEND_SECONDS=40.0
    ),
}
"""Policies run on Kafka's quotas and producers (`scenario`'s `kafka`), as the exporter runs them
on bench/slowdown: a check every second, the partitions' sizes read with each."""
KAFKA_RUN = EPISODE + 80.0
"""How long a run with the space freed goes on: the first slowdown, the episode, 30 s after."""
FREED = {"duration": KAFKA_RUN, "freed_after": EPISODE}
"""`scenario`'s run with the space freed after the episode (bench/slowdown's run)."""
DELAYS = (2.0, 3.0, 4.0, 5.0, 6.0)
PHASES = range(5)
"""Each policy on Kafka's quotas runs with the loop taking each of DELAYS s from a poll to the
quotas, and the exporter's polls at each of PHASES s into the load: bursts make one run's
numbers depend on both (the real runs' loop: 2-3 s; their phase: any)."""
ONE_PHASE = (0,)
"""The phases for a policy that keeps its own readings, one a second (D, `foresee_retention`):
where the exporter's polls fall in the load changes nothing it reads, so its runs over DELAYS x
PHASES are those over DELAYS five times over (checked once: the same numbers)."""


def on_kafka(make: Callable[[], Controller], delay: float = 3.0, **kwargs) -> Outcome:
    """`make`'s policy on Kafka's quotas and producers, checked and read every second."""
    every = {"sizes_every": 1.0, "calls_every": 1.0, "kafka": True}
    return scenario(make(), delay, **every, **kwargs)


@dataclass(frozen=True)
class Spread:
    """One policy's runs on Kafka's quotas over `DELAYS` x `PHASES`, the space freed after the
    episode: each measure sorted."""

    shares: list[float]
    lowest: list[float]
    stalls: list[float]
    backs: list[float]
    """Seconds until every quota entity was back at its rate (inf: not within 30 s)."""

    @classmethod
    def of(cls, make: Callable[[], Controller], delays=DELAYS, phases=PHASES, **kwargs) -> Spread:
        """`kwargs`: `scenario`'s (e.g. `writers`)."""
        runs = [on_kafka(make, d, phase=p, **FREED, **kwargs) for d in delays for p in phases]
        backs = [run.back() for run in runs]
        return cls(
            sorted(run.share(EPISODE) for run in runs),
            sorted(run.lowest for run in runs),
            sorted(run.stall() for run in runs),
            sorted(float("inf") if b is None else b for b in backs),
        )

    @staticmethod
    def median(values: list[float]) -> float:
        return values[len(values) // 2]


def step_lowest(make: Callable[[], Controller], at: float, phases=PHASES, **kwargs) -> list[float]:
    """The lowest headroom of each run under a 10x load step `at` s into the load, over DELAYS x
    `phases` (sorted)."""
    step = {"load_step": (at, 10), "duration": KAFKA_RUN, **kwargs}
    return sorted(on_kafka(make, d, phase=p, **step).lowest for d in DELAYS for p in phases)


def watched(decide: Controller, seen: list[tuple[float, float | None]]) -> Controller:
    """`decide`, appending each poll's headroom and what it decided to `seen`."""

    def factor(poll: Poll) -> float | None:
        decided = decide(poll)
        seen.append((poll.available - KAFKA_LIMIT, decided))
        return decided

    return factor


def step_restarts(
    make: Callable[[], Controller], at: float, **kwargs
) -> list[tuple[float, float | None]]:
    """Per run over DELAYS x PHASES under a 10x load step `at` s into the load: the lowest
    headroom before the factor first went back to 1.0 after a slowdown (the policy's restart,
    space freed), and after it (None: no restart)."""
    runs = []
    for delay in DELAYS:
        for phase in PHASES:
            seen: list[tuple[float, float | None]] = []
            step = {"load_step": (at, 10), "duration": KAFKA_RUN, **kwargs}
            on_kafka(partial(watched, make(), seen), delay, phase=phase, **step)
            slowed = [i for i, (_, f) in enumerate(seen) if f is not None and f < 1.0]
            lifted = [i for i, (_, f) in enumerate(seen) if slowed and i > slowed[0] and f == 1.0]
            end = lifted[0] if lifted else len(seen)
            after = min((h for h, _ in seen[end:]), default=None)
            runs.append((min(h for h, _ in seen[:end]), after))
    return runs


def kafka_row(make: Callable[[], Controller]) -> str:
    """Over DELAYS x PHASES: the share over 150 s (lowest, median, highest), the lowest headroom,
    the longest stall (median, most) and the time until every quota entity was back at its rate
    once the space was freed (median, most); then the share over 600 s (3 s loop) and, under
    each 10x step, the lowest headroom and in how many of the runs it crossed the limit."""
    spread = Spread.of(make)
    long = on_kafka(make, duration=LONG_EPISODE + 40.0)
    steps = [step_lowest(make, at) for at in STEPS]
    shares, stalls, backs = spread.shares, spread.stalls, spread.backs
    return (
        f"{shares[0]:4.0%} {Spread.median(shares):4.0%} {shares[-1]:4.0%} "
        f"{spread.lowest[0] / 1e6:6.1f} {Spread.median(stalls):5.1f} {stalls[-1]:5.1f} "
        f"{Spread.median(backs):5.1f} {backs[-1]:5.1f} {long.share(LONG_EPISODE):5.0%} "
        + " ".join(f"{s[0] / 1e6:5.1f}/{sum(b < 0 for b in s):2d}" for s in steps)
    )


def kafka_table(*names: str) -> list[str]:
    """The policies on Kafka's quotas and producers (headroom in MB above the limit; negative:
    past it; times in seconds; inf: not back within 30 s): those whose names contain one of
    `names` (every one without)."""
    rows = [
        f"{'policy':48} {'150 s: min  med  max':>14} {'lowest':>6} {'stall':>5} {'most':>5} "
        f"{'back':>5} {'most':>5} {'600 s':>5} {'10x@10 /x':>8} {'10x@45 /x':>8}"
    ]
    for name, make in ON_KAFKA.items():
        if not names or any(n in name for n in names):
            rows.append(f"{name:48} {kafka_row(make)}")
    return rows


def table() -> list[str]:
    """The study side by side (headroom in MB above the limit; negative: past it)."""
    rows = [
        f"{'policy':50} {'observation':29} {'150 s':>5} {'600 s':>5} "
        f"{'lowest 3/5/8 s':>15} {'factor':>9} {'step':>5} {'10x@10':>6} {'10x@45':>6}"
    ]
    for name, make in SHIPPED.items():
        rows.append(f"{name:50} {'totals':29} {row(make, POLL)}")
    for name, make in CHECKED.items():
        rows.append(f"{name:50} {'totals, checks every 1 s':29} {row(make, POLL, 1.0)}")
    for name, make in AS_SHIPPED.items():
        rows.append(f"{name:50} {'sizes with each 1 s check':29} {row(make, 1.0, 1.0)}")
    for name, make in {**WITH_GROWTH, **VARIANTS}.items():
        for observation, every in OBSERVATIONS.items():
            rows.append(f"{name:50} {observation:29} {row(make, every)}")
    return rows


def test_the_shipped_policy_swings_and_stays_below_85_percent_of_the_bound():
    """The real run's 74 %: over the 150 s episode, 81 % over 600 s; the factor swings from the
    cap to a quarter with a period of about a retention time, since the fill rate shows each
    rise a retention time later."""
    run = scenario(graceful())
    assert 0.7 < run.share(EPISODE) < 0.78 and run.share(LONG_EPISODE) < 0.85
    low, high = run.swing()
    assert high > 0.9 and low < 0.3
    assert run.lowest > 1_000_000


def steady_growth(sizes_every: float) -> float:
    """The partitions' growth between polls over what was written, once retention deletes,
    at a steady factor of 0.9."""
    seen: list[float] = []

    def steady(poll: Poll) -> float:
        seen.append(poll.grown if poll.time >= 100.0 else 0.0)
        return 0.9

    run = scenario(steady, sizes_every=sizes_every)
    return sum(seen) / sum(run.written[96:])


def test_the_scenarios_segments_read_with_each_poll_hide_what_was_written():
    """Each replica rolls a segment every 5 s and retention deletes one every 5 s: read with
    each 5 s poll, a replica's size grew by what was written less the segment it lost, nearly
    nothing; read every second, most of the growth shows."""
    assert steady_growth(POLL) < 0.1
    assert steady_growth(1.0) > 0.7


@pytest.mark.parametrize("sizes_every", [1.0, EXACT])
def test_holding_the_gross_rate_at_what_retention_frees_reaches_85_percent_off_the_limit(
    sizes_every,
):
    """Variant B, with the partitions' growth and drops read every second (or exactly): 85 % or
    more of the bound over the episode and over 600 s, never at the limit with the loop taking
    3, 5 or 8 s from a poll to the quotas."""
    for delay in (3.0, 5.0, 8.0):
        run = scenario(hold_freed(), delay, sizes_every=sizes_every)
        assert run.share(EPISODE) >= 0.85 and run.share(LONG_EPISODE) >= 0.85
        assert run.lowest > 0


def test_the_gross_rate_as_graceful_slowdowns_fill_rate_holds_a_horizon_of_headroom():
    """Variant A: reading no deletions, it keeps the headroom for the horizon at the gross rate
    and settles near R / (R + horizon) = 61 % of the bound, below the shipped policy."""
    run = scenario(gross_fill(), sizes_every=EXACT)
    assert run.share(LONG_EPISODE) < 0.7 and run.lowest > 2_000_000


def test_checks_between_polls_keep_a_step_before_the_first_slowdown_off_the_limit():
    """With polls alone, a 10x step 10 s in (before any slowdown) shows in the fill rate two
    polls late and crosses the limit; with the exporter's check every second it stays above
    it with the demo's 14 s response time and a 3 s loop, and with the default 30 s for loops of
    3 and 5 s."""
    assert scenario(graceful(), 3.0, (10.0, 10)).lowest < 0
    assert scenario(graceful(checks=True), 3.0, (10.0, 10), calls_every=1.0).lowest > 0
    for delay in (3.0, 5.0):
        assert scenario(graceful(30.0, checks=True), delay, (10.0, 10), calls_every=1.0).lowest > 0


@pytest.mark.parametrize("at", STEPS)
def test_a_ten_times_load_step_keeps_the_variants_off_the_limit(at):
    for make in (hold_freed, foresee_deletions):
        for delay in (3.0, 5.0):
            assert scenario(make(), delay, (at, 10), sizes_every=1.0).lowest > 0


def test_b_paced_to_a_third_a_poll_crosses_the_limit_under_a_step_before_the_first_slowdown():
    """B drops its factor to the enforcer's minimum within a poll; held to a third a poll, the
    10x step that comes before the first slowdown crosses the limit (B' needs an escape at
    once, as graceful-slowdown's floor at once)."""
    assert scenario(hold_freed(), 5.0, sizes_every=1.0).steepest() < 0.1
    paced_b = paced(hold_freed(margin_seconds=8.0))
    assert scenario(paced_b, 5.0, (10.0, 10), sizes_every=1.0).lowest < 0


@pytest.mark.parametrize("checks", [False, True], ids=["polls", "checks"])
@pytest.mark.parametrize("delay", [3.0, 5.0, 8.0])
def test_the_shipped_policy_with_sizes_read_every_second_stays_off_the_limit_at_80_percent(
    delay, checks
):
    """With the partitions' sizes read at every check (every second) and handed out with each
    5 s poll, on smooth producers: 78 % or more of the bound over the episode (84 / 81 / 79 %
    with loops of 3 / 5 / 8 s), 81 % or more over 600 s, above the limit with the loop taking
    3, 5 or 8 s from a poll to the quotas, the response time declared as the loop's plus two
    polls (14 s at the least). With 14 s declared and an 8 s loop it stays above it too (0.4 MB
    at the least): the approach's drops follow what the volume fills by, not only the level,
    which counts on its factor being in the quotas 4 s after the reading. The same with the
    checks run as the exporter runs them (`graceful`'s `checks`)."""
    policy = graceful(max(RESPONSE, delay + 2 * POLL), grown=True, checks=checks)
    run = scenario(policy, delay, sizes_every=1.0, calls_every=1.0 if checks else POLL)
    assert run.share(EPISODE) >= 0.78 and run.share(LONG_EPISODE) >= 0.81
    assert run.lowest > 0
    if delay == 8.0:
        every = 1.0 if checks else POLL
        late = scenario(
            graceful(grown=True, checks=checks), delay, sizes_every=1.0, calls_every=every
        )
        assert late.lowest > 0


@pytest.mark.parametrize("sizes_every", [1.0, POLL])
def test_a_ten_times_load_step_after_the_first_slowdown_keeps_the_policy_with_sizes_off_the_limit(
    sizes_every,
):
    """30 s after the first slowdown, with the scenario's response time and the default 30 s,
    loops of 3 and 5 s."""
    for response in (RESPONSE, 30.0):
        for delay in (3.0, 5.0):
            run = scenario(
                graceful(response, grown=True), delay, (45.0, 10), sizes_every=sizes_every
            )
            assert run.lowest > 0


def test_a_ten_times_load_step_10_s_after_the_exporters_start_crosses_the_limit_with_sizes():
    """The policy with the partitions' sizes read is weaker than on the totals alone against a
    10x step that comes 10 s after the exporter (and the load) started, before its window
    (30 s) is whole: the step is met at once by its own level, but retention has freed nothing
    yet and the held floor's paced drops follow; the volume reaches the limit with a 3 s loop
    (by 0.5 MB, the exporter's checks taken in), where the totals' floor at once keeps it
    above. On real Kafka the step comes after the load warmed up (bench/slowdown: 0.7 MB above
    the limit); the shipped default reads the totals."""
    run = scenario(graceful(grown=True, checks=True), 3.0, (10.0, 10), calls_every=1.0)
    assert -1e6 < run.lowest < 0
    assert scenario(graceful(checks=True), 3.0, (10.0, 10), calls_every=1.0).lowest > 0


def test_with_sizes_read_only_with_each_poll_the_shipped_policy_still_gains():
    """Read with each 5 s poll, the scenario's 5 s segments hide most of the growth (a replica
    rolls and loses a segment between two polls): 78 % or more, above the 74 % without, still
    off the limit; the default response time, 30 s, gains most."""
    for response, without in ((RESPONSE, 0.78), (30.0, 0.7)):
        run = scenario(graceful(response, grown=True), sizes_every=POLL)
        assert run.share(EPISODE) > max(without, scenario(graceful(response)).share(EPISODE))
        assert run.lowest > 0


def swing_between_polls(run: Outcome) -> float:
    """The median ratio of one poll interval's writes to the next one's (the larger to the
    smaller) over the episode."""
    start = int(run.slowed)
    fives = [sum(run.written[i : i + int(POLL)]) for i in range(start, start + int(EPISODE), 5)]
    ratios = sorted(max(a, b) / max(min(a, b), 1.0) for a, b in zip(fives, fives[1:], strict=False))
    return ratios[len(ratios) // 2]


def test_on_kafkas_quotas_the_shipped_policy_writes_what_it_wrote_on_real_kafka():
    """Kafka's quota sensors and the producers' mute-then-burst (`kafka_load`): the shipped
    policy, checked every second as the exporter runs it, writes 70-78 % of the bound at a
    steady load (median 74 %; from a cold start 68-81 %, median 72 %, and real runs then
    71-76 %, docs/results/slowdown.md), stays above the limit (1.1 MB at the least; real from
    a cold start: 1.6-1.9 MB), goes 8.2 s without an acknowledgement at the median (real:
    7.8-9.4 s) and has every quota entity back at its rate 3.8 s after the space was freed at
    the median (real: 0-4.2 s)."""
    spread = Spread.of(ON_KAFKA["shipped: totals, checked, response 14 s"])
    assert spread.shares[0] > 0.65 and Spread.median(spread.shares) < 0.78
    assert spread.lowest[0] > 500_000
    assert Spread.median(spread.stalls) < 10.0 and Spread.median(spread.backs) <= 5.0


def test_on_kafkas_quotas_the_horizon_trades_headroom_not_bytes():
    """The shipped policy (totals, checked) with horizons of 20-60 s, the scenario's load filling
    the room above the limit in about 50 s: none writes 80 % of the bound (median 66 / 76 / 74 /
    70 %), and the shorter the horizon, the less headroom is left at the least (0.09 / 0.61 /
    1.08 / 1.35 MB): the headroom it keeps at the first slowdown is spent by the time retention
    frees, and after that the response time decides (`settled_share`). Real Kafka agrees
    (`python -m bench.slowdown --policy graceful-slowdown --horizon ...`, one run each: 75 / 76 /
    76 / 74 % of the bound, 0.6 / 1.0 / 1.9 / 2.2 MB above the limit), except that at 20 s the
    model's factor falls deeper (66 %, producers stalled 15 s at the median) than Kafka's did
    (75 %, 9.1 s)."""
    horizons = (20.0, 30.0, 40.0, 60.0)
    spreads = [Spread.of(partial(graceful, checks=True, horizon=h)) for h in horizons]
    assert all(Spread.median(spread.shares) < 0.80 for spread in spreads)
    lowest = [spread.lowest[0] for spread in spreads]
    assert lowest == sorted(lowest) and lowest[0] < 200_000 < 1_000_000 < lowest[2]


def test_on_kafkas_quotas_the_shipped_policy_with_sizes_rides_at_83_percent():
    """`kvq.throttle.slowdown.partition.sizes=true` as shipped, on Kafka's quotas: the level
    over the last 30 s, its drops paced, read at each poll: 80-85 % of the bound (median 83 %),
    above the limit in every run (0.47 MB at the least), producers never more than 11 s without
    an acknowledgement (8.4 s at the median), every quota entity back at its rate within 9 s of
    the space freed (3.8 s at the median). What it gave up for the 40 principals (below): before
    the margin of two bursts and the approach's drops paced on what the volume fills by, 82-87 %
    (median 84 %) and 10 s at the most. On real Kafka (docs/policies.md) 81 %, 1.5 MB above the
    limit, 10.4 s at the longest."""
    spread = Spread.of(ON_KAFKA["shipped: partition sizes, checked, response 14 s"])
    assert spread.shares[0] > 0.79 and Spread.median(spread.shares) >= 0.82
    assert spread.lowest[0] > 0
    assert spread.stalls[-1] <= 11.0 and Spread.median(spread.backs) <= 5.0


def test_on_kafkas_quotas_b_paced_closer_crosses_the_limit_as_it_did_on_real_kafka():
    """`PacedLevel` as it was run once on real Kafka (AS_RUN): there it wrote 96 % of the
    bound, went 0.44 MB below the limit 64-66 s into the load and stalled a producer for
    15.7 s (docs/policy-study.md). The model: 85 % or more at the median, below the limit in some
    runs, in the same approach before retention first frees anything."""
    spread = Spread.of(ON_KAFKA["B paced closer, as run on real Kafka"])
    assert Spread.median(spread.shares) >= 0.85 and spread.lowest[0] < 0


def test_on_kafkas_quotas_b_paced_with_more_margin_writes_85_percent_but_reaches_the_limit():
    """`PacedLevel` with CLOSER: B's level as the held floor (drops paced to 20 % per 5 s, so
    Kafka's throttle times stay near 10 s), its rates over two intervals, a margin that grows
    while retention frees less than the peak, no escape: 77-90 % of the bound (median 85 %) at
    a steady load (the warm-up), but past the limit in some runs (by 0.3 MB at the most; from
    a cold start, with the enforcer's references taken from a sensor that had not seen the
    load at its rate, it stayed above it at 83 %). The 10x step 10 s into the scenario crosses
    the limit with references that hold the step's rate (no step window; as the shipped policy
    does in this model, whose step is a true 10x: on real Kafka the bench's step producers
    wrote about a quarter of it and the shipped policy stayed 1.8 MB above the limit), and
    stays above it in the same run with references from before the step; with the escape
    kept, the escape's drops at once mute producers for 20 s and more."""
    make = ON_KAFKA["B paced closer, more margin (CLOSER)"]
    spread = Spread.of(make)
    assert Spread.median(spread.shares) >= 0.84 and -500_000 < spread.lowest[0] < 0
    step = {"load_step": (10.0, 10), "duration": KAFKA_RUN}
    assert on_kafka(make, step_window=0.0, **step).lowest < 0
    assert on_kafka(make, **step).lowest > 0
    escaping = Spread.of(ON_KAFKA["B paced closer, with the escape"], phases=(0, 2, 4))
    assert Spread.median(escaping.stalls) > 15.0


def test_on_kafkas_quotas_a_level_over_30_s_with_paced_drops_rides_at_85_percent():
    """`windowed_level`: B's level (`hold_freed`) on the growth and the deletions of the last
    30 s, its drops paced to 5 % a second: at a steady load 85-86 % of the bound (median 86 %),
    0.48 MB above the limit at the least, no producer without an acknowledgement for longer than
    9.9 s at the median (11.2 s at the most), every quota entity back at its rate 4.2 s after the
    space was freed at the median. On one second's rates the same level follows Kafka's bursts:
    75 % at the median (74-82 %), entities back after 9.4 s; on 5 s (a poll) 81 %. It has no
    escape for a load step yet: a 10x step 45 s into the load crosses the limit in 5 of the
    25 runs (by 0.19 MB), which the shipped policy's does not."""
    spread = Spread.of(ON_KAFKA["B over 30 s, drops paced 5 %/s (windowed_level)"])
    assert spread.shares[0] >= 0.84 and Spread.median(spread.shares) >= 0.85
    assert spread.lowest[0] > 0
    assert Spread.median(spread.stalls) <= 10.0 and Spread.median(spread.backs) <= 5.0
    one_second = Spread.of(lambda: windowed_level(window_seconds=1.0))
    assert Spread.median(one_second.shares) < 0.80 and Spread.median(one_second.backs) > 5.0


def test_on_kafkas_quotas_the_window_level_on_polls_rides_at_82_percent_and_loses_a_step():
    """`PolledWindow`, the 30 s level as the policy would run it, on the readings the exporter
    takes in (its polls): at a steady load 80-84 % of the bound (median 82 %), 0.27 MB above the
    limit at the least, stalls of 8.2 s at the median, every quota entity back 4.0 s after the
    space was freed: a poll apart, the paced drops meet the backlog a rise lets through up to
    4 s later than `windowed_level`'s every second. And a 10x step 10 s into the load, before
    the first slowdown, crosses the limit in nearly every run: the window averages the step
    over six polls and the paced floor lowers the factor 20 % a poll, where the shipped level
    reads one interval and drops at once."""
    make = ON_KAFKA["B over 6 polls, drops paced by the held floor (PolledWindow)"]
    spread = Spread.of(make)
    assert 0.80 <= Spread.median(spread.shares) < 0.85 and spread.lowest[0] > 0
    assert Spread.median(spread.stalls) <= 10.0 and Spread.median(spread.backs) <= 5.0
    assert sum(lowest < 0 for lowest in step_lowest(make, 10.0)) > 20


def test_on_kafkas_quotas_the_paced_level_under_the_paces_ceiling_rides_near_the_limit():
    """`PaceCeiling`: B's level over two intervals with CLOSER_46's margin, paced to 20 % every
    5 s, under the ceiling from which the pace keeps 1 s of the peak above the limit (held at
    once), capped as soon as one interval's growth says the headroom would not last the
    horizon: at a steady load (the warm-up) 79-90 % of the bound (median 84 %), 0.1 MB past
    the limit at the most, every quota entity back at its rate 4.4 s after the space was freed
    at the median; without the early cap 81-90 % (median 85 %) and never past it. CLOSER_46
    alone writes more (87 %) and crosses the limit by 0.5 MB in the approach before retention
    frees anything. (From a cold start, 74-89 % and never past the limit; on real Kafka, from
    a cold start, as graceful slowdown's policy for four runs: 76-88 % of the bound, 1.1-2.2
    MB above the limit; the 10x step at 10 s 1.0 MB above it.)"""
    spread = Spread.of(ON_KAFKA["CLOSER_46 under the pace's ceiling (PaceCeiling)"])
    assert Spread.median(spread.shares) >= 0.83 and spread.lowest[0] > -200_000
    assert Spread.median(spread.backs) <= 5.0
    uncapped = Spread.of(ON_KAFKA["  without the early cap"])
    assert Spread.median(uncapped.shares) >= 0.84 and uncapped.lowest[0] > 0
    closer = Spread.of(ON_KAFKA["B paced closer, 4 + 6 s (CLOSER_46)"])
    assert Spread.median(closer.shares) > Spread.median(spread.shares)
    assert closer.lowest[0] < -300_000


PRINCIPALS_40 = kafka_load.principals(40)
"""`python -m bench.slowdown --principals 40`'s writers."""


def test_the_model_of_40_principals_is_bench_slowdowns():
    """40 producers (the six and 34 more, two per user), 22 users, 10 quota entities (the six's
    four and every third new user's own), together writing what demo.slowdown offers."""
    load = PRINCIPALS_40
    assert len(load.producers) == 40
    assert len({budget for _, budget, _, _, _ in load.producers}) == 22
    assert len(load.entities) == 10
    offered = len(load.producers) * load.rate / kafka_load.WIRE_PER_VALUE
    assert offered == pytest.approx(MANY_PRINCIPALS_RATE)


def test_the_warm_up_outlasts_the_step_window_so_the_references_are_the_steady_rates():
    """bench/slowdown starts from a steady load: with its warm-up the enforcer's references for
    the 40 principals at the first slowdown are what a load twice as long warmed up gives. With
    the 30 s warm-up it had before (the study's, `kafka_load.WARM_UP`), each reference was no
    higher than what its entity wrote a step window (kvq.enforcer.throttle.observed.rate.step
    .window, 30 s) before the episode, in the producers' first seconds: about a fifth lower
    here, less than half on real Kafka."""

    def references(warm_up: float) -> dict[str, float]:
        run = on_kafka(reading_the_forecast, writers=PRINCIPALS_40, warm_up=warm_up, **FREED)
        assert run.kafka is not None
        return run.kafka.load.references

    steady, longer = references(WARM_UP_SECONDS), references(2 * WARM_UP_SECONDS)
    assert steady.keys() == longer.keys()
    assert all(steady[e] == pytest.approx(longer[e], rel=0.03) for e in steady)
    short = references(kafka_load.WARM_UP)
    assert all(short[e] < 0.9 * steady[e] for e in steady)


@cache
def spread_on_kafka(name: str, forty: bool = False) -> Spread:
    """`ON_KAFKA[name]` with bench/slowdown's six producers or (`forty`) 40 principals
    (`PRINCIPALS_40`), run once per test process."""
    return Spread.of(ON_KAFKA[name], writers=PRINCIPALS_40 if forty else kafka_load.SIX)


def spread_of_40(name: str) -> Spread:
    return spread_on_kafka(name, forty=True)


def test_with_40_principals_the_level_on_sizes_stays_above_the_limit_as_the_totals_do():
    """`python -m bench.slowdown --principals 40`: each of the 40 writes about 8 kB/s into a
    64 kB buffer, eight seconds of its writes (each of the six's buffers holds under one second
    of its 75 kB/s), and Kafka lets a throttled producer's next request pass before muting it:
    what the producers buffer comes through seconds late, at every quota the level lowers. The
    level alone went past the limit in 21 of the 25 runs (and on real Kafka in both runs, by
    41 kB and 0.3 MB). Now, in the approach, while retention frees less than a tenth of the
    growth, the drops are also paced on what the volume fills by (the totals' depth), the margin
    is at least two of the largest bursts seen (a 5 s window's growth above the 30 s window's
    rate), and a restart keeps the peaks: above the limit in all 25 runs (0.18 MB at the least),
    75-83 % of the bound (81 % at the median), a producer 14 s without an acknowledgement at the
    median. The totals keep at least 0.5 MB above it at 73 % of the bound at the median."""
    sizes = spread_of_40("shipped: partition sizes, checked, response 14 s")
    assert sizes.lowest[0] > 0 and Spread.median(sizes.shares) >= 0.80
    assert Spread.median(sizes.stalls) < 15.0
    totals = Spread.of(ON_KAFKA["shipped: totals, checked, response 14 s"], writers=PRINCIPALS_40)
    assert totals.lowest[0] > 500_000 and Spread.median(totals.shares) >= 0.70
    assert Spread.median(sizes.shares) > Spread.median(totals.shares)


def test_foreseeing_retention_from_its_retention_time_acknowledges_40_principals_every_10_s():
    """D (`foresee_retention`): before retention frees anything, the shipped level paces its
    drops on what the volume fills by against the horizon, which ends the approach at factors of
    0.12-0.17, where a Java producer held at its request minimum sends its 16 KiB batch every
    2 / f s: 14 s without an acknowledgement at the median of the 25 runs, 21 s at the most
    (and on real Kafka 13.8-26.1 s, docs/policies.md). Knowing the topics' retention time, the
    level foresees when retention frees what is written now and spends the headroom evenly
    until then: its lowest factor about 0.3, no producer more than 9.1 s without an
    acknowledgement (8.3 s at the median), 81-86 % of the bound (85 % at the median, the shipped
    level 81 %), above the limit in every run (0.34 MB at the least), every quota entity back
    at its rate 4.6 s after the space was freed at the median (6.2 s at the most). And a 10x
    step 10 s into the load, which the shipped level lets cross the limit in 11 of the 25 runs,
    stays above it in all: the step's growth counts in the rate to hold at once. What it costs:
    with bench/slowdown's six producers it keeps more headroom than it needs (1.35 MB at the
    least) at 78 % of the bound (the shipped level 83 %), foreseeing every deletion a segment
    later than it may come. A forecast that assumes deletions sooner than Kafka makes them
    crosses the limit: with 3 s for the segment and the check (`lag`, of 6), the 40 went
    past it with loops of 2-4 s (by 0.24 MB at the most) and producers stalled 88 s."""
    foreseen = Spread.of(foresee_retention, phases=ONE_PHASE, writers=PRINCIPALS_40)
    shipped = spread_of_40("shipped: partition sizes, checked, response 14 s")
    assert foreseen.lowest[0] > 0 and foreseen.stalls[-1] < 10.0 < shipped.stalls[-1]
    assert Spread.median(foreseen.shares) >= Spread.median(shipped.shares) + 0.02
    assert Spread.median(foreseen.backs) <= 5.0
    assert all(lowest > 0 for lowest in step_lowest(foresee_retention, 10.0, ONE_PHASE))
    six = Spread.of(foresee_retention, phases=ONE_PHASE)
    assert six.lowest[0] > 1_000_000 and Spread.median(six.shares) < 0.80
    too_soon = partial(foresee_retention, lag=3.0)
    assert Spread.of(too_soon, phases=ONE_PHASE, writers=PRINCIPALS_40).lowest[0] < 0


FIVE_SECONDS_AHEAD = tuple(range(5, 85, 5))
"""Times ahead a forecast from Kafka gives (`exporter.retention_forecast_source`), 5 s apart up
to the load's retention time after the factor takes effect."""


def test_foreseeing_retention_at_times_5_s_apart_holds_40_principals_as_every_second_does():
    """D as Kafka can give it: the deletions foreseen by a few times ahead of each poll
    (ListOffsets by timestamp, two requests per time ahead), each known to hold from its time
    on and none in between. 5 s apart (16 times), the 40 get 80-84 % of the bound (82 % at
    the median, D 85 %), above the limit in every run (0.88 MB at the least), no producer more
    than 9.2 s without an acknowledgement, and the 10x step stays above it. 15, 30 and 60 s
    ahead cost 12 points (70-71 %): between two times the forecast counts none of what is
    deleted, and spends the headroom as if nothing would be until the next."""
    sampled = partial(foresee_retention, aheads=FIVE_SECONDS_AHEAD)
    forty = Spread.of(sampled, phases=ONE_PHASE, writers=PRINCIPALS_40)
    assert forty.lowest[0] > 0 and forty.stalls[-1] < 10.0
    assert Spread.median(forty.shares) >= 0.80
    assert all(lowest > 0 for lowest in step_lowest(sampled, 10.0, ONE_PHASE))
    coarse = partial(foresee_retention, aheads=(15, 30, 60))
    coarse_forty = Spread.of(coarse, phases=ONE_PHASE, writers=PRINCIPALS_40)
    assert Spread.median(coarse_forty.shares) < Spread.median(forty.shares) - 0.05


def test_the_shipped_policy_reading_kafkas_retention_forecast_stalls_less():
    """The shipped level on the partitions' sizes with Kafka's forecast of what retention frees
    by each of the next two minutes' 5 s (`reading_the_forecast`, `foreseen_reach`; its margin 4
    s of the window's rate and one burst, its rises held on 4 s of the peak, its drops paced
    only from where a paced descent holds). The 40: 77-83 % of the bound (81 % at the median,
    without the forecast 81 %), above the limit in every run (1.12 MB at the least), no producer
    more than 9.9 s without an acknowledgement (without: 20.8 s). The six: 78-86 % (84 %;
    without: 83 %), 0.74 MB at the least, 9.5 s at the most. A 10x step after the first
    slowdown stays above the limit in every run (0.09 MB at the least), and one 10 s into the
    load, which the level without the forecast lets cross the limit in 11 of the 25 runs (by
    1.36 MB), in every run too (1.54 MB at the least). The level
    expects its factor times the peak, and the 40 write about 1.4 times that (each quota held at
    its request minimum): it spends the headroom early in the approach; an enforcer calibrated to
    write what the level expects wrote less (docs/policy-study.md)."""
    name = "shipped: partition sizes and Kafka's retention forecast"
    forty, shipped = (
        spread_of_40(name),
        spread_of_40("shipped: partition sizes, checked, response 14 s"),
    )
    assert forty.lowest[0] > 0 and forty.stalls[-1] < shipped.stalls[-1]
    assert Spread.median(forty.shares) >= Spread.median(shipped.shares) - 0.02
    six = spread_on_kafka(name)
    assert six.lowest[0] > 0 and Spread.median(six.shares) >= 0.80 and six.stalls[-1] < 10.0
    assert all(lowest > 0 for lowest in step_lowest(reading_the_forecast, STEPS[1]))
    assert all(lowest > 0 for lowest in step_lowest(reading_the_forecast, STEPS[0]))


def test_the_forecast_falling_on_the_windows_margin_and_rising_on_the_peaks_rides_closer():
    """The shipped forecast's level falls on 4 s of the window's rate (the margin that let the
    40 ride at 86-88 % on real Kafka, and let the six cross the limit after a rise) and rises
    past what 4 s of the peak allows only to the lowest that level was over the last 14 s
    (`GracefulSlowdown.RISE_HOLD_SECONDS`). Against the peak's margin alone (`PeakMargin`, as
    shipped before), both with their drops paced from wherever the factor is
    (`PacedFromTheStep`, as they were then): the 40 at 77-84 % of the bound (81 % at the
    median; 79 %), above the limit in every run (0.95 MB at the least), no producer more than
    10.0 s without an acknowledgement (13.7 s); the six at 79-86 % (84 %; 82 %), 0.72 MB at
    the least, 8.2 s at the most. A 10x step 10 s in crosses as the peak's margin does (in 1
    of 25 runs, by 0.12 MB); after the first slowdown it stays above (0.77 MB at the least).
    The window's margin alone (`WindowMargin`) rides as close in the model, but the model's
    producers do not catch up as Kafka's Java ProducerPerformance does (the six's crossing on
    real Kafka did not reproduce here)."""
    shipped = "  drops paced from wherever the factor is (PacedFromTheStep)"
    peak = "  on 4 s of the peak alone (PeakMargin)"
    forty, forty_peak = spread_of_40(shipped), spread_of_40(peak)
    assert forty.lowest[0] > 0 and forty.stalls[-1] <= 10.0 < forty_peak.stalls[-1]
    assert Spread.median(forty.shares) >= Spread.median(forty_peak.shares) + 0.015
    six, six_peak = spread_on_kafka(shipped), spread_on_kafka(peak)
    assert six.lowest[0] > 0 and six.stalls[-1] < 10.0
    assert Spread.median(six.shares) >= Spread.median(six_peak.shares) + 0.015


def test_foreseeing_retention_a_step_before_the_first_slowdown_is_not_met_with_paced_drops():
    """The 10x step 10 s into the load, with Kafka's forecast read: the step leaves the factor at
    0.4-0.8, far above a level that foresees nothing freed for most of a minute. Paced down from
    there (`PacedFromTheStep`), the volume crossed the limit in 1 of the 25 runs (by 0.12 MB)
    and, every broker measuring quotas over 3 s (the recommended quota.window.num), in 10 (by
    2.1 MB; on real Kafka in three runs of three, by 0.4-0.8 MB). Held at once no higher than
    the factor from which a paced descent fits in the headroom above the level's margin plus
    what retention frees over the next 20 s (`GracefulSlowdown.paced_reach`): above it in every
    run (1.54 MB at the least; 0.28 MB with the 3 s window)."""
    assert all(lowest > 0 for lowest in step_lowest(reading_the_forecast, STEPS[0]))
    three = {"quota_window_samples": 3}
    assert all(lowest > 0 for lowest in step_lowest(reading_the_forecast, STEPS[0], **three))
    paced = step_lowest(lambda: forecast_policy(PacedFromTheStep), STEPS[0], **three)
    assert sum(lowest < 0 for lowest in paced) >= 5


def test_spending_what_the_forecast_leaves_sooner_leaves_the_approach_short():
    """`SpendSooner`: the forecast's level (on the peak's margin, `PeakMargin`) spends what it
    leaves at a rate falling by e every 20 s, not evenly until retention frees what is written
    now.
    Before retention reaches the load's segments nothing is foreseen freed, and what is spent
    early is missing at the end of the approach: the 40 crossed the limit (0.66 MB past it at
    the most) and a producer waited 28.5 s for an acknowledgement (13.7 s spent evenly), for
    83 % of the bound at the median (79 %)."""
    sooner = spread_of_40("  spends what is left over 20 s (SpendSooner)")
    shipped = spread_of_40("  on 4 s of the peak alone (PeakMargin)")
    assert sooner.lowest[0] < 0 < shipped.lowest[0]
    assert sooner.stalls[-1] > shipped.stalls[-1] + 10.0


def test_foreseeing_retention_a_check_later_holds_checks_30_s_apart_off_the_limit():
    """Kafka checks retention every `log.retention.check.interval.ms`: between two checks it
    frees nothing. With checks 30 s apart the shipped level on the sizes crosses the limit in
    all 25 runs (`test_on_kafkas_quotas_retention_checks_seconds_apart_cost_the_partition_sizes
    _their_lead`); D, its deletions foreseen a segment and a check later (`lag`), stays above it
    in every run (0.61 MB at the least) at 58 % of the bound, no producer more than 6.2 s
    without an acknowledgement (with checks 10 s apart: 72 %, 1.37 MB, 5.8 s)."""
    apart = Spread.of(
        partial(foresee_retention, lag=kafka_load.SEGMENT + 30.0),
        phases=ONE_PHASE,
        retention_check=30.0,
    )
    assert apart.lowest[0] > 0 and apart.stalls[-1] < 10.0


def test_with_40_principals_buffering_under_a_second_the_level_on_sizes_stays_above_the_limit():
    """`python -m bench.slowdown --principals 40 --producer-buffer 6`: each librdkafka producer
    buffers 6 kB, under a second of its 8 kB/s (the Java producers 16 KiB, their batch). Above
    the limit in every run (0.31 MB at the least), 79 % of the bound at the median (84 % before
    the changes above: the margin of two bursts costs them). On real Kafka, before those
    changes, it stayed above the limit in three runs (by 0.8 MB, 0.9 MB and 8 kB) at 83-85 %."""
    spread = Spread.of(
        ON_KAFKA["shipped: partition sizes, checked, response 14 s"],
        writers=kafka_load.principals(40, buffer_kb=6),
    )
    assert spread.lowest[0] > 0 and Spread.median(spread.shares) >= 0.78


def test_on_kafkas_quotas_a_step_before_the_first_slowdown_is_held_by_references_from_before_it():
    """The 10x step 10 s into the load: the first slowdown comes seconds after it, and the
    enforcer's observed-rate references taken then hold the step's rate: until the policy's
    first restart the volume crosses its limit in most of the 25 runs (loops of 2-6 s), the
    shipped policy's and the pace's ceiling's alike. With the step window
    (kvq.enforcer.throttle.observed.rate.step.window, `before_step`) the references are what
    the entities wrote before the step, and the first slowdown holds it in every run. What
    crosses then is the restart: retention deleting the step's segments a retention time later
    frees a tenth of the scenario's small volume within one poll, the factor goes back to 1.0
    and the stepped load crosses the limit (most of the runs)."""
    for name in ("shipped: totals, checked, response 14 s", "CLOSER_46 under the pace's ceiling"):
        make = next(m for n, m in ON_KAFKA.items() if n.startswith(name))
        unguarded = step_restarts(make, 10.0, step_window=0.0)
        assert sum(before < 0 for before, _ in unguarded) >= 10, name
        guarded = step_restarts(make, 10.0)
        assert all(before > 0 for before, _ in guarded), name


RETENTION_CHECKS = (1.0, 5.0, 10.0, 15.0, 20.0, 30.0)
"""Seconds between Kafka's retention checks (log.retention.check.interval.ms): bench/slowdown's
1 s, up to half its retention time."""


def check_table() -> list[str]:
    """The shipped policy, on the totals and with the partitions' sizes, over DELAYS x PHASES
    with Kafka's retention checks RETENTION_CHECKS apart: the share over 150 s (lowest, median,
    highest), the lowest headroom (lowest, median), in how many runs it crossed the limit, the
    longest stall (median, most), every entity back (median, most)."""
    rows = [
        f"{'policy':48} {'check':>5} {'150 s: min  med  max':>14} {'lowest   med':>12} "
        f"{'past':>5} {'stall':>5} {'most':>5} {'back':>5} {'most':>5}"
    ]
    for name in ("shipped: totals, checked", "shipped: partition sizes, checked"):
        make = next(m for n, m in ON_KAFKA.items() if n.startswith(name))
        for check in RETENTION_CHECKS:
            spread = Spread.of(make, retention_check=check)
            shares, lowest = spread.shares, spread.lowest
            rows.append(
                f"{name:48} {check:4.0f}s {shares[0]:4.0%} {Spread.median(shares):4.0%} "
                f"{shares[-1]:4.0%} {lowest[0] / 1e6:6.2f} {Spread.median(lowest) / 1e6:5.2f} "
                f"{sum(b < 0 for b in lowest):2d}/{len(lowest)} "
                f"{Spread.median(spread.stalls):5.1f} {spread.stalls[-1]:5.1f} "
                f"{Spread.median(spread.backs):5.1f} {spread.backs[-1]:5.1f}"
            )
    return rows


def test_on_kafkas_quotas_retention_checks_seconds_apart_cost_the_partition_sizes_their_lead():
    """bench/slowdown's broker checks retention every second; Kafka's default is every 5
    minutes. Between two checks retention frees nothing, then a chunk: with the partitions'
    sizes read, the level reads what retention freed over the last 30 s (believed at once when
    it falls over the last 10 s), so checks 5 s apart still hold the volume above its limit,
    but checks 30 s apart (half the retention time; the room filling in about 50 s) leave
    the level riding on chunks, and it crosses the limit in most runs, as the totals do: the
    floor and what the producers buffered fill the room between two checks. Nine of the 25
    runs (`check_table` has them all)."""
    runs = {"delays": (2.0, 4.0, 6.0), "phases": (0, 2, 4)}
    sizes = ON_KAFKA["shipped: partition sizes, checked, response 14 s"]
    totals = ON_KAFKA["shipped: totals, checked, response 14 s"]
    assert Spread.of(sizes, retention_check=5.0, **runs).lowest[0] > 0
    for make in (sizes, totals):
        lowest = Spread.of(make, retention_check=30.0, **runs).lowest
        assert sum(b < 0 for b in lowest) >= 6


if __name__ == "__main__":
    print("\n".join(kafka_table(*(a for a in sys.argv[1:] if not a.startswith("--")))))
    if "--checks" in sys.argv:
        print("\n".join(check_table()))
    if "--smooth" in sys.argv:
        print("\n".join(table()))
