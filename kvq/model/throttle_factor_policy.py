"""ThrottleFactorPolicy: how each volume's state becomes the throttle factor producers are held to.

A policy is declared once and evaluated in two places: on plain numbers by the exporter, one
observation at a time (`kvq.model.policy_run.PolicyRun`, inside
`kvq.model.throttle_factor_source`), and on Spark Columns by the backfill, every success of the
archive at once (`spark.volume_history`). So its methods use only arithmetic, comparisons,
`&`/`|` and the operations of the `Expressions` they are handed (`choose`, `least`, `greatest`,
`sqrt`, `known`, `or_zero`: `kvq.model.policy_expressions`), never an `if` on their inputs, as
`Limit.is_violated` does.

Each judged volume (observed now, or cached) asks for a factor in [0, 1]; the cluster's factor is
the smallest of them, 1.0 without any volume (`cluster_factor`): the volume closest to its limit
decides. A cached volume keeps the factor it got when it was last observed. A policy that needs
a volume's history says how many previous usable readings it reads (`history`; most recent
first, fewer while the volume has fewer: a declaration may branch on `len(previous)`), which
`PolicyRun` keeps in the exporter and windows over the volume's descriptions give in the
backfill. A policy that reads more of a volume's past than a few readings declares windows over
time instead (`growth_windows`, `looks_back`: `ReadingWindows` on the reading it is asked
about): sums and picks over however many readings a window holds, which the backfill's windows
over time compute in one pass (a declaration over N previous readings is evaluated once per
count of them it may see: N^2 in the backfill's plan). A policy that `accumulates` also reads
a per-volume *depth*: the running sum of its `depth_step` increments since the volume's last
restart, never below its held floor (0 at the least; `depth_floor`, which reads the volume's
*peaks*: the running maxima of its `peak_sample`s since the last restart, one per `peaks`,
forgetting a sample after some calm (`calm_seconds`);
`kvq.model.depth_accumulator` in the exporter). All of it is running sums, minimums and maximums
since the last restart, which Spark's windows compute in the same order as the exporter, so both
give the same bits. Both branches of `choose` are evaluated on numbers: a declaration keeps each
one defined (divide by `greatest(elapsed, 1.0)`, not by `elapsed`).

The policies: `kvq.model.stop_on_violation.StopOnViolation` (the proposal's) and
`kvq.model.graceful_slowdown.GracefulSlowdown`; `kvq.settings.config.Config.policy` picks one.
The limit stays the limit whatever the policy: violations are counted and published
(`log_dir_violating`, `limit_violated_total`) and decide the violation hold.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar, NamedTuple, Protocol

from kvq.model.limits import Limit
from kvq.model.policy_expressions import Expressions
from kvq.model.volume import Volume

THROTTLED = 0.0
UNTHROTTLED = 1.0
WINDOW_SLACK_SECONDS = 1.0
"""How much older than its `seconds` the reading a growth window begins with may be
(`GrowthWindow`): polls come tens to hundreds of milliseconds early or late, so the reading a
window of whole polls should begin with is as often just outside it as inside. Begun at the
inside one, a 30 s window of 5 s polls read 25 s or 30 s by chance: its rate swung by a sixth, a
10 s window's by half, and a load step went unmet for two polls when the window fell short of
the 25 s a step is judged over (`GracefulSlowdown.stepped`). A whole second, so that the
backfill's windows over time bound it alike."""


class GrowthWindow(NamedTuple):
    """What a volume's partitions grew by over the readings of its last `seconds` (one of the
    policy's `growth_windows`): from the reading nearest its edge (the earliest usable reading
    at most that old, or the one before it if that is nearer and at most `WINDOW_SLACK_SECONDS`
    older: the polls' jitter), back to the
    latest whose growth was not read (the growth since it is whole), to this one. `grown`: the
    sum of the growth of the readings after that start (whole bytes: the same on both sides);
    `start_time`, `start_used`: the start's time and used bytes. With no earlier reading in
    the window, the start is the previous reading and `grown` this one's own growth (0 where
    not read); with no previous reading, the start is this one."""

    grown: Any
    start_time: Any
    start_used: Any


class EarlierReading(NamedTuple):
    """The latest usable reading at or before `seconds` before this one (one of the policy's
    `looks_back`), else the volume's earliest: its time and used bytes."""

    time: Any
    used_bytes: Any


class ReadingWindows(NamedTuple):
    """What a policy reads of a volume's readings by time, beside its `history` previous ones:
    one `GrowthWindow` per `growth_windows` and one `EarlierReading` per `looks_back`, in the
    policy's order. Aggregates both sides compute exactly and cheaply, however many readings a
    window holds: the exporter from the readings it keeps (`kvq.model.reading_trail`), the
    backfill with windows over time (`spark.volume_history`)."""

    growth: tuple[GrowthWindow, ...] = ()
    earlier: tuple[EarlierReading, ...] = ()


class VolumeReading(NamedTuple):
    """One volume at one successful observation, as a policy reads it: plain numbers in the
    exporter, Spark Columns in the backfill. `time`: the observation's, seconds since the epoch;
    `available_ratio` as `Volume.available_ratio` (0.0 for a volume of 0 bytes); `grown_bytes`:
    what its partition replicas grew by since the reading before (`Volume.grown_bytes`; None, or
    null, when not read: a declaration tests it with `Expressions.known`); `windows`: the
    aggregates over the volume's readings by time the policy declares (`ReadingWindows`; only on
    the reading a policy is asked about, not on its previous ones). A tuple: the exporter makes
    one per volume and poll."""

    time: Any
    total_bytes: Any
    available_bytes: Any
    available_ratio: Any
    grown_bytes: Any = None
    windows: ReadingWindows = ReadingWindows()
    retention_freed: Any = None
    """What retention frees in it by each of `kvq.model.retention_forecast.AHEAD_SECONDS` at
    least (`Volume.retention_freed`; -1 past its shortest retention time), or None."""
    cluster_freed: Any = False
    """Whether space was freed on a volume of the cluster (its depth restarted, `depth_step`:
    this one's or another's) at this observation or within the policy's `freed_grace_seconds`
    before it: the quotas were just lifted, and what the producers buffered while throttled
    comes through on every volume. Only on the reading a policy is asked about."""

    @classmethod
    def of(cls, volume: Volume, time: float) -> VolumeReading:
        """The exporter's reading of `volume` observed at `time`."""
        return cls(
            time,
            volume.total_bytes,
            volume.available_bytes,
            volume.available_ratio,
            volume.grown_bytes,
            retention_freed=volume.retention_freed,
        )


def used_bytes(reading: VolumeReading) -> Any:
    """Bytes in use on the volume."""
    return reading.total_bytes - reading.available_bytes


class ThrottleFactorPolicy(Protocol):
    """A rule from one volume's reading (and, if it needs them, its previous ones and its depth)
    to the factor that volume asks for. See the module's docstring for what a declaration may
    use."""

    @property
    def limit(self) -> Limit: ...

    history: ClassVar[int]
    """How many previous usable readings of a volume the methods read (0: none; the backfill then
    needs no success times and no windows)."""

    growth_windows: ClassVar[tuple[float, ...]]
    """The windows, in seconds, over which the policy reads what a volume's partitions grew by
    (`ReadingWindows.growth`); whole seconds (the backfill's windows over time take whole
    offsets)."""

    looks_back: ClassVar[tuple[float, ...]]
    """How far back, in whole seconds, the policy reads a volume's earlier readings by time
    (`ReadingWindows.earlier`)."""

    accumulates: ClassVar[bool]
    """Whether `volume_factor` reads the volume's depth (`depth_step` feeds it)."""

    reads_forecast: ClassVar[bool]
    """Whether the methods read a reading's `retention_freed` (the exporter then asks Kafka for
    it at each poll, the backfill reads it from the archive)."""

    peaks: ClassVar[int]
    """How many running maxima (*peaks*) `peak_sample` gives a sample of, for `depth_floor`."""

    level_hold_seconds: ClassVar[float]
    """How far back, in whole seconds, `depth_floor` reads the highest `level_sample` of a
    volume's readings (this one's included; 0: it reads none)."""

    polls_watched_after_lift: ClassVar[int]
    """For how many poll intervals after a throttle is lifted the exporter keeps checking between
    polls (`exporter.poller.Poller.check_interval`): the load the throttle held comes back at
    once, on every volume, and a check showing a volume past its limit or closing on it fast
    (`closing_fast`) is taken in as a poll instead of waiting for the next one."""

    checks_unthrottled: ClassVar[bool]
    """Whether the exporter checks between polls while no throttle is in force, too: a load
    step on an unthrottled volume is then taken in a check interval after it shows, not a poll
    interval (or two, for a fill rate that is a median)."""

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
    ) -> tuple[Any, ...]:
        """What each of the volume's `peaks` is the running maximum of, since its last restart
        (the restart's own reading included); `depth_floor` reads the peaks."""
        ...

    def forgets_peaks(self, reading: VolumeReading, ops: Expressions) -> Any:
        """Whether a restart at this reading also starts the peaks afresh (else they run on)."""
        ...

    def calm_seconds(
        self,
        reading: VolumeReading,
        previous: tuple[VolumeReading, ...],
        samples: tuple[Any, ...],
        ops: Expressions,
    ) -> Any:
        """How many seconds of calm this reading adds to the volume's (`samples`: its
        `peak_sample`s): the peaks forget a sample after between `peak_memory_seconds` and twice
        that of calm (0: never)."""
        ...

    @property
    def freed_grace_seconds(self) -> float:
        """How long after space was freed on a volume of the cluster the readings of every
        volume say so (`VolumeReading.cluster_freed`; 0: never)."""
        ...

    @property
    def peak_memory_seconds(self) -> float:
        """How much calm the peaks remember a sample for (at least; at most twice this)."""
        ...

    def level_sample(self, reading: VolumeReading, peaks: tuple[Any, ...], ops: Expressions) -> Any:
        """What `depth_floor` reads the highest of over the last `level_hold_seconds` (with the
        volume's `peaks` as of this reading)."""
        ...

    def depth_floor(
        self,
        reading: VolumeReading,
        previous: tuple[VolumeReading, ...],
        peaks: tuple[Any, ...],
        ops: Expressions,
        levels: tuple[Any, Any] | None = None,
    ) -> tuple[Any, Any]:
        """(floor, at once): the floors this reading sets the volume's depth (each >= 0). The
        depth is kept at or above the *held floor*: the least, over the readings since the
        last restart, of each one's floor plus `floor_climb` per second since it (it follows a
        floor down at once and up at most that fast), or this reading's floor at once if that
        is higher. `levels` (with `level_hold_seconds`): this reading's `level_sample` and the
        highest of those of the last `level_hold_seconds`."""
        ...

    @property
    def floor_climb(self) -> float:
        """How fast the held floor may climb, in depth per second."""
        ...

    def closing_fast(self, reading: VolumeReading, last: VolumeReading, throttled: bool) -> bool:
        """Whether the volume, at the rate it filled at since `last` (one interval, plain
        numbers), would reach its limit so soon that a check showing it is to be taken in as a
        poll: the policy's own fill rate then sees the rate a poll sooner. `throttled`: whether
        the volume's factor is below 1.0."""
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


def cluster_factor(volume_factors: Iterable[float]) -> float:
    """The cluster's factor: the smallest any judged volume asks for, 1.0 without any volume."""
    return min(volume_factors, default=UNTHROTTLED)
