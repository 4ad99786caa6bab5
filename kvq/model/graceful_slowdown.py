"""GracefulSlowdown: slow producers down early, just enough, and let them go when space is freed
(`kvq.throttle.policy=graceful-slowdown`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from kvq.model.limits import Limit, MinAvailableRatio
from kvq.model.policy_expressions import PLAIN, Expressions
from kvq.model.retention_forecast import AHEAD_SECONDS
from kvq.model.slowdown_depth import depth_of_drop, depth_sharing, factor_at_depth
from kvq.model.throttle_factor_policy import THROTTLED, VolumeReading, used_bytes

NOT_FILLING_SECONDS = 365 * 86400.0
"""The predicted time to the limit of a volume that is not filling (and the most ever shown)."""
MIN_ELAPSED_SECONDS = 0.001
"""Observations closer than this (equal timestamps) count as this far apart."""
PEAK_MEMORY_SECONDS_DEFAULT = 3600.0
"""`GracefulSlowdown.peak_memory_seconds` unless configured: an hour of calm."""
RESPONSE_SECONDS_DEFAULT = 30.0
"""`GracefulSlowdown.response_seconds` unless configured (`kvq.throttle.slowdown.response.time`):
about twice the recommended loop's 14 s (two polls of 5 s for the fill rate to show a change,
then scrape, rule, Alertmanager and the enforcer's write within about 4 s), so a deployment with
that loop is safe without measuring its own."""


def settled_share(retention_seconds: float, response_seconds: float) -> float:
    """The share of the factor at which retention, keeping `retention_seconds` of data, would hold
    a volume at its limit that a steady load settles at under `GracefulSlowdown` (R / (R +
    response)): the headroom it keeps lasts `response_seconds` at the factor's share of the peak,
    and retention holds R seconds' writes in the rest of the room."""
    return retention_seconds / (retention_seconds + response_seconds)


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
    - factor `(1 + depth / 16) ** -16` (`kvq.model.slowdown_depth`): close to e ** -depth, so
      a step of the depth lowers the factor by the same share whatever the factor already is;
    - the depth grows while the volume would reach the limit within the horizon (in proportion
      to how much too fast it fills, over `response_seconds`): each step lowers the factor by
      at most `MAX_DROP` (20%) and `MAX_DROP_PER_SECOND` (5% a second), so a quota stays
      close to the rate it meets and Kafka's throttle times, (rate - quota) / quota x its
      window, stay within a few seconds; it shrinks while the volume fills slower than that,
      and restarts (factor 1.0 at once, peak forgotten) when space is freed (`FREED_SHARE`)
      and the limit is `RESTART_MARGIN` horizons away or more;
    - the depth never falls below its held floor (`depth_floor`): the factor stays at or below
      the share of the volume's peak fill rate (the fastest it filled since its last restart)
      at which its headroom would last `response_seconds` (or the horizon, if shorter) with
      nothing deleted (the level of the floor at once, below), and at or below `HELD_CAP`
      while its headroom would not last the horizon at the peak. With time-based retention,
      the volume holds about what was written over the last retention time, so once a
      throttle's segments are reached retention deletes more than is written and the fill
      rate reads 0 or less whatever the factor: a rise from there shows in the fill rate only
      a retention time later. The floor bounds what such a rise
      can cost; the cap keeps the quotas from being restored (a lift lets the backlog the
      producers built up while throttled through at once, which retention then deletes in one
      chunk, read as space freed) until the headroom covers the horizon at the peak again.
      The floor climbs as the headroom shrinks or the peak rises; the held floor follows it
      at most one `MAX_DROP` every `FLOOR_CLIMB_SECONDS`, except that a volume that would reach
      its limit within `response_seconds` at its fill rate (a load step) gets at once the
      factor at which its headroom lasts that long at its peak.
    At a steady load the factor settles where the volume fills just as fast as it may: its
    headroom shrinks at most by a factor e every horizon, it never reaches the limit; with
    retention it settles where the headroom left lasts `response_seconds` at the factor's
    share of the peak: at R / (R + response_seconds) of the factor at which retention
    (keeping R seconds of data) would hold the volume at the limit, whatever the horizon. (A
    floor at the horizon held it at R / (R + horizon) of it: about half with a horizon near R,
    less with a longer one.)

    With the volume's growth read (`VolumeReading.grown_bytes`, `kvq.throttle.slowdown.partition
    .sizes`; `follows_retention`), the net fill rate no longer steers the factor: it echoes the
    policy's own earlier rise one retention time later. The factor is then a level
    (`retention_reach`), over the readings of the last `GROWTH_WINDOW_SECONDS` (Kafka's quotas
    mute a producer, then let its backlog through: one poll's growth swings two- to threefold):
    the gross rate (what the partitions grew by) held at what retention freed (grown less the
    growth of the used bytes), plus the headroom foreseen when the factor takes effect above
    `MARGIN_SECONDS` of the window's rate, spent over `SETTLE_SECONDS`; the factor is that
    rate's share of the peak (the fastest the partitions grew over a window since the last
    restart, or the volume filled, if faster). Its drops are the held floor's, paced (a quota
    far below the rate it meets hands out long throttle times), its rises `LEVEL_RISE`'s. A
    load step (the last `STEP_WINDOW_SECONDS` grown at `STEP_RATIO` times the window's rate)
    is met at once by the level of those seconds, and a check showing one is taken in
    (`closing_fast`), except within `freed_grace_seconds` of space freed on any volume of the
    cluster (`VolumeReading.cluster_freed`): the quotas were just lifted, and what the producers
    buffered while throttled comes through on every volume at a step's rate for a few seconds;
    taken for a step, those seconds' rate entered the peak of volumes that never neared their
    limit and slowed the producers again. The other escapes stay: 0.0 at or past the limit, the
    held cap while the headroom would not last the horizon at the peak, the restart once space
    is freed; the held floor's `response_seconds` of headroom does not apply (the level keeps
    its margin), nor does the floor at once on the fill rate (bursts would trigger it). On real
    Kafka (`python -m bench.slowdown --partition-sizes`) this rides at about 85 % of the most any
    policy could write without crossing the limit, against 75-79 % without (docs/policies.md).

    With what retention frees by times ahead foreseen as well (`VolumeReading.retention_freed`,
    `kvq.throttle.slowdown.retention.forecast`), the level spends the headroom evenly until
    retention frees what the producers write now (`foreseen_reach`), instead of waiting to see
    what it frees, and the approach is no longer paced on the net fill rate. It falls on a
    margin of the window's rate, and rises past what a margin of the peak allows only as far as
    that level held over the last `RISE_HOLD_SECONDS` (`level_sample`: the exporter keeps each
    volume's samples of those seconds, the backfill takes their maximum with a window over
    time). Its drops stay paced, but only from a factor from which a paced descent can hold the
    volume off its limit (`paced_reach`): a factor a load step left far above the level is
    taken down to that one at once.
    """

    limit: Limit
    horizon_seconds: float
    response_seconds: float = RESPONSE_SECONDS_DEFAULT
    """The loop's response time: how long a change of the volume may take to show in Kafka's
    quotas (its poll, Prometheus' scrape and rule, Alertmanager, the enforcer's write), with room
    to spare. The depth grows by (predicted time too short, relative) x elapsed / this, so that
    it does not overshoot a loop that acts this late. A volume that would reach its limit sooner
    than this is past what paced steps can slow (`depth_floor` holds it at once; the exporter
    takes in a check showing it). The held floor keeps this much headroom at the factor's share
    of the peak: a rise that retention hid shows in the fill rate before it reaches the limit.
    So with retention keeping R seconds of data the factor settles at R / (R + this) of the one
    that would hold the volume at the limit (`settled_share`): the shorter the loop's real
    response, the closer to the limit it may ride."""
    peak_memory_seconds: float = PEAK_MEMORY_SECONDS_DEFAULT
    """Following retention, how long a volume's peaks remember a sample while it is calm
    (`calm_seconds`): a sample is forgotten after between this and twice this of calm time
    (`kvq.model.depth_accumulator`), so a replica copied onto the disk, or last week's load,
    stops slowing producers once the volume has been far from its limit for that long; time
    near the limit does not count, so no episode forgets the load it is holding back."""
    FILL_INTERVALS: ClassVar[int] = 3
    """The fill rate is the median of the rates over this many intervals."""
    FILL_INTERVAL_SECONDS: ClassVar[float] = 4.0
    """... and, with the growth read (a reading a poll apart, or a check apart), over intervals
    of about this long (`spaced_fill_rate`)."""
    GROWTH_WINDOW_SECONDS: ClassVar[float] = 30.0
    """With the growth read (`follows_retention`): the level's rates are what the partitions
    grew by and what retention freed over the readings of the last this many seconds: Kafka's
    quotas mute a producer, then let its backlog through, so one second's or one poll's growth
    swings two to three times; a window of several bursts much less."""
    STEP_WINDOW_SECONDS: ClassVar[float] = 5.0
    """... and a load step is what the partitions grew by over this many seconds at
    `STEP_RATIO` times the window's rate or more."""
    FREED_WINDOW_SECONDS: ClassVar[float] = 10.0
    """... and what retention freed is also read over this many seconds: when it falls (a
    retention time after a throttled stretch, retention frees what the throttle let through)
    the level believes the lower of the two at once."""
    history: ClassVar[int] = FILL_INTERVALS
    growth_windows: ClassVar[tuple[float, ...]] = (
        GROWTH_WINDOW_SECONDS,
        STEP_WINDOW_SECONDS,
        FREED_WINDOW_SECONDS,
    )
    looks_back: ClassVar[tuple[float, ...]] = (
        FILL_INTERVAL_SECONDS,
        2 * FILL_INTERVAL_SECONDS,
        3 * FILL_INTERVAL_SECONDS,
    )
    """The spaced fill rate's readings: `FILL_INTERVALS` of `FILL_INTERVAL_SECONDS` back."""
    reads_forecast: ClassVar[bool] = True
    RISE_HOLD_SECONDS: ClassVar[float] = 14.0
    """With retention foreseen (`foreseen_reach`): the level falls on `FORESEEN_MARGIN_SECONDS`
    of the window's rate, but rises past what that many seconds of the peak allow only to the
    lowest it was over the readings of the last this many seconds (the recommended loop's
    response time): after a rise producers write at up to their peak, their backlog first, and
    a level that only dipped is not raised into it (`level_sample`)."""
    level_hold_seconds: ClassVar[float] = RISE_HOLD_SECONDS
    accumulates: ClassVar[bool] = True
    peaks: ClassVar[int] = 2
    """The peak fill rate (`peak_sample`) and, following retention, the largest burst."""
    polls_watched_after_lift: ClassVar[int] = FILL_INTERVALS
    """As long as the fill rate, a median of the last `FILL_INTERVALS` intervals, lags the load a
    lift lets back: it shows it only two polls later; until then a check showing a volume
    closing fast (`closing_fast`) is taken in."""
    checks_unthrottled: ClassVar[bool] = True
    """A load step before the first slowdown shows in the fill rate two polls late (a median of
    three): in the closed-loop model (tests/kvq/model/test_slowdown_study.py) a 10x step 10 s
    into the scenario crossed the limit by 6.4 MB with polls alone and stays above it with a
    check every second (a loop of 3 s from check to quotas)."""
    gauges: ClassVar[tuple[str, ...]] = (
        "log_dir_fill_rate_bytes_per_second",
        "log_dir_seconds_to_limit",
    )
    RISE_SECONDS: ClassVar[float] = 15.0
    """... and shrinks by (predicted time longer than the horizon, relative, at most 1) x elapsed
    / this: producers get their rate back faster than they lose it."""
    MAX_DROP: ClassVar[float] = 0.2
    """The most one step lowers the factor by (a share of it)."""
    MAX_DROP_PER_SECOND: ClassVar[float] = 0.05
    RESTART_MARGIN: ClassVar[float] = 2.0
    LOWEST_CAP: ClassVar[float] = 0.01
    """The lowest factor `depth_floor` holds a volume to (at or near its limit): a floor that
    the depth climbs back from within a minute or so once there is room again."""
    HELD_CAP: ClassVar[float] = 0.95
    """The highest factor the held floor allows while the headroom would not last the horizon
    at the peak: the quotas stay set (and the producers' backlog held) until it would."""
    FLOOR_CLIMB_SECONDS: ClassVar[float] = 5.0
    """The held floor climbs by at most one `MAX_DROP` every this many seconds (the exporter's
    recommended poll interval): a factor it lowers stays close to the rate it meets."""
    SETTLE_SECONDS: ClassVar[float] = 10.0
    """With the growth read (`follows_retention`): the headroom above the margin is spent over
    this long, on top of what retention frees."""
    MARGIN_SECONDS: ClassVar[float] = 12.0
    """With the growth read: the headroom kept, in seconds of the rate the partitions grew at
    over the window (or retention freed, if faster)."""
    LEVEL_RISE: ClassVar[float] = 0.75
    """With the growth read: the depth falls toward the level by at most the depth of a drop
    of this share every `FLOOR_CLIMB_SECONDS` (the factor about four times higher every 5 s at
    most): a level met at once (a load step) holds for a few polls instead of falling back at
    the next reading to the held floor's path from before it, and a rise on a burst of space
    retention freed lets through a little less of the backlog the quotas held."""
    APPROACH_SHARE: ClassVar[float] = 0.1
    """With the growth read: while retention frees under this share of what the partitions grew
    by over the window (the approach, before retention reaches the load's segments), the depth
    is paced on the net fill rate as without the growth read: the level assumes its factor's
    share of the peak is written a response time later, but producers that buffer seconds of
    their writes (a throttled producer's next request carries its buffer) write more."""
    STEP_PEAK_RATIO: ClassVar[float] = 1.5
    """With the growth read: a load step is met at once only when the last `STEP_WINDOW_SECONDS`
    grew at this many times the peak or more: the backlog a rise lets through comes at up to
    three times the window's rate, but not above the load's peak."""
    MARGIN_BURSTS: ClassVar[float] = 2.0
    """With the growth read: the level keeps at least this many of the largest burst seen (a
    `STEP_WINDOW_SECONDS` that grew above the window's rate, by that much) as its margin: what
    producers buffered while throttled comes through in such bursts after a rise."""
    FREED_SHARE: ClassVar[float] = 0.1
    """Space freed: available bytes up by this share of the volume in one interval, or the volume
    grown (retention deleting a segment frees less; a volume that merely stopped filling because
    it is throttled frees nothing)."""

    def limit_bytes(self, reading: VolumeReading) -> Any:
        """The limit in bytes for this volume (a ratio limit: of its total)."""
        if isinstance(self.limit, MinAvailableRatio):
            return self.limit.min_ratio * reading.total_bytes
        return self.limit.threshold

    def fill_rate(
        self, reading: VolumeReading, previous: tuple[VolumeReading, ...], ops: Expressions
    ) -> Any:
        """Bytes per second the volume fills at (0.0 at its first reading)."""
        readings = (reading, *previous[: self.FILL_INTERVALS])
        rates = [
            ops.greatest(used_bytes(later) - used_bytes(earlier), 0)
            / ops.greatest(later.time - earlier.time, MIN_ELAPSED_SECONDS)
            for later, earlier in zip(readings, readings[1:], strict=False)
        ]
        if len(rates) < 2:
            return rates[0] if rates else 0.0
        if len(rates) == 2:  # while the history builds up: the lower, so one spike is ignored
            return ops.least(*rates)
        a, b, c = rates
        return ops.greatest(ops.least(a, b), ops.least(ops.greatest(a, b), c))

    def spaced_fill_rate(
        self, reading: VolumeReading, previous: tuple[VolumeReading, ...], ops: Expressions
    ) -> Any:
        """The fill rate over intervals of about `FILL_INTERVAL_SECONDS` (the median of the
        last three, as `fill_rate`), between this reading and the latest ones at or before
        `looks_back` seconds before it: with a reading every second, one second's growth swings
        with the producers' bursts."""
        if not previous:
            return 0.0
        points = [(reading.time, used_bytes(reading)), *reading.windows.earlier]
        rates = [
            ops.greatest(later_used - earlier_used, 0)
            / ops.greatest(later_time - earlier_time, MIN_ELAPSED_SECONDS)
            for (later_time, later_used), (earlier_time, earlier_used) in zip(
                points, points[1:], strict=False
            )
        ]
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
        elapsed = self.elapsed(reading, last, ops)
        per_second = depth_of_drop(self.MAX_DROP_PER_SECOND)
        bound = ops.least(depth_of_drop(self.MAX_DROP), per_second * elapsed)
        pace = ops.choose(
            too_fast < 0,
            1.0 / self.RISE_SECONDS,
            1.0 / self.response_seconds,
        )
        paced = ops.least(ops.greatest(too_fast, -1.0) * elapsed * pace, bound)
        # Following retention, the factor is a level (the floor, `depth_floor`): the depth falls
        # to it as fast as `LEVEL_RISE` allows; in the approach, paced on the net fill rate too.
        rise = -depth_of_drop(self.LEVEL_RISE) * elapsed / self.FLOOR_CLIMB_SECONDS
        # Foreseeing retention, the approach needs no pacing on the net fill rate: the level
        # counts on no deletion before the forecast's.
        approach = ops.choose(
            self.foresees(reading, ops), False, self.in_approach(reading, ops) & (too_fast > 0)
        )
        follows = self.follows_retention(reading, ops)
        step = ops.choose(follows, ops.choose(approach, paced, rise), paced)
        freed = (
            reading.available_bytes - last.available_bytes >= self.FREED_SHARE * reading.total_bytes
        ) | (reading.total_bytes > last.total_bytes)
        restart = (too_fast <= 1.0 / self.RESTART_MARGIN - 1.0) & freed
        return step, restart

    def in_approach(self, reading: VolumeReading, ops: Expressions) -> Any:
        """Whether retention freed under `APPROACH_SHARE` of what the partitions grew by over
        the window (following retention)."""
        grown, used, _ = self.growth_window(reading, ops)
        return grown - used < self.APPROACH_SHARE * grown

    def forgets_peaks(self, reading: VolumeReading, ops: Expressions) -> Any:
        """Following retention a restart keeps the peaks: the depth goes back to the level's
        floor, which the peak keeps where the load needs it; a peak forgotten (the throttled
        rate of the restart's reading) lifts the quotas at once and lets through everything the
        producers buffered while throttled."""
        return ops.choose(self.follows_retention(reading, ops), False, True)

    def peak_sample(
        self, reading: VolumeReading, previous: tuple[VolumeReading, ...], ops: Expressions
    ) -> tuple[Any, Any]:
        """(rate, burst). The rate: the fill rate, once it is the median of three intervals (a
        single interval may be a burst of other data the median would ignore): the peak is the
        fastest the volume filled since its last restart. Following retention, the rate the
        partitions grew at over the window (`window_rate`), or a step's over its seconds once the
        window is whole, or the fill rate over intervals of seconds (`spaced_fill_rate`) if higher:
        a volume filled by what its partitions do not show (a replica copied onto it, data not
        Kafka's) is still slowed, as without the growth read. The burst, following retention: what
        the last `STEP_WINDOW_SECONDS` grew by above the window's rate over them (0 otherwise)."""
        if not previous:
            return 0.0, 0.0
        whole = len(previous) >= self.FILL_INTERVALS
        net = self.fill_rate(reading, previous, ops) if whole else 0.0
        spaced = self.spaced_fill_rate(reading, previous, ops)
        grown = self.window_rate(reading, ops, self.GROWTH_WINDOW_SECONDS)
        short = self.window_rate(reading, ops, self.STEP_WINDOW_SECONDS)
        stepped = ops.choose(self.stepped(reading, ops, whole=True), short, 0.0)
        follows = self.follows_retention(reading, ops)
        rate = ops.choose(follows, ops.greatest(ops.greatest(grown, spaced), stepped), net)
        return rate, ops.choose(follows, self.burst(reading, ops), 0.0)

    CALM_HORIZONS: ClassVar[float] = 4.0
    """A reading is calm when its headroom would last this many horizons at its peak sample."""

    def calm_seconds(
        self,
        reading: VolumeReading,
        previous: tuple[VolumeReading, ...],
        samples: tuple[Any, ...],
        ops: Expressions,
    ) -> Any:
        """Following retention, the seconds since the last reading (at most the horizon: what a
        longer gap held is unknown) if this reading is calm: its headroom would last
        `CALM_HORIZONS` horizons at the rate it sampled for the peak (`peak_sample`), what its
        partitions grew at: far from the limit at the rate it is written now. 0 otherwise, and
        always on the totals alone: there the fill rate is net of retention, and reads 0 while
        retention holds a throttled volume just above its limit."""
        if not previous:
            return 0.0
        rate = samples[0]
        calm = self.headroom(reading) >= self.CALM_HORIZONS * self.horizon_seconds * rate
        seconds = ops.least(self.elapsed(reading, previous[0], ops), self.horizon_seconds)
        return ops.choose(self.follows_retention(reading, ops) & calm, seconds, 0.0)

    def burst(self, reading: VolumeReading, ops: Expressions) -> Any:
        """What the partitions grew by over the last `STEP_WINDOW_SECONDS` above the window's
        rate over them (0 if not above)."""
        grown, _, seconds = self.growth_window(reading, ops)
        short, _, short_seconds = self.growth_window(reading, ops, self.STEP_WINDOW_SECONDS)
        return ops.greatest(short - grown / seconds * short_seconds, 0.0)

    def depth_floor(
        self,
        reading: VolumeReading,
        previous: tuple[VolumeReading, ...],
        peaks: tuple[Any, ...],
        ops: Expressions,
        levels: tuple[Any, Any] | None = None,
    ) -> tuple[Any, Any]:
        """(held, at once): the depth of the highest factor at which the volume, filling at
        that share of its peak with nothing deleted, would still take `response_seconds` (or
        the horizon, if shorter) to reach its limit: the floor at once's level, so that at a
        steady load the headroom left keeps the volume out of reach of it; and no higher than
        `HELD_CAP` while its headroom would not last the horizon at its peak (0 while that is
        1.0 or more; never past the depth of `LOWEST_CAP`). While retention deletes what was
        written before a throttle, the fill rate says nothing of what a higher factor will
        write once those segments are gone; the peak does.

        At once, while the volume at its fill rate would reach its limit within
        `response_seconds` from this reading and from the one before (one spuriously low
        reading is not enough), sooner than the held floor's climb and the paced steps could
        slow it (a load step, or the load another volume's throttle held coming back when that
        throttle is lifted): the depth of the factor at which its headroom lasts
        `response_seconds` at its peak (0 otherwise); the held floor then climbs on from there.
        A level, not a step: readings that still show the rate from before it took effect ask
        for no more than it. `levels`: this reading's `level_sample` and the highest of those of
        the last `level_hold_seconds` (`retention_reach`)."""
        peak, burst = peaks
        headroom = ops.greatest(self.headroom(reading), 1.0)
        lasting = min(self.response_seconds, self.horizon_seconds)
        follows = self.follows_retention(reading, ops)
        capped = ops.choose(headroom < self.horizon_seconds * peak, 1.0 / self.HELD_CAP, 1.0)
        if not previous:
            level: Any = capped
        else:  # following retention: the level's drops are the held floor's, paced
            spaced = self.spaced_fill_rate(reading, previous, ops)
            retention = self.retention_reach(reading, spaced, peaks, ops, levels)
            level = ops.greatest(capped, retention)
        reach = ops.choose(follows, level, ops.greatest(lasting * peak / headroom, capped))
        held = depth_sharing(reach, self.LOWEST_CAP, ops)
        if not previous:
            return held, 0.0
        surest = ops.greatest(headroom, self.headroom(previous[0]))
        # Following retention, no escape at the fill rate: a throttled producer's backlog
        # comes through in bursts, and dropping at once on one meets the next burst deeper.
        imminent = ops.choose(
            follows, False, self.imminent(self.fill_rate(reading, previous, ops), surest)
        )
        short, used, seconds = self.growth_window(reading, ops, self.STEP_WINDOW_SECONDS)
        at_once = depth_sharing(self.response_seconds * peak / headroom, self.LOWEST_CAP, ops)
        # A rise's backlog comes through at up to three times the window's rate: a step only
        # above the peak.
        above_peak = self.window_rate(reading, ops, self.STEP_WINDOW_SECONDS) > (
            self.STEP_PEAK_RATIO * peak
        )
        stepped = follows & self.stepped(reading, ops) & above_peak
        # The step's level, as a share of the step's rate: before the window is whole (the
        # exporter just started) the peak does not count it yet.
        stepped_peak = ops.greatest(peak, short / ops.greatest(seconds, self.STEP_WINDOW_SECONDS))
        step = depth_sharing(
            self.reach_at(
                reading,
                short / seconds,
                (short - used) / seconds,
                spaced,
                (stepped_peak, burst),
                ops,
            ),
            self.LOWEST_CAP,
            ops,
        )
        escapes = [ops.choose(imminent, at_once, 0.0), ops.choose(stepped, step, 0.0)]
        if reading.retention_freed is not None:
            # Foreseeing retention, the level's drops are paced only as far as a paced descent
            # can hold the volume off its limit: after a load step the level may be far below
            # the factor, and drops of a fifth every 5 s would write past the limit first.
            paced = depth_sharing(self.paced_reach(reading, peak, ops), self.LOWEST_CAP, ops)
            escapes.append(ops.choose(follows & self.foresees(reading, ops), paced, 0.0))
        return held, ops.greatest(*escapes)

    PACED_FREED_SECONDS: ClassVar[float] = 20.0
    """With retention foreseen (`paced_reach`): what retention frees over this many seconds
    counts toward the room a paced descent has (a descent with a 14 s response writes about
    three fifths of what it writes in all over its first 20 s)."""

    def paced_seconds(self) -> float:
        """How many seconds of the peak a descent from a factor writes, as a share of that
        factor, with its drops paced (`MAX_DROP` every `FLOOR_CLIMB_SECONDS`: f, 0.8 f, 0.64 f,
        ... held that long each) after the loop's `applied_seconds` at f."""
        return self.applied_seconds() + self.FLOOR_CLIMB_SECONDS / self.MAX_DROP

    def paced_reach(self, reading: VolumeReading, peak: Any, ops: Expressions) -> Any:
        """How many times too fast the peak is for a paced descent (`paced_seconds`) from its
        factor to write no more than the headroom above the level's margin on the window's
        rate (`foreseen_margin`: at low factors producers write more than the factor's share
        of the peak, their requests at the quotas' minimums) plus what retention frees over the
        first `PACED_FREED_SECONDS` (foreseen): the highest factor the level's drops may still
        be paced from. In the closed-loop model a 10x load step 10 s into the load crossed the
        limit in 1 of 25 runs (in 10 with a 3 s quota window) with the drops paced from where
        the step left the factor; held at this, in none with either window."""
        ahead = max(i for i, a in enumerate(AHEAD_SECONDS) if a <= self.PACED_FREED_SECONDS)
        freed = ops.greatest(reading.retention_freed[ahead], 0)
        grown, _, seconds = self.growth_window(reading, ops)
        margin = self.foreseen_margin(reading, grown / seconds, ops)
        room = ops.greatest(self.headroom(reading) - margin + freed, 1.0)
        return self.paced_seconds() * peak / room

    STEP_RATIO: ClassVar[float] = 3.0

    @property
    def freed_grace_seconds(self) -> float:
        """How long after space was freed on a volume of the cluster a step is taken for the
        backlog of a lift (`stepped`): the loop's response (the factor's rise reaching the
        quotas) and a step's window (the backlog's seconds in it)."""
        return self.response_seconds + self.STEP_WINDOW_SECONDS

    def stepped(self, reading: VolumeReading, ops: Expressions, whole: bool = False) -> Any:
        """Whether the growth of the last `STEP_WINDOW_SECONDS` is at `STEP_RATIO` times the
        rate of the last `GROWTH_WINDOW_SECONDS` or more (`whole`: over a window of readings
        that long, less the step's: a load starting, or the exporter's start, is not a step),
        unless space was freed on a volume of the cluster lately (`cluster_freed`): the
        backlog of the quotas' lift. On real Kafka that backlog came through at 2.5-3.4 MB
        within seconds on volumes that had grown at 0.1-0.2 MB/s; librdkafka keeps sending
        into a connection Kafka muted, up to its in-flight requests (docs/policies.md)."""
        window = self.window_rate(reading, ops, self.GROWTH_WINDOW_SECONDS)
        short = self.window_rate(reading, ops, self.STEP_WINDOW_SECONDS)
        _, _, seconds = self.growth_window(reading, ops)
        long_enough = seconds >= self.GROWTH_WINDOW_SECONDS - self.STEP_WINDOW_SECONDS
        step = (short > self.STEP_RATIO * window) & (long_enough | (not whole))
        return ops.choose(reading.cluster_freed, False, step)

    def window_rate(self, reading: VolumeReading, ops: Expressions, seconds: float) -> Any:
        """What the partitions grew by over the last `seconds`, per second of them (readings
        missing from the window count as no growth: a rate over a second or two after the
        exporter's start or a gap is a burst, not a rate)."""
        grown, _, elapsed = self.growth_window(reading, ops, seconds)
        return grown / ops.greatest(elapsed, seconds)

    def follows_retention(self, reading: VolumeReading, ops: Expressions) -> Any:
        """Whether the volume's growth was read (`VolumeReading.grown_bytes`): the factor then
        holds the rate written at what retention frees (`retention_reach`), a level at each
        reading, instead of pacing the depth on the net fill rate."""
        return ops.known(reading.grown_bytes)

    @staticmethod
    def elapsed(reading: VolumeReading, last: VolumeReading, ops: Expressions) -> Any:
        """Seconds from `last` to `reading` (at least `MIN_ELAPSED_SECONDS`)."""
        return ops.greatest(reading.time - last.time, MIN_ELAPSED_SECONDS)

    def growth_window(
        self, reading: VolumeReading, ops: Expressions, seconds: float | None = None
    ) -> tuple[Any, Any, Any]:
        """(grown, used grown, seconds) over the readings of the last `seconds`
        (`GROWTH_WINDOW_SECONDS` unless given; `ReadingWindows.growth`): what the volume's
        partition replicas grew by (the gross: retention's deletions do not hide it) and what
        its used bytes grew by (from the totals: a deleted segment's file lingers on the disk
        for `log.segment.delete.delay.ms`, the totals see the space when it is free); grown
        less used is what retention freed."""
        window = reading.windows.growth[
            self.growth_windows.index(seconds or self.GROWTH_WINDOW_SECONDS)
        ]
        elapsed = ops.greatest(reading.time - window.start_time, MIN_ELAPSED_SECONDS)
        return window.grown, used_bytes(reading) - window.start_used, elapsed

    def retention_reach(
        self,
        reading: VolumeReading,
        unseen: Any,
        peaks: tuple[Any, ...],
        ops: Expressions,
        levels: tuple[Any, Any] | None = None,
    ) -> Any:
        """How many times too fast the peak write rate is for the rate to hold: what retention
        frees, plus the headroom foreseen when the factor takes effect above a margin
        (`MARGIN_SECONDS` of the window's rate) spent over `SETTLE_SECONDS`, over the window's
        readings (`growth_window`). The factor takes effect `response_seconds` less two polls
        after this reading (the two the net fill rate's median waits for are not waited for
        here); the headroom then is foreseen at the window's rates, shrinking only: what
        retention frees comes in bursts (segments), and a throttled interval writes less than
        the factor it sets will (foreseeing the headroom grow too let a 10x load step cross
        the limit with a 30 s response time in tests/kvq/model/test_slowdown_study.py). With what
        retention frees foreseen (`foresees`), `foreseen_reach` instead. In factors: the lower
        of the level on a margin of the window's rate and the higher of the level on a margin of
        the peak's and the lowest the window's was over the last `level_hold_seconds` (`levels`:
        this reading's `level_sample` and the highest of those seconds'; without them, on the
        peak's margin alone)."""
        grown, _, seconds = self.growth_window(reading, ops)
        freed = self.freed_rate(reading, ops)
        reach = self.reach_at(reading, grown / seconds, freed, unseen, peaks, ops)
        if reading.retention_freed is None:
            return reach
        gross = grown / seconds
        on_peak = self.foreseen_reach(reading, gross, peaks, ops, ops.greatest(peaks[0], gross))
        foreseen = on_peak
        if levels is not None:
            on_window, held = levels
            foreseen = ops.greatest(on_window, ops.least(on_peak, held))
        return ops.choose(self.foresees(reading, ops), foreseen, reach)

    def level_sample(self, reading: VolumeReading, peaks: tuple[Any, ...], ops: Expressions) -> Any:
        """The level `retention_reach` holds rises on (a reach: the higher, the lower the
        factor): `foreseen_reach` on a margin of the window's rate while retention is foreseen,
        else 0."""
        if reading.retention_freed is None:
            return 0.0
        grown, _, seconds = self.growth_window(reading, ops)
        on_window = self.foreseen_reach(reading, grown / seconds, peaks, ops, grown / seconds)
        return ops.choose(self.foresees(reading, ops), on_window, 0.0)

    FORESEEN_MARGIN_SECONDS: ClassVar[float] = 2.0
    """With retention foreseen (`foreseen_reach`): the headroom kept, in seconds of the window's
    rate; and for a rise, of the peak rate (or the window's, if faster) until the level has held
    for `RISE_HOLD_SECONDS`: after a rise the producers write at up to the peak, their backlog
    first (4 s of the window's rate alone let the six cross the limit on real Kafka, 5 s after a
    rise from 0.45 to 0.82). 2 s rather than 4: the six rode at 86-88 % of the bound on real
    Kafka where they had at 81-88 %, and the 10x step still stayed above the limit
    (docs/policy-study.md, "Riding closer") ..."""
    FORESEEN_MARGIN_BURSTS: ClassVar[float] = 1.0
    """... and at least this many of the burst the reading shows (`burst`): the current one, not
    the largest seen (the load starting, as the partitions' sizes see it, is one burst of a
    window's growth, which a margin on the largest would keep for the whole episode)."""

    def applied_seconds(self) -> float:
        """How long after a reading its factor is in Kafka's quotas: the response time less the
        two polls the net fill rate's median waits for, which a level does not wait for."""
        return max(self.response_seconds - 2 * self.FLOOR_CLIMB_SECONDS, 0.0)

    def foresees(self, reading: VolumeReading, ops: Expressions) -> Any:
        """Whether the reading carries what retention frees by the times ahead
        (`VolumeReading.retention_freed`), known past the time its factor takes effect: the
        level then spends the headroom as `foreseen_reach` says."""
        applied = self.applied_seconds()
        if reading.retention_freed is None or applied >= AHEAD_SECONDS[-1]:
            return False
        first = next(i for i, ahead in enumerate(AHEAD_SECONDS) if ahead > applied)
        freed = reading.retention_freed[first]
        return ops.choose(ops.known(freed), freed, -1) >= 0

    def foreseen_reach(
        self,
        reading: VolumeReading,
        gross: Any,
        peaks: tuple[Any, ...],
        ops: Expressions,
        margin_rate: Any,
    ) -> Any:
        """How many times too fast the peak write rate is for the rate to hold, with what
        retention frees by each time ahead foreseen (`foresees`): the lowest rate at which the
        headroom when the factor takes effect (less the window's `gross` rate until then) above
        a margin (`FORESEEN_MARGIN_SECONDS`, `FORESEEN_MARGIN_BURSTS`), plus what retention
        frees by each time ahead, lasts until the next one. What is freed by a time holds from
        then on and nothing more is counted until the next, so the headroom is spent evenly
        until retention frees what the producers write now (past the times foreseen, -1: no
        bound). Before retention reaches the load's segments nothing is foreseen and the
        headroom is spent until then; once it does, at the rate it frees. In the closed-loop
        model (tests/kvq/model/test_slowdown_study.py) this stalls producers less than the level
        on what retention freed (`reach_at`) at about the same share."""
        peak, _ = peaks
        spare = self.foreseen_spare(reading, gross, margin_rate, ops)
        never = NOT_FILLING_SECONDS * ops.greatest(peak, 1.0)
        rate = self.foreseen_rate(reading, spare, never, ops)
        return ops.greatest(peak, 1.0) / ops.greatest(rate, 1.0)

    def foreseen_rate(
        self, reading: VolumeReading, spare: Any, never: Any, ops: Expressions
    ) -> Any:
        """The highest steady rate at which `spare` (`foreseen_spare`) plus what retention frees
        by each time ahead lasts until the next one (`never` where a time is unknown)."""
        applied = self.applied_seconds()
        # One bound per time ahead, each reading only its own and the one before (a time unknown
        # frees nothing by it): on Spark's Columns an expression that read the bounds so far
        # twice over would double with every time ahead.
        bounds = []
        freed: Any = 0.0
        for ahead, by_then in zip(AHEAD_SECONDS, reading.retention_freed, strict=True):
            if ahead > applied:
                bound = (spare + freed) / (ahead - applied)
                bounds.append(ops.choose(by_then < 0, never, bound))
            freed = ops.greatest(by_then, 0)
        return ops.least(*bounds)

    def foreseen_spare(
        self, reading: VolumeReading, gross: Any, margin_rate: Any, ops: Expressions
    ) -> Any:
        """The headroom `foreseen_reach` spends: the headroom when the factor takes effect (less
        the window's `gross` rate until then) above its margin (`foreseen_margin`)."""
        return (
            self.headroom(reading)
            - gross * self.applied_seconds()
            - self.foreseen_margin(reading, margin_rate, ops)
        )

    def foreseen_margin(self, reading: VolumeReading, rate: Any, ops: Expressions) -> Any:
        """The headroom `foreseen_reach` keeps: `FORESEEN_MARGIN_SECONDS` of `rate` (the peak's,
        or the window's if faster: what producers write after a rise, their backlog first,
        before the next factor takes effect; or the window's alone, which a level falls on),
        or the burst the reading shows (`FORESEEN_MARGIN_BURSTS`), if more."""
        return ops.greatest(
            self.FORESEEN_MARGIN_SECONDS * rate,
            self.FORESEEN_MARGIN_BURSTS * self.burst(reading, ops),
        )

    def freed_rate(self, reading: VolumeReading, ops: Expressions) -> Any:
        """What retention freed per second over the window, or over the last
        `FREED_WINDOW_SECONDS` if less: believed at once when it falls."""
        grown, used, seconds = self.growth_window(reading, ops)
        recent, recent_used, recent_seconds = self.growth_window(
            reading, ops, self.FREED_WINDOW_SECONDS
        )
        return ops.least(
            (grown - used) / seconds,
            (recent - recent_used) / ops.greatest(recent_seconds, self.FREED_WINDOW_SECONDS),
        )

    def reach_at(
        self,
        reading: VolumeReading,
        gross: Any,
        freed: Any,
        unseen: Any,
        peaks: tuple[Any, ...],
        ops: Expressions,
    ) -> Any:
        """`retention_reach` at these rates, for these `peaks` (rate, burst). `unseen`: the volume's
        fill rate over intervals of seconds (`spaced_fill_rate`, a median): the used bytes growing
        by more than the partitions (data not Kafka's written to the volume, a replica moved onto
        it) read as retention freeing less than nothing, down to that rate: a sustained fill takes
        room at its rate, one burst of it (a median ignores it) only the room the headroom shows."""
        freed = ops.greatest(freed, -unseen)
        applied = self.applied_seconds()
        foreseen = self.headroom(reading) + ops.least(freed - gross, 0.0) * applied
        # The margin at the rates the window saw, not the peak: the peak is the highest of many
        # noisy windows, and a margin on it keeps the headroom up by what the noise added.
        peak, burst = peaks
        margin = ops.greatest(
            self.MARGIN_SECONDS * ops.greatest(gross, freed), self.MARGIN_BURSTS * burst
        )
        target = freed + (foreseen - margin) / self.SETTLE_SECONDS
        return ops.greatest(peak, 1.0) / ops.greatest(target, 1.0)

    @property
    def floor_climb(self) -> float:
        return depth_of_drop(self.MAX_DROP) / self.FLOOR_CLIMB_SECONDS

    def imminent(self, rate: Any, headroom: Any) -> Any:
        """Whether `headroom` lasts less than `response_seconds` at `rate`."""
        return self.response_seconds * rate > headroom

    def closing_fast(self, reading: VolumeReading, last: VolumeReading, throttled: bool) -> bool:
        """The limit within `response_seconds` at the rate of this one interval: the fill
        rate, a median of three, would see it only a poll later. Following retention (the
        growth read) only while the volume is not throttled (a fast fill before the first
        slowdown), or for a load step (`stepped`) that would reach the limit within the horizon,
        throttled or not: once throttled, its producers
        send in bursts (Kafka's quotas mute them, then let their backlog through), which one
        short interval would take for a fast fill; the level reads its window at the poll."""
        if reading.grown_bytes is not None:
            rate = self.fill_rate(reading, (last,), PLAIN)
            fast = not throttled and bool(self.imminent(rate, self.headroom(reading)))
            short = self.window_rate(reading, PLAIN, self.STEP_WINDOW_SECONDS)
            near = self.headroom(reading) < self.horizon_seconds * short
            return fast or bool(self.stepped(reading, PLAIN) and near)
        rate = self.fill_rate(reading, (last,), PLAIN)
        return bool(self.imminent(rate, self.headroom(reading)))

    def volume_factor(
        self,
        reading: VolumeReading,
        previous: tuple[VolumeReading, ...],
        depth: Any,
        ops: Expressions,
    ) -> Any:
        violated = self.limit.is_violated(reading.available_bytes, reading.available_ratio)
        return ops.choose(violated, THROTTLED, factor_at_depth(depth))

    def volume_gauges(
        self, reading: VolumeReading, previous: tuple[VolumeReading, ...], ops: Expressions
    ) -> tuple[Any, ...]:
        return (
            self.fill_rate(reading, previous, ops),
            self.seconds_to_limit(reading, previous, ops),
        )
