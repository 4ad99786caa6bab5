"""Per-volume history: each log dir's descriptions as runs on the success sequence and the grid.

Mirrors `kvq.model.volume_cache.VolumeCache` with one window partitioned by volume (cluster,
broker, log dir), so the per-volume work, 99% of the data, spreads over the cluster. A log dir
described usable at success s (time T) stays in the merged set of every later success until the
*end* of its run:
- the next success describing it again (usable or not): no eviction;
- else the first success at or after T + validity (`expiry`, the plugin's boundary), which
  evicts it (counted once);
- the violation hold: if it violated at s, it stays (held) past the expiry until its broker
  answers again (`back`: the broker's next success describing any log dir) or the first success
  at or after T + hold; a hold that runs out while the broker stays away is reported
  (`hold_expired`) until that broker is back;
- no end: to the last success.
The successes strictly inside the run hold it as a cached volume; its series shows the values of s
at grid indexes [k(s), k(end) - 1], where k(u) is the first grid index success u is visible at.
Per success, the runs give small deltas (observed, cached, held, violating, evicted, unusable,
hold expired) that the per-cluster windows of `spark.observation_history` sum up.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from kvq.model.limits import Limit
from kvq.model.volume import (
    NO_ERROR,
    UNUSABLE_ERROR,
    UNUSABLE_UNKNOWN_SIZE,
    has_error,
    lacks_size,
)

VOLUME = ["cluster", "broker_id", "log_dir"]
NEVER = 2**62
"""A success number later than any: an end that never comes."""
DELTAS = (
    "observed",
    "violating",
    "unusable_error",
    "unusable_unknown_size",
    "d_cached",
    "d_cached_violating",
    "d_held",
    "d_hold_expired",
    "evicted",
)


def available_ratio(available_bytes: Column, total_bytes: Column) -> Column:
    """`Volume.available_ratio` on Columns: available / total, 0.0 for a volume of 0 bytes."""
    return F.when(total_bytes == 0, F.lit(0.0)).otherwise(available_bytes / total_bytes)


def _reason() -> Column:
    """The model's own rule (`has_error`, `lacks_size`) on Columns; null for a volume."""
    error_code = F.coalesce(F.col("error_code"), F.lit(NO_ERROR))
    return F.when(has_error(error_code), F.lit(UNUSABLE_ERROR)).when(
        lacks_size(F.col("total_bytes"), F.col("available_bytes")), F.lit(UNUSABLE_UNKNOWN_SIZE)
    )


def described_log_dirs(
    log_dirs: DataFrame, successes: DataFrame, limit: Limit, broadcast: bool = True
) -> DataFrame:
    """Each described log dir with its success facts and its next description, partitioned by
    volume and ordered by `sseq` (the one per-volume shuffle; cache it: it is read twice).

    `log_dirs`: cluster, file, line, broker_id, log_dir, total_bytes, available_bytes, error_code;
    `successes`: `spark.observation_history.success_table` (one small row per poll: broadcast
    unless `broadcast` is False, for archives of millions of polls).
    """
    ratio = available_ratio(F.col("available_bytes"), F.col("total_bytes"))
    described = log_dirs.join(
        F.broadcast(successes) if broadcast else successes, ["cluster", "file", "line"]
    ).select(
        *VOLUME,
        "sseq",
        "k",
        "expiry_sseq",
        "expiry_k",
        "hold_sseq",
        "hold_k",
        "total_bytes",
        "available_bytes",
        _reason().alias("reason"),
    )
    usable = F.col("reason").isNull()
    by_volume = Window.partitionBy(*VOLUME).orderBy("sseq")
    return described.select(
        "*",
        F.when(usable, ratio).alias("available_ratio"),
        F.when(usable, limit.is_violated(F.col("available_bytes"), ratio))
        .otherwise(False)
        .alias("violating"),
        F.lead("sseq").over(by_volume).alias("next_sseq"),
        F.lead("k").over(by_volume).alias("next_k"),
    )


def _departed_violating(described: DataFrame) -> DataFrame:
    """For volumes violating when they went missing: when their broker answered again
    (`back_sseq`, `back_k`; null: never). Small: one row per such departure."""
    departures = described.filter(
        F.col("violating")
        & (F.col("next_sseq").isNull() | (F.col("next_sseq") > F.col("sseq") + 1))
    ).select(*VOLUME, "sseq")
    by_broker = Window.partitionBy("cluster", "broker_id").orderBy("sseq")
    sightings = (
        described.select("cluster", "broker_id", "sseq", "k")
        .distinct()
        .select(
            "cluster",
            "broker_id",
            "sseq",
            F.lead("sseq").over(by_broker).alias("back_sseq"),
            F.lead("k").over(by_broker).alias("back_k"),
        )
    )
    return sightings.join(F.broadcast(departures), ["cluster", "broker_id", "sseq"])


def _never(column: str) -> Column:
    return F.coalesce(F.col(column), F.lit(NEVER))


def volume_runs(described: DataFrame, validity: float, hold: float) -> DataFrame:
    """`described_log_dirs` + each description's run: end_sseq/end_k (null: never ends), evicted,
    held_from/held_until, hold_expired_until (null: not released by an expired hold). Keeps the
    partitioning and order of `described` (the departures are broadcast to it)."""
    runs = described
    if hold > validity:
        runs = runs.join(F.broadcast(_departed_violating(described)), [*VOLUME, "sseq"], "left")
    else:  # the hold never outlasts the validity: nothing is held
        runs = runs.withColumn("back_sseq", F.lit(None).cast("long")).withColumn(
            "back_k", F.lit(None).cast("long")
        )
    violating = F.col("violating")
    expiry, back, hold_end, next_sseq = (
        _never("expiry_sseq"),
        _never("back_sseq"),
        _never("hold_sseq"),
        _never("next_sseq"),
    )
    until = F.least(back, hold_end)
    evicted_at = F.when(violating, F.greatest(expiry, until)).otherwise(expiry)
    evicted = F.col("reason").isNull() & (evicted_at < next_sseq)
    end = F.when(evicted, evicted_at).otherwise(next_sseq)
    end_k = (
        F.when(~evicted, F.col("next_k"))
        .when(evicted_at == expiry, F.col("expiry_k"))
        .when(evicted_at == back, F.col("back_k"))
        .otherwise(F.col("hold_k"))
    )
    held_until = F.least(until, end)
    released = evicted & violating & F.lit(hold > validity) & (evicted_at < back)
    return runs.select(
        *VOLUME,
        "sseq",
        "k",
        "reason",
        "total_bytes",
        "available_bytes",
        "available_ratio",
        "violating",
        F.when(end < NEVER, end).alias("end_sseq"),
        F.when(end < NEVER, end_k).alias("end_k"),
        evicted.alias("evicted"),
        F.when(violating & (expiry < held_until), expiry).alias("held_from"),
        F.when(violating & (expiry < held_until) & (held_until < NEVER), held_until).alias(
            "held_until"
        ),
        F.when(released, evicted_at).alias("released_at"),
        F.when(released & (back < NEVER), back).alias("released_until"),
    )


def _delta(at: Column, **values: Column) -> Column:
    fields = [at.alias("sseq")]
    for name in DELTAS:
        fields.append(values.get(name, F.lit(0)).cast("long").alias(name))
    return F.struct(*fields)


def per_success(runs: DataFrame) -> DataFrame:
    """cluster, sseq and the sums of DELTAS at that success (small: partial aggregation)."""
    usable = F.col("reason").isNull()
    sseq, end = F.col("sseq"), F.col("end_sseq")
    violating = F.col("violating").cast("long")
    cached = usable & (end.isNull() | (end > sseq + 1))
    one = F.lit(1)
    events = F.array(
        _delta(
            sseq,
            observed=usable,
            violating=violating,
            unusable_error=F.col("reason") == UNUSABLE_ERROR,
            unusable_unknown_size=F.col("reason") == UNUSABLE_UNKNOWN_SIZE,
        ),
        F.when(cached, _delta(sseq + 1, d_cached=one, d_cached_violating=violating)),
        F.when(cached & end.isNotNull(), _delta(end, d_cached=-one, d_cached_violating=-violating)),
        F.when(F.col("evicted"), _delta(end, evicted=one)),
        F.when(F.col("held_from").isNotNull(), _delta(F.col("held_from"), d_held=one)),
        F.when(F.col("held_until").isNotNull(), _delta(F.col("held_until"), d_held=-one)),
        F.when(F.col("released_at").isNotNull(), _delta(F.col("released_at"), d_hold_expired=one)),
        F.when(
            F.col("released_until").isNotNull(),
            _delta(F.col("released_until"), d_hold_expired=-one),
        ),
    )
    return (
        runs.select("cluster", F.explode(F.filter(events, lambda e: e.isNotNull())).alias("e"))
        .groupBy("cluster", "e.sseq")
        .agg(*(F.sum(f"e.{name}").alias(name) for name in DELTAS))
    )
