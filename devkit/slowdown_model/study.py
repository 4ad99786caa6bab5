"""A model-only design study (issue 42): graceful-slowdown against policy variants that read what
DescribeLogDirs v4 can also tell the exporter: each partition replica's size in a log dir.

bench/slowdown's broker 0 second by second, as `kafka_retention_loop` in
tests/kvq/model/test_graceful_slowdown.py (the same load, enforcer and retention), with the load
spread over the scenario's eight replicas on broker 0 (four topics, two partitions each), each
rolling its 5 s segments at its own phase. Per policy: the share of the bound
(`demo.slowdown.at_the_limit`: the room above the limit refilled at the rate retention frees it)
written over the 150 s episode and over 600 s, the lowest headroom, the swing of the factor, and
the lowest headroom under a 10x load step. `python -m devkit.slowdown_model.study` prints the
table (docs/policy-study.md has it).

The variants live here only. Variant B is what the shipped policy does once the exporter reads
the partitions' sizes (`kvq.throttle.slowdown.partition.sizes`): `graceful(grown=True)` runs the
real `GracefulSlowdown` on readings with grown bytes. tests/kvq/model/test_slowdown_study.py
holds the settings users can choose to the issue's goals; `python -m bench.policy_study`
measures the variants the shipped policy no longer runs against them
(docs/results/policy_study.md).
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

from demo.slowdown import at_the_limit
from devkit.slowdown_model import kafka_load
from kvq.model.graceful_slowdown import MIN_ELAPSED_SECONDS, GracefulSlowdown
from kvq.model.limits import MinAvailableRatio
from kvq.model.policy_expressions import PLAIN, Expressions
from kvq.model.policy_run import PolicyRun
from kvq.model.retention_forecast import AHEAD_SECONDS
from kvq.model.slowdown_depth import depth_of_drop, depth_sharing
from kvq.model.throttle_factor_policy import VolumeReading
from kvq.model.volume import Volume

KAFKA_TOTAL = kafka_load.TOTAL
"""bench/slowdown's broker 0 log dir, its limit and its available bytes at the start, as the
first model (`scenario` without Kafka's quotas) and test_graceful_slowdown.py name them."""
KAFKA_LIMIT = kafka_load.LIMIT
KAFKA_START = kafka_load.START


def retain(segments, t, written, segment=5.0, retention=60.0):
    """Kafka's log after `written` bytes at second `t`, as in `UnifiedLog.
    deleteRetentionMsBreachedSegments`: the active segment rolls when a write comes `segment` s
    after its first; a segment is deleted, at the check every second, once its newest write is
    more than `retention` s old. `segments`: [first write, newest write, bytes]. The first
    model's, a check every second (`kafka_load.retain` is the one with Kafka's quotas)."""
    if not segments or t - segments[-1][0] >= segment:
        segments.append([t, t, 0.0])
    segments[-1][1:] = [t, segments[-1][2] + written]
    return [s for s in segments[:-1] if t - s[1] <= retention] + segments[-1:]


KAFKA_FULL = 300e3
"""The bytes a second bench/slowdown's load puts on broker 0 at its full rate."""


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

    def growth_window(  # type: ignore[override]  # B's window: read from the kept readings
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
    fifth every 5 s. Its margin is 4 s, as then (and for the variants below)."""

    FORESEEN_MARGIN_SECONDS: ClassVar[float] = 4.0

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


@dataclass(frozen=True, slots=True)
class PacedOnMoreThanThePeak(GracefulSlowdown):
    """The forecast's level with its drops paced only from a factor from which a descent of
    `PEAK_TIMES` times the peak's share would hold (`GracefulSlowdown.paced_reach`): after a
    long hold, producers buffering more than a few seconds wrote more than the factor's share
    of the peak once it rose."""

    PEAK_TIMES: ClassVar[float] = 1.6

    def paced_reach(self, reading: VolumeReading, peak: Any, ops: Expressions) -> Any:
        return GracefulSlowdown.paced_reach(self, reading, peak * self.PEAK_TIMES, ops)


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
        assert wanted is not None, "a paced controller decides at every call"
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
    return smooth_scenario(controller, delay, load_step, duration, sizes_every, calls_every)


def smooth_scenario(
    controller: Controller,
    delay: float,
    load_step: tuple[float, float] | None,
    duration: float,
    sizes_every: float,
    calls_every: float,
) -> Outcome:
    """`scenario` without Kafka's quotas: the first model's smooth load (`scenario` tells it)."""
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
            grew, fell = kafka_load.growth_and_drops(sizes, read)
            grown, dropped, read = grown + grew, dropped + fell, sizes
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
    every: dict[str, Any] = {"sizes_every": sizes_every, "calls_every": calls_every}
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
    every: dict[str, Any] = {"sizes_every": 1.0, "calls_every": 1.0, "kafka": True}
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


PRINCIPALS_40 = kafka_load.principals(40)
"""`python -m bench.slowdown --principals 40`'s writers."""


@cache
def spread_on_kafka(name: str, forty: bool = False) -> Spread:
    """`ON_KAFKA[name]` with bench/slowdown's six producers or (`forty`) 40 principals
    (`PRINCIPALS_40`), run once per test process."""
    return Spread.of(ON_KAFKA[name], writers=PRINCIPALS_40 if forty else kafka_load.SIX)


def spread_of_40(name: str) -> Spread:
    return spread_on_kafka(name, forty=True)


FIVE_SECONDS_AHEAD = tuple(range(5, 85, 5))
"""Times ahead a forecast from Kafka gives (`exporter.retention_forecast_source`), 5 s apart up
to the load's retention time after the factor takes effect."""


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


if __name__ == "__main__":
    print("\n".join(kafka_table(*(a for a in sys.argv[1:] if not a.startswith("--")))))
    if "--checks" in sys.argv:
        print("\n".join(check_table()))
    if "--smooth" in sys.argv:
        print("\n".join(table()))
