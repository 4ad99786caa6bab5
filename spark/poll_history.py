"""The per-poll state of one cluster, on the driver: one small row per archive line.

Mirrors `kvq.model.throttle_factor_source.ThrottleFactorSource` for everything that is one value
per poll (the per-volume work, 99% of the rows, runs in Spark: `spark.volume_history`):
- observations are ordered by (time, file, line); `sseq` numbers the successes (0: none yet);
- every success knows the first grid index it is visible at (`k`) and the first success at or
  after its time + validity (`expiry`: evicts a volume last described there) and + hold (`hold`);
- a success's factor is the policy's over its merged set (`cluster_factor`): the smallest factor
  of the volume runs throttling at it (`spark.volume_history.events`), 1.0 when none is;
- at grid time t, with s the last success <= t (or the start time, the first observation's time,
  before any): the fallback applies when t > s + validity;
- the fallback counter at t = gaps between consecutive successes (the first one starting at the
  start time) longer than validity, plus 1 while the fallback applies at t;
- active brokers come from the latest observation not failed at describe_cluster.

It is one sequential pass (a cluster's polls are a total order), as the exporter's own loop: one
small row per poll, so the driver holds it easily (a month of polls every minute is 43k rows).
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from kvq.model.observation import STAGE_DESCRIBE_CLUSTER, STAGE_DESCRIBE_LOG_DIRS
from kvq.model.throttle_factor_policy import UNTHROTTLED, cluster_factor
from spark.evaluation_grid import EvaluationGrid, index_at_or_after, utc_text
from spark.openmetrics_text import MAX_EPOCH_SECONDS

CLOCK_SKEW = 86_400.0
"""How far past this machine's clock a poll time may lie (another host's clock, set wrong by
hours): a day. Later times cannot have been polled yet."""


@dataclass(frozen=True, slots=True)
class FallbackRules:
    validity: float
    fallback_factor: float
    start_time: float
    """The first observation's time: the initial factor 1.0 is valid from here."""
    checking: bool = True
    """False with storage.check.interval=PT0S: factor 1.0 for good, never a fallback."""
    hold: float = 0.0
    """The violation hold (kvq.departed.broker.violation.hold), seconds."""


@dataclass(frozen=True, slots=True)
class PollLine:
    """One valid archive line of the cluster, its log dirs already counted (a success's)."""

    time: float
    file: str
    line: int
    ok: bool
    stage: str | None = None
    brokers: int | None = None
    """How many active brokers it names; None when DescribeCluster failed."""
    observed: int = 0
    violating: int = 0
    unusable_error: int = 0
    unusable_unknown_size: int = 0


def impossible_time(time: float, now: float) -> str | None:
    """Why `time` cannot be when a poll completed (None when it can): a millisecond time, a time
    after now (plus CLOCK_SKEW) or before 1970 (no Prometheus timestamp). One such line would
    stretch the grid over years that no poll observed. A possible time years before the rest (a
    clock set back) is bounded by the grid's size instead (`EvaluationGrid.over`): tests and
    replays use small times, and nothing but the span makes such a time wrong."""
    if math.isnan(time):
        return "is not a number"
    if time >= MAX_EPOCH_SECONDS:
        return "looks like milliseconds"
    if time > now + CLOCK_SKEW:
        return f"({utc_text(time)}) is in the future: this machine's clock says {utc_text(now)}"
    if time < 0:
        return "is before 1970, which no Prometheus timestamp can hold"
    return None


@dataclass(frozen=True, slots=True)
class Success:
    """A success as the per-volume work needs it (`spark.volume_history`)."""

    sseq: int
    file: str
    line: int
    k: int
    expiry_sseq: int | None
    expiry_k: int | None
    hold_sseq: int | None
    hold_k: int | None
    time: float


@dataclass(frozen=True, slots=True)
class VolumeDeltas:
    """What the volumes' runs change at one success, summed (the rare events of the runs)."""

    cached: int = 0
    cached_violating: int = 0
    held: int = 0
    hold_expired: int = 0
    evicted: int = 0
    throttling: Mapping[float, int] = field(default_factory=dict)
    """How many more volume runs ask for each factor below 1.0 (`spark.volume_history.events`)."""

    def __add__(self, other: VolumeDeltas) -> VolumeDeltas:
        throttling = dict(self.throttling)
        for factor, count in other.throttling.items():
            throttling[factor] = throttling.get(factor, 0) + count
        return VolumeDeltas(
            self.cached + other.cached,
            self.cached_violating + other.cached_violating,
            self.held + other.held,
            self.hold_expired + other.hold_expired,
            self.evicted + other.evicted,
            {factor: count for factor, count in throttling.items() if count},
        )

    @property
    def factor(self) -> float:
        """The cluster's factor while these are the runs throttling (as a running total)."""
        return cluster_factor(factor for factor, count in self.throttling.items() if count > 0)


@dataclass(frozen=True, slots=True)
class GridState:
    """Every global value the exporter publishes, at grid time `t`."""

    t: int
    throttle_factor: float
    fallback_total: int
    fallback_active: int
    violated_total: int
    evictions_total: int
    active_brokers: int
    active_log_dirs: int
    cached_log_dirs: int
    held_log_dirs: int
    hold_expired: int
    unusable_error: int
    unusable_unknown_size: int
    failed_cluster: int
    failed_dirs: int
    last_success: float | None


@dataclass(frozen=True, slots=True)
class _SuccessState:
    time: float
    factor: float
    violated_total: int
    evictions_total: int
    closed_fallbacks: int
    observed: int
    cached: int
    held: int
    hold_expired: int
    unusable_error: int
    unusable_unknown_size: int


class PollHistory:
    """A cluster's polls in archive order, numbered; its successes; its state on the grid."""

    def __init__(self, lines: list[PollLine], rules: FallbackRules, step: int) -> None:
        self.rules = rules
        self.step = step
        self.lines = sorted(lines, key=lambda p: (p.time, p.file, p.line))
        self._successes = [p for p in self.lines if p.ok]
        self._success_times = [p.time for p in self._successes]

    def successes(self) -> Iterator[Success]:
        """Every success, numbered from 1, with its grid index, expiry and hold ends."""
        for index, poll in enumerate(self._successes):
            expiry = self._first_success_from(poll.time + self.rules.validity)
            hold = self._first_success_from(poll.time + self.rules.hold)
            k = self._k(poll.time)
            yield Success(index + 1, poll.file, poll.line, k, *expiry, *hold, poll.time)

    def _k(self, time: float) -> int:
        return index_at_or_after(time, self.step)

    def _first_success_from(self, time: float) -> tuple[int | None, int | None]:
        """(sseq, k) of the first success at or after `time`, (None, None) when none."""
        index = bisect_left(self._success_times, time)
        if index == len(self._successes):
            return None, None
        return index + 1, self._k(self._successes[index].time)

    def _success_states(self, deltas: Mapping[int, VolumeDeltas]) -> list[_SuccessState]:
        rules = self.rules
        states: list[_SuccessState] = []
        total = VolumeDeltas()
        factor = total.factor
        violated = evictions = closed = 0
        previous = rules.start_time
        for sseq, poll in enumerate(self._successes, start=1):
            change = deltas.get(sseq)
            if change is not None:  # rare: most successes change no run (summed only then)
                total = total + change
                factor = total.factor
                evictions += change.evicted
            violating = poll.violating + total.cached_violating
            violated += violating
            closed += int(rules.checking and poll.time > previous + rules.validity)
            previous = poll.time
            states.append(
                _SuccessState(
                    poll.time,
                    factor,
                    violated,
                    evictions,
                    closed,
                    poll.observed,
                    total.cached,
                    total.held,
                    total.hold_expired,
                    poll.unusable_error,
                    poll.unusable_unknown_size,
                )
            )
        return states

    def grid_states(
        self, grid: EvaluationGrid, deltas: Mapping[int, VolumeDeltas]
    ) -> Iterator[GridState]:
        """The state at every emitted grid time: what the last observation <= t left."""
        states = self._success_states(deltas)
        polls = _PollsSoFar(self.lines)
        for index in grid.indexes():
            t = grid.time(index)
            polls.advance_to(t)
            yield self._grid_state(t, states[polls.sseq - 1] if polls.sseq else None, polls)

    def _grid_state(self, t: int, state: _SuccessState | None, polls: _PollsSoFar) -> GridState:
        """The state at `t`, `state` being the last success's at or before it (None: none yet)."""
        rules = self.rules
        valid_from = state.time if state else rules.start_time
        fallback = rules.checking and t > valid_from + rules.validity
        if fallback:
            factor = rules.fallback_factor
        elif rules.checking and state:
            factor = state.factor
        else:
            factor = UNTHROTTLED
        last = state or _NO_SUCCESS_YET
        return GridState(
            t,
            factor,
            last.closed_fallbacks + fallback,
            int(fallback),
            last.violated_total,
            last.evictions_total,
            polls.active_brokers or 0,
            last.observed,
            last.cached,
            last.held,
            last.hold_expired,
            last.unusable_error,
            last.unusable_unknown_size,
            polls.failed_cluster,
            polls.failed_dirs,
            state.time if state else None,
        )


_NO_SUCCESS_YET = _SuccessState(0.0, UNTHROTTLED, 0, 0, 0, 0, 0, 0, 0, 0, 0)
"""The counts before the first success: all zero."""


@dataclass(slots=True)
class _PollsSoFar:
    """What the polls at or before a grid time add up to, advanced from one grid time to the
    next (a single pass over the polls in archive order)."""

    lines: list[PollLine]
    position: int = 0
    sseq: int = 0
    """The successes so far (the last one's number; 0: none yet)."""
    failed_cluster: int = 0
    failed_dirs: int = 0
    active_brokers: int | None = None
    """As the latest poll that described the cluster counted them."""

    def advance_to(self, t: float) -> None:
        while self.position < len(self.lines) and self.lines[self.position].time <= t:
            poll = self.lines[self.position]
            self.sseq += poll.ok
            self.failed_cluster += poll.stage == STAGE_DESCRIBE_CLUSTER
            self.failed_dirs += poll.stage == STAGE_DESCRIBE_LOG_DIRS
            if poll.brokers is not None:
                self.active_brokers = poll.brokers
            self.position += 1
