"""Per-volume history: each log dir's descriptions as runs on the success sequence and the grid.

Mirrors `kvq.model.volume_cache.VolumeCache` with windows over the log-dir rows range-partitioned
by broker (cluster, broker_id): one shuffle serves both the per-volume window (a log dir's next
description) and the per-broker one (when the broker answered again), and the per-volume work,
99% of the data, spreads over as many tasks as there are brokers, each broker whole in one task
and the tasks' shares even (`BrokerRanges`: ranges of the brokers the driver saw, cut at even
counts of them: no task left empty, no two brokers in one task by a hash collision while others
sit idle, and no job sampling the rows to cut them). A log dir described usable at
success s (time T) stays in the merged set of every later success until the *end* of its run:
- the next success describing it again (usable or not): no eviction;
- else the first success at or after T + validity (`expiry`, the plugin's boundary), which
  evicts it (counted once);
- the violation hold: if it violated at s, it stays (held) past the expiry until its broker
  answers again without it (`back`: the broker's next success, the log dir not described there)
  or the first success at or after T + hold; a hold that runs out while it is unseen is reported
  (`hold_expired`) until it is seen again (`seen`: its broker answers without it, or it is
  described with sizes: `usable`);
- offline: if it violated at s and its next description has no sizes (an error code, -1) while
  its hold runs, it goes offline there: held at once, through descriptions without sizes, until
  `usable`, `seen` or the hold ends, whichever comes first (the hold reported as above);
- no end: to the last success.
The successes strictly inside the run hold it as a cached volume; its series shows the values of s
at grid indexes [k(s), k(end) - 1], where k(u) is the first grid index success u is visible at.
A run that leaves the next success without it yields a few *events* (cached, held, evicted, hold
expired, each at a success) that `spark.poll_history` sums up on the driver; a volume described
at every success yields none.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Window, WindowSpec
from pyspark.sql import functions as F

from kvq.model.retention_forecast import AHEAD_SECONDS
from kvq.model.throttle_factor_policy import (
    UNTHROTTLED,
    WINDOW_SLACK_SECONDS,
    EarlierReading,
    GrowthWindow,
    ReadingWindows,
    ThrottleFactorPolicy,
    VolumeReading,
)
from spark.archive_reader import available_ratio, unusable_reason

VOLUME = ["cluster", "broker_id", "log_dir"]
BROKER_RANGE = "broker_range"
"""The column of each row's partition of the per-broker shuffle (`BrokerRanges`)."""
BY_BROKER = [BROKER_RANGE, "cluster", "broker_id"]
BY_VOLUME = [*BY_BROKER, "log_dir"]
"""The windows' partitions: a broker's, a volume's, led by the shuffle's partition (a function
of the broker): so the shuffle's partitioning is the one the windows ask for."""
NEVER = 2**62
"""A success number later than any: an end that never comes."""


@dataclass(frozen=True)
class BrokerRanges:
    """The per-broker shuffle's partitions: ranges of (cluster_index, broker_id), partition i
    holding the keys above `bounds[i - 1]` up to `bounds[i]` (as Spark's range partitioning, so
    the part files come out in broker order). Cut by the driver from the brokers the successes
    describe (`spark.archive_reader.described_brokers`): Spark's `repartitionByRange` runs a job
    of its own over every row to sample the ranges (2 s of a 10M-row run on two cores)."""

    bounds: tuple[tuple[int, int], ...] = ()

    @staticmethod
    def even(brokers: list[tuple[int, int]], partitions: int) -> BrokerRanges:
        """`partitions` ranges (fewer when there are fewer brokers) of about as many brokers
        each; `brokers`: the (cluster_index, broker_id) keys, sorted."""
        count = max(1, min(partitions, len(brokers)))
        return BrokerRanges(
            tuple(brokers[(i + 1) * len(brokers) // count - 1] for i in range(count - 1))
        )

    @property
    def partitions(self) -> int:
        return len(self.bounds) + 1

    def partition(self) -> Column:
        """The partition of a row's (cluster_index, broker_id): a binary search over the bounds,
        as one SQL expression (one call to the JVM, however many ranges)."""
        return F.expr(self._search(0, len(self.bounds)))

    def _search(self, first: int, last: int) -> str:
        """The SQL of the partition among `first`..`last` for a key known to be in them."""
        if first == last:
            return str(first)
        middle = (first + last) // 2
        index, broker = self.bounds[middle]
        at_most = f"cluster_index < {index} OR cluster_index = {index} AND broker_id <= {broker}"
        return (
            f"CASE WHEN {at_most} THEN {self._search(first, middle)} "
            f"ELSE {self._search(middle + 1, last)} END"
        )


class SparkExpressions:
    """`kvq.model.policy_expressions.Expressions` on Spark Columns."""

    def choose(self, condition: Column | bool, if_true, if_false) -> Column:
        # A condition on constants (a declaration given no previous reading) is a plain bool.
        condition = condition if isinstance(condition, Column) else F.lit(condition)
        return F.when(condition, if_true).otherwise(if_false)

    def least(self, *values) -> Column:
        return F.least(*(v if isinstance(v, Column) else F.lit(v) for v in values))

    def greatest(self, *values) -> Column:
        return F.greatest(*(v if isinstance(v, Column) else F.lit(v) for v in values))

    def sqrt(self, value) -> Column:
        return F.sqrt(value)  # java.lang.Math.sqrt: correctly rounded, as Python's

    def known(self, value) -> Column:
        return value.isNotNull() if isinstance(value, Column) else F.lit(value is not None)

    def or_zero(self, value) -> Column:
        return F.coalesce(value if isinstance(value, Column) else F.lit(value), F.lit(0))


SPARK_EXPRESSIONS = SparkExpressions()


READING = ("time", "total_bytes", "available_bytes", "available_ratio", "grown_bytes")
"""The columns of a described log dir that make a `VolumeReading` (in its field order)."""


def _reading(column: Callable[[str], Column]) -> VolumeReading:
    """A reading of the columns READING (`column(name)`: of the row, or of a struct)."""
    time, total_bytes, available_bytes, ratio, grown_bytes = (column(name) for name in READING)
    return VolumeReading(time, total_bytes, available_bytes, ratio, grown_bytes)


def _policy_reading(policy: ThrottleFactorPolicy) -> VolumeReading:
    """A row's reading as the policy reads it: with its windows (`with_window_columns`) and, for
    a policy that reads it, the forecast."""
    windows = ReadingWindows(
        tuple(
            GrowthWindow(*(F.col(f"growth{i}")[name] for name in GrowthWindow._fields))
            for i in range(len(policy.growth_windows))
        ),
        tuple(
            EarlierReading(*(F.col(f"earlier{i}")[name] for name in EarlierReading._fields))
            for i in range(len(policy.looks_back))
        ),
    )
    reading = _reading(F.col)._replace(windows=windows)
    if policy.accumulates:
        reading = reading._replace(cluster_freed=F.col("cluster_freed"))
    if policy.reads_forecast:
        forecast = F.col("retention_freed")
        freed = tuple(forecast[i] for i in range(len(AHEAD_SECONDS)))
        reading = reading._replace(retention_freed=freed)
    return reading


FUSED_FIELDS = 40
"""The most fields an operator of a policy with previous readings may have and still be fused
into its stage's generated method (`fused_fields`): graceful-slowdown's policy stages have 47-64,
the stages that read and write the volumes' rows fewer."""


def fused_fields(policy: ThrottleFactorPolicy) -> int | None:
    """The most fields an operator of `policy`'s job may have and still be fused with the others
    of its stage into one generated method (Spark's whole-stage code generation,
    `spark.sql.codegen.maxFields`); None: Spark's own (100). For a policy that reads its previous
    readings (`history`, graceful-slowdown) `FUSED_FIELDS`: `_by_variant` makes one formula per
    number of previous readings, and a fused policy stage holds code past the JVM's 64 KB limit
    on a method. Janino then fails to compile it, Spark logs that as an ERROR with a Java stack
    trace of a thousand lines and runs the stage unfused anyway, after seconds spent on the
    attempt. Not fused from the start, the policy stages run as they did, and the narrower
    stages are still fused (turning fusion off for the whole job made a large archive's backfill
    half as slow again)."""
    return FUSED_FIELDS if policy.history > 0 else None


def _by_variant(policy: ThrottleFactorPolicy, declared) -> Column:
    """`declared(reading, previous)` with as many previous readings as the volume has (up to the
    policy's `history`; columns `previous1`.. hold them, null where it has fewer)."""
    reading = _policy_reading(policy)
    previous = [_reading(F.col(f"previous{n}").getField) for n in range(1, policy.history + 1)]
    chosen = F.lit(declared(reading, tuple(previous)))
    for n in range(policy.history, 0, -1):
        fewer = F.lit(declared(reading, tuple(previous[: n - 1])))
        chosen = F.when(F.col(f"previous{n}").isNull(), fewer).otherwise(chosen)
    return chosen


Keep = Callable[[DataFrame], DataFrame]
"""How a table read twice is kept: the same rows (with its plan cut by a checkpoint,
`spark.session.checkpointing`, or as planned, `_as_planned`)."""


def _as_planned(table: DataFrame) -> DataFrame:
    """Not kept: each read plans and computes the table anew."""
    return table


def _in_ranges(cut: Keep, ranges: BrokerRanges) -> Keep:
    """`cut`, then the kept rows back in their broker ranges: Spark does not know a checkpoint's
    partitions are the ranges, and would shuffle its rows by volume into as many partitions as
    `spark.sql.shuffle.partitions` for the windows after it (a day of 60 volumes: 1.7 times the
    time of computing the table twice, with --blocks), then again by shard."""

    def kept(table: DataFrame) -> DataFrame:
        return cut(table).repartitionById(ranges.partitions, BROKER_RANGE)

    return kept


def _whole_seconds(seconds: float) -> int:
    """A window's length as the whole offset a window over time takes (the same bound as the
    exporter's: `t + -30` is `t - 30.0` in IEEE 754)."""
    if seconds != int(seconds) or seconds < 0:
        raise ValueError(f"a policy's window must be whole seconds, not {seconds!r}")
    return int(seconds)


def with_window_columns(described: DataFrame, policy: ThrottleFactorPolicy) -> DataFrame:
    """`described` + the aggregates of `kvq.model.throttle_factor_policy.ReadingWindows` the
    policy declares, as `kvq.model.reading_trail.ReadingTrail` gives them: `growth0`.. (structs
    of `GrowthWindow`'s fields), windows over time within the volume's *growth run* (a usable
    reading whose growth was not read starts one); `earlier0`.. (structs of `EarlierReading`'s),
    windows over time up to that many seconds before the reading. Sums of whole bytes and
    readings picked whole: the same bits as the exporter."""
    usable = F.col("reason").isNull()
    used = F.col("total_bytes") - F.col("available_bytes")
    kept = F.when(
        usable,
        F.struct(
            F.col("time").alias("time"), used.alias("used"), F.col("grown_bytes").alias("grown")
        ),
    )
    by_volume = Window.partitionBy(*BY_VOLUME).orderBy("sseq")
    starts = F.when(usable & F.col("grown_bytes").isNull(), 1).otherwise(0)
    described = described.select(
        "*",
        F.last(kept, ignorenulls=True)
        .over(by_volume.rowsBetween(Window.unboundedPreceding, -1))
        .alias("window_last"),
        F.sum(starts)
        .over(by_volume.rowsBetween(Window.unboundedPreceding, Window.currentRow))
        .alias("growth_run"),
    )
    in_run = Window.partitionBy(*BY_VOLUME, "growth_run").orderBy("time")
    by_time = Window.partitionBy(*BY_VOLUME).orderBy("time")
    aggregates = []
    for i, seconds in enumerate(policy.growth_windows):
        frame = in_run.rangeBetween(-_whole_seconds(seconds), 0)
        slack = _whole_seconds(seconds + WINDOW_SLACK_SECONDS)
        edge = in_run.rangeBetween(-slack, -_whole_seconds(seconds))
        aggregates += [
            F.first(kept, ignorenulls=True).over(frame).alias(f"growth{i}_first"),
            F.count(F.when(usable, 1)).over(frame).alias(f"growth{i}_count"),
            F.sum(F.when(usable, F.col("grown_bytes"))).over(frame).alias(f"growth{i}_sum"),
            F.last(kept, ignorenulls=True).over(edge).alias(f"growth{i}_edge"),
        ]
    for i, seconds in enumerate(policy.looks_back):
        frame = by_time.rangeBetween(Window.unboundedPreceding, -_whole_seconds(seconds))
        aggregates.append(F.last(kept, ignorenulls=True).over(frame).alias(f"earlier{i}_at"))
    if policy.looks_back:
        earliest = F.first(kept, ignorenulls=True).over(
            by_time.rangeBetween(Window.unboundedPreceding, 0)
        )
        aggregates.append(earliest.alias("window_earliest"))
    described = described.select("*", *aggregates)
    # With no earlier reading in the window: from the last reading (or this one, the first).
    last = F.coalesce(F.col("window_last"), kept)
    windows = []
    for i, seconds in enumerate(policy.growth_windows):
        first, outer = F.col(f"growth{i}_first"), F.col(f"growth{i}_edge")
        alone = F.col(f"growth{i}_count") <= 1
        # The reading just outside the window begins it when nearer its edge (the polls'
        # jitter: `WINDOW_SLACK_SECONDS`); its own growth is then before the window.
        at_edge = F.col("time") - seconds
        nearer = outer.isNotNull() & (at_edge - outer["time"] < first["time"] - at_edge)
        windows.append(
            F.struct(
                F.when(alone, F.coalesce(F.col("grown_bytes"), F.lit(0)))
                .when(nearer, F.col(f"growth{i}_sum"))
                .otherwise(F.col(f"growth{i}_sum") - F.coalesce(first["grown"], F.lit(0)))
                .alias("grown"),
                F.when(alone, last["time"])
                .when(nearer, outer["time"])
                .otherwise(first["time"])
                .alias("start_time"),
                F.when(alone, last["used"])
                .when(nearer, outer["used"])
                .otherwise(first["used"])
                .alias("start_used"),
            ).alias(f"growth{i}")
        )
    for i in range(len(policy.looks_back)):
        at = F.coalesce(F.col(f"earlier{i}_at"), F.col("window_earliest"))
        windows.append(
            F.struct(at["time"].alias("time"), at["used"].alias("used_bytes")).alias(f"earlier{i}")
        )
    return described.select("*", *windows)


def _reads_earlier(policy: ThrottleFactorPolicy) -> bool:
    """Whether the policy reads a volume's earlier readings (its previous ones, or windows)."""
    return bool(policy.history or policy.growth_windows or policy.looks_back)


def _window_work(policy: ThrottleFactorPolicy) -> list[str]:
    """The columns of `with_window_columns` (the policy's windows and what makes them)."""
    if not (policy.growth_windows or policy.looks_back):
        return []
    growth = [
        f"growth{i}{part}"
        for i in range(len(policy.growth_windows))
        for part in ("", "_first", "_count", "_sum", "_edge")
    ]
    earlier = [f"earlier{i}{part}" for i in range(len(policy.looks_back)) for part in ("", "_at")]
    earliest = ["window_earliest"] if policy.looks_back else []
    return ["window_last", "growth_run", *growth, *earlier, *earliest]


def with_policy_columns(
    described: DataFrame, policy: ThrottleFactorPolicy, keep: Keep = _as_planned
) -> DataFrame:
    """`described` + the factor the policy gives each usable description and its gauges
    (`gauge0`..), the same declaration the exporter evaluates on numbers: on the columns READING,
    the volume's previous usable descriptions (`previous1`.., windows over its descriptions in
    success order) and, for a policy that accumulates, its peaks (running maxima since the
    last restart), its held floor and its depth (a running sum since the last restart minus the
    running minimum of that sum less the held floor, 0 included) and, for a policy that holds
    its rises, its level samples and the highest of them over the last `level_hold_seconds` (a
    window over time, as the exporter's `LevelHold` keeps them:
    `kvq.model.throttle_factor_policy`). `keep`: how the rows the cluster's restarts are taken
    from are kept for the second read (`with_cluster_freed`)."""
    ops = SPARK_EXPRESSIONS
    usable = F.col("reason").isNull()
    by_volume = Window.partitionBy(*BY_VOLUME).orderBy("sseq")
    before = by_volume.rowsBetween(Window.unboundedPreceding, -1)
    so_far = by_volume.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    by_time = Window.partitionBy(*BY_VOLUME).orderBy("time")
    if policy.growth_windows or policy.looks_back:
        described = with_window_columns(described, policy)
    if policy.history:
        last = F.last(F.when(usable, F.struct(*READING)), ignorenulls=True).over(before)
        described = described.select("*", last.alias("previous1"))
    for n in range(2, policy.history + 1):  # the previous one's previous, and so on
        earlier = F.last(F.when(usable, F.col(f"previous{n - 1}")), ignorenulls=True)
        described = described.select("*", earlier.over(before).alias(f"previous{n}"))
    depth: Column | float = 0.0
    if policy.accumulates:
        step = _by_variant(policy, lambda r, p: policy.depth_step(r, p, ops)[0])
        restart = _by_variant(policy, lambda r, p: policy.depth_step(r, p, ops)[1])
        forgets = _by_variant(policy, lambda r, p: policy.forgets_peaks(r, ops))
        described = described.select(
            "*",
            F.when(usable, restart.cast("long")).alias("restart"),
            F.when(usable, (restart & forgets).cast("long")).alias("peak_reset"),
            F.when(usable, F.when(restart, F.lit(0.0)).otherwise(step.cast("double"))).alias(
                "step"
            ),
        )
        described = with_cluster_freed(keep(described), policy.freed_grace_seconds)
        samples = [
            _by_variant(policy, lambda r, p, i=i: policy.peak_sample(r, p, ops)[i])
            for i in range(policy.peaks)
        ]
        run = F.sum("restart").over(so_far)
        described = described.select(
            "*",
            run.alias("since_restart"),
            F.sum("peak_reset").over(so_far).alias("since_peak_reset"),
            *(
                F.when(usable, sample.cast("double")).alias(f"peak_sample{i}")
                for i, sample in enumerate(samples)
            ),
        )
        sampled = tuple(F.col(f"peak_sample{i}") for i in range(policy.peaks))
        calm = _by_variant(policy, lambda r, p: policy.calm_seconds(r, p, sampled, ops))
        described = described.select("*", F.when(usable, calm.cast("double")).alias("calm_seconds"))
        # The epoch of the volume's calm time: a running sum, as the exporter adds it up.
        calm_time = F.coalesce(F.sum("calm_seconds").over(so_far), F.lit(0.0))
        memory = F.lit(float(policy.peak_memory_seconds))
        described = described.select("*", F.floor(calm_time / memory).alias("peak_epoch"))
        segment = Window.partitionBy(*BY_VOLUME, "since_restart").orderBy("sseq")
        segment = segment.rowsBetween(Window.unboundedPreceding, Window.currentRow)
        # Each peak: the running maximum over this epoch of calm time since the peaks' last
        # reset, and the maximum over the whole epoch before it (`DepthAccumulator`).
        this_epoch = Window.partitionBy(*BY_VOLUME, "since_peak_reset", "peak_epoch")
        this_epoch = this_epoch.orderBy("sseq").rowsBetween(
            Window.unboundedPreceding, Window.currentRow
        )
        epoch_before = Window.partitionBy(*BY_VOLUME, "since_peak_reset").orderBy("peak_epoch")
        epoch_before = epoch_before.rangeBetween(-1, -1)
        described = described.select(
            "*",
            F.sum("step").over(segment).alias("depth_total"),
            *(
                F.greatest(
                    F.max(f"peak_sample{i}").over(this_epoch),
                    F.max(f"peak_sample{i}").over(epoch_before),
                ).alias(f"peak{i}")
                for i in range(policy.peaks)
            ),
        )
        peaks = tuple(F.col(f"peak{i}") for i in range(policy.peaks))
        levels = None
        if policy.level_hold_seconds:
            # The highest sample of the last seconds, this one's included: a window over time.
            sample = policy.level_sample(_policy_reading(policy), peaks, ops)
            hold = -_whole_seconds(policy.level_hold_seconds)
            described = described.select(
                "*", F.when(usable, F.lit(sample).cast("double")).alias("level_sample")
            )
            held = F.max("level_sample").over(by_time.rangeBetween(hold, 0))
            described = described.select("*", held.alias("level_held"))
            levels = (F.col("level_sample"), F.col("level_held"))
        floor = _by_variant(policy, lambda r, p: policy.depth_floor(r, p, peaks, ops, levels)[0])
        at_once = _by_variant(policy, lambda r, p: policy.depth_floor(r, p, peaks, ops, levels)[1])
        climbed = F.lit(policy.floor_climb) * F.col("time")
        described = described.select(
            "*",
            (floor.cast("double") - climbed).alias("climb_from"),
            at_once.cast("double").alias("floor_at_once"),
        )
        held = F.greatest(climbed + F.min("climb_from").over(segment), F.col("floor_at_once"))
        described = described.select("*", (F.col("depth_total") - held).alias("above_floor"))
        lowest = F.least(F.lit(0.0), F.min("above_floor").over(segment))
        described = described.select("*", (F.col("depth_total") - lowest).alias("depth"))
        depth = F.col("depth")
    factor = _by_variant(policy, lambda r, p: policy.volume_factor(r, p, depth, ops))
    gauges = [
        _by_variant(policy, lambda r, p, i=i: policy.volume_gauges(r, p, ops)[i])
        for i in range(len(policy.gauges))
    ]
    # Added, then the intermediate columns dropped by name: a list of the columns kept would be
    # the plan's schema, which a Spark Connect session asks its server for (the whole plan
    # analysed again).
    return described.select(
        "*",
        F.when(usable, factor.cast("double")).alias("factor"),
        *(
            F.when(usable, g.cast("double")).alias(n)
            for n, g in zip(policy.gauges, gauges, strict=True)
        ),
    ).drop(*_policy_work(policy))


def with_cluster_freed(described: DataFrame, grace_seconds: float) -> DataFrame:
    """`described` (with each usable row's `restart`) + `cluster_freed`
    (`VolumeReading.cluster_freed`): whether a volume of the row's cluster restarted at the
    row's time or at most `grace_seconds` before it, as the exporter's `PolicyRun` tells every
    volume of an observation. The restarts are few (space freed): their times, each with the
    cluster's next, are broadcast to the rows, and each row meets at most the latest at or
    before its time. `described` is read twice (the restarts, then every row): kept
    (`spark.session.checkpointing`), its plan is run once and the rest of the job's plans are
    analysed without it."""
    restarts = described.where(F.col("restart") == 1).select(
        F.col("cluster").alias("freed_cluster"), F.col("time").alias("freed_time")
    )
    in_cluster = Window.partitionBy("freed_cluster").orderBy("freed_time")
    restarts = restarts.distinct().select(
        "*", F.lead("freed_time").over(in_cluster).alias("next_freed_time")
    )
    since = F.col("time") - F.col("freed_time")
    latest = (
        (F.col("cluster") == F.col("freed_cluster"))
        & (since >= 0)
        & (F.col("next_freed_time").isNull() | (F.col("time") < F.col("next_freed_time")))
    )
    joined = described.join(F.broadcast(restarts), latest, "left")
    freed = F.coalesce(since <= F.lit(float(grace_seconds)), F.lit(False))
    return joined.select("*", freed.alias("cluster_freed")).drop(
        "freed_cluster", "freed_time", "next_freed_time"
    )


def _policy_work(policy: ThrottleFactorPolicy) -> list[str]:
    """The intermediate columns of `with_policy_columns` (those a policy does not add: none)."""
    previous = [f"previous{n}" for n in range(1, policy.history + 1)]
    peaks = policy.peaks if policy.accumulates else 0
    return (
        _window_work(policy)
        + previous
        + [
            "restart",
            "cluster_freed",
            "step",
            "since_restart",
            "peak_reset",
            "since_peak_reset",
            "calm_seconds",
            "peak_epoch",
            *(f"peak_sample{i}" for i in range(peaks)),
            *(f"peak{i}" for i in range(peaks)),
            "level_sample",
            "level_held",
            "depth_total",
            "climb_from",
            "floor_at_once",
            "above_floor",
            "depth",
        ]
    )


def described_log_dirs(
    log_dirs: DataFrame,
    policy: ThrottleFactorPolicy,
    ranges: BrokerRanges,
    hold_matters: bool,
    offline_matters: bool = False,
    cut: Keep | None = None,
) -> DataFrame:
    """Each described log dir with its success facts (`violating` the limit, the `factor` the
    policy gives it; both for a usable one only), its next description and, when the hold
    matters, when its broker answered next without it (`back_sseq`, `back_k`; only set where it
    is needed: a violating log dir missing from the next success).

    `offline_matters` (a hold, and log dirs described without sizes in the archive): also the next
    description with sizes (`usable_sseq`, `usable_k`; else the next description) and when it is
    first seen again without sizes-less descriptions in between (`seen_sseq`, `seen_k`; else
    `back`), over the same per-volume order as the rest (no further sort).

    `log_dirs`: `spark.archive_reader.ArchiveRows.log_dirs` of the successes table (cluster,
    cluster_index, sseq, k, expiry_sseq, expiry_k, hold_sseq, hold_k of the describing success).
    `ranges`: the partitions of the per-broker work. `cut`: how a table the policy's columns
    read twice is kept with its plan cut (`spark.session.checkpointing`), or None: planned and
    computed for each read.
    """
    ratio = available_ratio(F.col("available_bytes"), F.col("total_bytes"))
    described = log_dirs.select(
        "cluster_index",
        *VOLUME,
        "sseq",
        "k",
        "expiry_sseq",
        "expiry_k",
        "hold_sseq",
        "hold_k",
        "total_bytes",
        "available_bytes",
        unusable_reason(F.col("error_code"), F.col("total_bytes"), F.col("available_bytes")).alias(
            "reason"
        ),
        # the success's time and the growth, for the policy's readings
        *(["time", "grown_bytes"] if _reads_earlier(policy) else []),
        *(["retention_freed"] if policy.reads_forecast else []),
        ranges.partition().alias(BROKER_RANGE),
    ).repartitionById(ranges.partitions, BROKER_RANGE)
    usable = F.col("reason").isNull()
    described = described.select(
        "*",
        F.when(usable, ratio).alias("available_ratio"),
        F.when(usable, policy.limit.is_violated(F.col("available_bytes"), ratio))
        .otherwise(False)
        .alias("violating"),
    )
    described = with_policy_columns(
        described, policy, _in_ranges(cut, ranges) if cut else _as_planned
    )
    if hold_matters or offline_matters:
        # The broker's next success after this one: the least later sseq among its rows (a
        # growing frame over the descending order: linear, unlike a frame reaching forwards).
        later = (
            Window.partitionBy(*BY_BROKER)
            .orderBy(F.col("sseq").desc())
            .rangeBetween(Window.unboundedPreceding, -1)
        )
        back = F.min(F.struct("sseq", "k")).over(later)
        described = described.select("*", back.alias("broker"))
    else:
        described = described.select(
            "*", F.lit(None).cast("struct<sseq:long,k:long>").alias("broker")
        )
    described = _with_next(described) if not offline_matters else _with_next_offline(described)
    # Last, so that each partition comes out ordered by volume and success: every series whole
    # and in time order for the writer (the explicit sort costs nothing when already so; the
    # range is the same for a partition's every row).
    return described.sortWithinPartitions(*BY_VOLUME, "sseq")


def _departed(next_sseq: Column) -> Column:
    """Violating, and missing from the next success."""
    return F.col("violating") & (next_sseq.isNull() | (next_sseq > F.col("sseq") + 1))


def _with_next(described: DataFrame) -> DataFrame:
    """The next description and `back` over the ascending order (no log dir goes offline: the
    next description is the next one with sizes, and seen again is back)."""
    by_volume = Window.partitionBy(*BY_VOLUME).orderBy("sseq")
    next_sseq = F.lead("sseq").over(by_volume)
    next_k = F.lead("k").over(by_volume)
    broker = F.col("broker")
    back = F.when(_departed(next_sseq), broker)
    return described.select(
        "*",
        next_sseq.alias("next_sseq"),
        next_k.alias("next_k"),
        F.lit(False).alias("next_unusable"),
        back.sseq.alias("back_sseq"),
        back.k.alias("back_k"),
        next_sseq.alias("usable_sseq"),
        next_k.alias("usable_k"),
        back.sseq.alias("seen_sseq"),
        back.k.alias("seen_k"),
    ).drop("broker")


def _with_next_offline(described: DataFrame) -> DataFrame:
    """The next description, the next one with sizes, `back` and `seen`, over the same ascending
    per-volume order as `_with_next` and the policy's windows: the rows come out of it in the
    order the writer needs, where a descending window would cost one more sort of every row."""
    by_volume = Window.partitionBy(*BY_VOLUME).orderBy("sseq")
    sized = F.col("reason").isNull()
    described = described.select("*", F.when(sized, F.struct("sseq", "k")).alias("sized"))
    # Each window function a column of its own, read by field after: one used by two fields
    # would be computed once per field.
    described = described.select(
        "*",
        F.lead(F.struct("sseq", "k", (~sized).alias("unusable"))).over(by_volume).alias("next"),
        # The first later description with sizes: the least later one, their sseq rising.
        _first_later("sized", by_volume).alias("usable"),
    )
    nxt = F.col("next")
    # The broker answered without this log dir before its next description: seen again.
    gap = F.when(F.col("broker.sseq") < F.coalesce(nxt.sseq, F.lit(NEVER)), F.col("broker"))
    described = described.select(
        "*",
        nxt.sseq.alias("next_sseq"),
        nxt.k.alias("next_k"),
        F.coalesce(nxt.unusable, F.lit(False)).alias("next_unusable"),
        F.col("usable.sseq").alias("usable_sseq"),
        F.col("usable.k").alias("usable_k"),
        gap.alias("gap"),
    ).drop("broker", "sized", "next", "usable")
    # The first gap from here on, which is also the least (the broker's next success never moves
    # back as the success moves on); any gap after the next description with sizes comes after
    # it too, where it no longer matters (a run ends there).
    described = described.select("*", _first_later("gap", by_volume).alias("later_gap"))
    seen = F.coalesce(F.col("gap"), F.col("later_gap"))
    back = F.when(_departed(F.col("next_sseq")), F.col("gap"))
    described = described.select("*", back.alias("back"), seen.alias("seen"))
    return described.select(
        "*",
        F.col("back.sseq").alias("back_sseq"),
        F.col("back.k").alias("back_k"),
        F.col("seen.sseq").alias("seen_sseq"),
        F.col("seen.k").alias("seen_k"),
    ).drop("gap", "later_gap", "back", "seen")


def _first_later(column: str, window: WindowSpec) -> Column:
    """The first non-null `column` after this row in `window`'s order, null if none: `lead` that
    skips nulls (SQL syntax only; PySpark's `lead` takes no such flag), one pass over the rows."""
    return F.expr(f"lead(`{column}`) IGNORE NULLS").over(window)


def _never(column: str) -> Column:
    return F.coalesce(F.col(column), F.lit(NEVER))


_RUN_ENDS = ("expiry_sseq", "back_sseq", "hold_sseq", "next_sseq", "usable_sseq", "seen_sseq")
"""The successes a run may end at (`volume_runs`)."""


def volume_runs(
    described: DataFrame, validity: float, hold: float, gauges: tuple[str, ...]
) -> DataFrame:
    """`described_log_dirs` + each description's run: end_sseq/end_k (null: never ends), evicted,
    held_from/held_until, released_at/released_until (null: not released by an expired hold), and
    the policy's `gauges` (its columns, by name). Keeps the partitioning of `described`.

    Built in steps, each value a column of its own, and the offline hold as other inputs to the
    same formulas rather than a second set of them: Spark generates one method for all the
    write stage's per-row code, and past 8,000 bytes of bytecode HotSpot leaves it interpreted
    (unless told otherwise: `spark.session.LOCAL_JAVA_OPTIONS`)."""
    violating, usable = F.col("violating"), F.col("reason").isNull()
    # The successes that may end a run, as plain numbers (no null checks in what follows).
    at = {name: name.removesuffix("_sseq") + "_at" for name in _RUN_ENDS}
    runs = described.select("*", *(_never(name).alias(at[name]) for name in _RUN_ENDS))
    expiry, back, hold_end, next_sseq, usable_sseq, seen = (F.col(at[n]) for n in _RUN_ENDS)
    # Missing until its next description (a broker away): the validity, then the hold.
    until = F.least(back, hold_end)
    runs = runs.select(
        "*",
        until.alias("until"),
        F.when(violating, F.greatest(expiry, until)).otherwise(expiry).alias("runs_out"),
    )
    until, runs_out = F.col("until"), F.col("runs_out")
    # Offline at its next description, still held there: held by the hold alone from then on
    # (`spark.volume_history` module text); a hold already out there ends it at once, loudly.
    offline = (
        violating
        & F.col("next_unusable")
        & F.col("back_sseq").isNull()
        & F.lit(hold > 0)
        & (runs_out >= next_sseq)
    )
    runs = runs.select("*", offline.alias("offline"))
    offline = F.col("offline")
    # A run ends without eviction at its next description (offline: the next one with sizes),
    # or is evicted when its validity or hold runs `out` (offline: the hold from the offline
    # description on, or being seen again first); unusable descriptions are never cached.
    runs = runs.select(
        "*",
        F.when(offline, usable_sseq).otherwise(next_sseq).alias("stays_until"),
        F.when(offline, F.greatest(hold_end, next_sseq)).otherwise(runs_out).alias("out"),
    )
    stays_until, out = F.col("stays_until"), F.col("out")
    evicted_at = F.when(offline, F.least(seen, out)).when(usable, out).otherwise(F.lit(NEVER))
    runs = runs.select("*", evicted_at.alias("evicted_at"))
    evicted_at = F.col("evicted_at")
    runs = runs.select(
        "*",
        F.least(stays_until, evicted_at).alias("end"),
        (evicted_at < stays_until).alias("evicted"),
    )
    end, evicted = F.col("end"), F.col("evicted")
    held_start = F.when(offline, F.least(expiry, next_sseq)).otherwise(expiry)
    runs = runs.select(
        "*",
        held_start.alias("held_start"),
        F.when(offline, end).otherwise(F.least(until, end)).alias("held_until"),
    )
    held_start, held_until = F.col("held_start"), F.col("held_until")
    runs = runs.select(
        "*", F.when(violating & (held_start < held_until), held_start).alias("held_from")
    )
    held_from = F.col("held_from")
    # Every end is one of these successes, and a success's grid index is the same in each.
    end_k = (
        F.when(end == next_sseq, F.col("next_k"))
        .when(end == expiry, F.col("expiry_k"))
        .when(end == back, F.col("back_k"))
        .when(end == hold_end, F.col("hold_k"))
        .when(end == usable_sseq, F.col("usable_k"))
        .otherwise(F.col("seen_k"))
    )
    released = (
        evicted
        & violating
        & F.when(offline, out < seen).otherwise(F.lit(hold > validity) & (out < back))
    )
    released_until = F.least(seen, usable_sseq)
    return runs.select(
        "cluster_index",
        *VOLUME,
        "sseq",
        "k",
        "reason",
        "total_bytes",
        "available_bytes",
        "available_ratio",
        "violating",
        "factor",
        *gauges,  # a policy's
        F.when(end < NEVER, end).alias("end_sseq"),
        F.when(end < NEVER, end_k).alias("end_k"),
        evicted,
        held_from,
        F.when(held_from.isNotNull() & (held_until < NEVER), held_until).alias("held_until"),
        F.when(released, out).alias("released_at"),
        F.when(released & (released_until < NEVER), released_until).alias("released_until"),
    )


EVENT_FIELDS = ("cached", "cached_violating", "held", "hold_expired", "evicted", "throttling")
"""The counts of an event line after its sseq, before the run's factor
(`spark.job.read_events`, `spark.poll_history.VolumeDeltas`)."""


def _event(at: Column, factor_text: Column, **values: Column | int) -> Column:
    """`sseq cached cached_violating held hold_expired evicted throttling factor`: one line.

    The constant counts go in as one text each run of them (one argument instead of a cast per
    count: Spark's per-row code for the write stage stays small, see `volume_runs`)."""
    parts = [at.cast("long").cast("string")]
    constants: list[str] = []
    for name in EVENT_FIELDS:
        value = values.get(name, 0)
        if isinstance(value, int):
            constants.append(str(value))
            continue
        if constants:
            parts.append(F.lit(" ".join(constants)))
            constants = []
        parts.append(value.cast("long").cast("string"))
    if constants:
        parts.append(F.lit(" ".join(constants)))
    return F.concat_ws(" ", *parts, factor_text)


def event_factor() -> Column:
    """The factor text that ends each event line of a run (`events`), computed once per run."""
    return F.coalesce(F.col("factor"), F.lit(UNTHROTTLED)).cast("string")


def events(factor_text: Column) -> list[Column]:
    """The run's events as text lines, null where there is none (all of them null for a volume
    described at every success that the policy leaves unthrottled; unusable descriptions are
    never cached, so they yield none); `factor_text`: `event_factor()`, as a column of its own.

    A run whose volume asks for a factor below 1.0 is *throttling* from its own success to its
    end (at least that success: it is in that success's merged set, however soon it ends); the
    driver takes the smallest factor of the runs throttling at each success."""
    sseq, end = F.col("sseq"), F.col("end_sseq")
    violating = F.col("violating").cast("long")
    cached = F.col("reason").isNull() & (end.isNull() | (end > sseq + 1))
    throttling = F.col("factor") < UNTHROTTLED
    f = factor_text
    return [
        F.when(throttling, _event(sseq, f, throttling=1)),
        F.when(throttling & end.isNotNull(), _event(F.greatest(end, sseq + 1), f, throttling=-1)),
        F.when(cached, _event(sseq + 1, f, cached=1, cached_violating=violating)),
        F.when(cached & end.isNotNull(), _event(end, f, cached=-1, cached_violating=-violating)),
        F.when(F.col("evicted"), _event(end, f, evicted=1)),
        F.when(F.col("held_from").isNotNull(), _event(F.col("held_from"), f, held=1)),
        F.when(F.col("held_until").isNotNull(), _event(F.col("held_until"), f, held=-1)),
        F.when(F.col("released_at").isNotNull(), _event(F.col("released_at"), f, hold_expired=1)),
        F.when(
            F.col("released_until").isNotNull(),
            _event(F.col("released_until"), f, hold_expired=-1),
        ),
    ]
