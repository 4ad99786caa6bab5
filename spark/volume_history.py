"""Per-volume history: the merged set (observed + cached) each successful observation judged.

Mirrors `kvq.model.volume_cache.VolumeCache` with window functions, per (broker, log dir):
- a log dir described usable at success v and absent from the next success starts a *gap episode*;
- while absent, it is cached in each later success u with u <= v + validity;
- it is evicted (counted once) at the first success after v + validity, unless described before;
- being described again (usable or unusable) ends the episode without an eviction;
- the violation hold: a volume violating at v stays (held) past v + validity until its broker
  describes any log dir again or the first success after v + hold; a hold that ran out while the
  broker stays away is counted (`n_hold_expired`) until that broker is back.
Success numbers (`sseq`, 1, 2, ...) order the successes; windows partition by log dir, so the
per-volume work spreads over the cluster.
"""

from __future__ import annotations

from dataclasses import dataclass

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

NO_NEXT = 2**62


@dataclass(frozen=True)
class VolumeHistory:
    merged: DataFrame
    """sseq, broker_id, log_dir, total_bytes, available_bytes, cached, available_ratio,
    violating."""
    per_success: DataFrame
    """sseq, n_observed, n_cached, n_held, n_violating, n_evicted, n_hold_expired, unusable_error,
    unusable_unknown_size."""


def available_ratio(available_bytes: Column, total_bytes: Column) -> Column:
    """`Volume.available_ratio` on Columns: available / total, 0.0 for a volume of 0 bytes."""
    return F.when(total_bytes == 0, F.lit(0.0)).otherwise(available_bytes / total_bytes)


def described_log_dirs(successes: DataFrame) -> DataFrame:
    """One row per log dir described by a success, with its unusable reason (null: a volume).

    The reason is the model's own rule (`has_error`, `lacks_size`) evaluated on Columns.
    """
    d = F.col("d")
    rows = successes.select("cluster", "sseq", "time", F.explode("log_dirs").alias("d"))
    error_code = F.coalesce(d.error_code, F.lit(NO_ERROR))
    return rows.select(
        "cluster",
        "sseq",
        "time",
        d.broker_id.alias("broker_id"),
        d.path.alias("log_dir"),
        d.total_bytes.alias("total_bytes"),
        d.usable_bytes.alias("available_bytes"),
        F.when(has_error(error_code), F.lit(UNUSABLE_ERROR))
        .when(lacks_size(d.total_bytes, d.usable_bytes), F.lit(UNUSABLE_UNKNOWN_SIZE))
        .alias("reason"),
    )


def _gap_episodes(described: DataFrame, last_sseq: int) -> DataFrame:
    by_dir = Window.partitionBy("cluster", "broker_id", "log_dir").orderBy("sseq")
    with_next = described.withColumn("next_described", F.lead("sseq").over(by_dir))
    return with_next.filter(
        F.col("reason").isNull()
        & (F.col("sseq") < last_sseq)
        & (F.col("next_described").isNull() | (F.col("next_described") > F.col("sseq") + 1))
    )


EPISODE = ["cluster", "broker_id", "log_dir", "sseq"]
"""An episode is keyed by its log dir and the success that last described it."""


def _first_success_after(
    episodes: DataFrame, successes: DataFrame, seconds: float, column: str
) -> DataFrame:
    """Adds `column`: the first success strictly later than `time + seconds`."""
    marks = successes.select(
        "cluster",
        F.lit(None).cast("long").alias("broker_id"),
        F.lit(None).cast("string").alias("log_dir"),
        F.lit(None).cast("long").alias("sseq"),
        F.col("time").alias("at"),
        F.lit(0).alias("kind"),
        F.col("sseq").alias("mark"),
    )
    probes = episodes.select(
        *EPISODE,
        (F.col("time") + F.lit(seconds)).alias("at"),
        F.lit(1).alias("kind"),
        F.lit(None).cast("long").alias("mark"),
    )
    following = (
        Window.partitionBy("cluster")
        .orderBy("at", "kind")
        .rowsBetween(Window.currentRow, Window.unboundedFollowing)
    )
    found = (
        marks.unionByName(probes)
        .withColumn(column, F.first("mark", ignorenulls=True).over(following))
        .filter(F.col("kind") == 1)
        .select(*EPISODE, column)
    )
    return episodes.join(found, EPISODE)


def _broker_seen_again(episodes: DataFrame, described: DataFrame) -> DataFrame:
    """Adds `broker_back_sseq`: the first success after the episode's that its broker answered
    (described any log dir)."""
    sightings = described.select(
        "cluster",
        "broker_id",
        F.lit(None).cast("string").alias("log_dir"),
        "sseq",
        F.lit(0).alias("kind"),
        F.col("sseq").alias("mark"),
    ).distinct()
    probes = episodes.select(
        *EPISODE, F.lit(1).alias("kind"), F.lit(None).cast("long").alias("mark")
    )
    following = (
        Window.partitionBy("cluster", "broker_id")
        .orderBy("sseq", "kind")
        .rowsBetween(Window.currentRow, Window.unboundedFollowing)
    )
    found = (
        sightings.unionByName(probes)
        .withColumn("broker_back_sseq", F.first("mark", ignorenulls=True).over(following))
        .filter(F.col("kind") == 1)
        .select(*EPISODE, "broker_back_sseq")
    )
    return episodes.join(found, EPISODE)


def _never(column: str) -> Column:
    return F.coalesce(F.col(column), F.lit(NO_NEXT))


def volume_history(
    successes: DataFrame, limit: Limit, validity: float, hold: float, last_sseq: int
) -> VolumeHistory:
    """`successes`: cluster, sseq, time, log_dirs of every successful observation.

    The violation hold (`kvq.model.volume_cache`): an episode whose volume violated when last
    described ends, instead of at `expired_at` (first success after validity), at
    max(expired_at, min(broker back, first success after the hold)).
    """
    described = described_log_dirs(successes)
    episodes = _gap_episodes(described, last_sseq)
    episodes = _first_success_after(episodes, successes, validity, "expired_at_sseq")
    episodes = _first_success_after(episodes, successes, hold, "hold_expired_at_sseq")
    episodes = _broker_seen_again(episodes, described).withColumn(
        "violated",
        limit.is_violated(
            F.col("available_bytes"),
            available_ratio(F.col("available_bytes"), F.col("total_bytes")),
        ),
    )
    held_until = F.greatest(
        _never("expired_at_sseq"),
        F.least(_never("broker_back_sseq"), _never("hold_expired_at_sseq")),
    )
    episodes = episodes.withColumn(
        "evicted_at", F.when(F.col("violated"), held_until).otherwise(_never("expired_at_sseq"))
    )
    ends = F.least(_never("next_described"), F.col("evicted_at"), F.lit(last_sseq + 1))
    cached = (
        episodes.withColumn("_end", ends - 1)
        .filter(F.col("_end") >= F.col("sseq") + 1)
        .withColumn("_first_held", _never("expired_at_sseq"))
        .withColumn("sseq", F.explode(F.sequence(F.col("sseq") + 1, F.col("_end"))))
        .select(
            "sseq",
            "broker_id",
            "log_dir",
            "total_bytes",
            "available_bytes",
            (F.col("sseq") >= F.col("_first_held")).alias("held"),
        )
        .withColumn("cached", F.lit(True))
    )
    evictions = episodes.filter(
        (F.col("evicted_at") < _never("next_described")) & (F.col("evicted_at") <= last_sseq)
    )
    evicted = evictions.groupBy(F.col("evicted_at").alias("sseq")).agg(
        F.count("*").alias("n_evicted")
    )
    # Released by the hold while the broker stays away: reported until the broker is back.
    hold_released = (
        evictions.filter(
            F.lit(hold > validity)
            & F.col("violated")
            & (_never("broker_back_sseq") > F.col("evicted_at"))
        )
        .withColumn("_until", F.least(_never("broker_back_sseq"), F.lit(last_sseq + 1)) - 1)
        .select(F.explode(F.sequence(F.col("evicted_at"), F.col("_until"))).alias("sseq"))
        .groupBy("sseq")
        .agg(F.count("*").alias("n_hold_expired"))
    )
    observed = (
        described.filter(F.col("reason").isNull())
        .select("sseq", "broker_id", "log_dir", "total_bytes", "available_bytes")
        .withColumn("held", F.lit(False))
        .withColumn("cached", F.lit(False))
    )
    merged = (
        observed.unionByName(cached)
        .withColumn(
            "available_ratio", available_ratio(F.col("available_bytes"), F.col("total_bytes"))
        )
        .withColumn(
            "violating", limit.is_violated(F.col("available_bytes"), F.col("available_ratio"))
        )
    )
    counts = merged.groupBy("sseq").agg(
        F.sum((~F.col("cached")).cast("long")).alias("n_observed"),
        F.sum(F.col("cached").cast("long")).alias("n_cached"),
        F.sum(F.col("held").cast("long")).alias("n_held"),
        F.sum(F.col("violating").cast("long")).alias("n_violating"),
    )
    unusable = described.groupBy("sseq").agg(
        F.sum((F.col("reason") == UNUSABLE_ERROR).cast("long")).alias("unusable_error"),
        F.sum((F.col("reason") == UNUSABLE_UNKNOWN_SIZE).cast("long")).alias(
            "unusable_unknown_size"
        ),
    )
    per_success = (
        successes.select("sseq")
        .join(counts, "sseq", "left")
        .join(unusable, "sseq", "left")
        .join(evicted, "sseq", "left")
        .join(hold_released, "sseq", "left")
        .na.fill(0)
    )
    return VolumeHistory(merged, per_success)
