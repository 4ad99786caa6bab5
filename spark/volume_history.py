"""Per-volume history: the merged set (observed + cached) each successful observation judged.

Mirrors `kvq.model.volume_cache.VolumeCache` with window functions, per (broker, log dir):
- a log dir described usable at success v and absent from the next success starts a *gap episode*;
- while absent, it is cached in each later success u with u <= v + validity;
- it is evicted (counted once) at the first success after v + validity, unless described before;
- being described again (usable or unusable) ends the episode without an eviction.
Success numbers (`sseq`, 1, 2, ...) order the successes; windows partition by log dir, so the
per-volume work spreads over the cluster.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from kvq.model.limits import Limit
from kvq.model.volume import (
    NO_ERROR,
    UNUSABLE_ERROR,
    UNUSABLE_NO_KIP827,
    has_error,
    lacks_size,
)

NO_NEXT = 2**62


@dataclass(frozen=True)
class VolumeHistory:
    merged: DataFrame
    """sseq, broker_id, log_dir, total_bytes, available_bytes, cached, violating."""
    per_success: DataFrame
    """sseq, n_observed, n_cached, n_violating, n_evicted, unusable_error, unusable_no_kip827."""


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
        .when(lacks_size(d.total_bytes, d.usable_bytes), F.lit(UNUSABLE_NO_KIP827))
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


def _first_success_after_expiry(
    episodes: DataFrame, successes: DataFrame, validity: float
) -> DataFrame:
    """Adds `expired_at_sseq`: the first success strictly later than `time + validity`."""
    marks = successes.select(
        "cluster", F.col("time").alias("at"), F.lit(0).alias("kind"), F.col("sseq").alias("mark")
    )
    keyed = episodes.withColumn("episode", F.monotonically_increasing_id())
    probes = keyed.select(
        "cluster",
        (F.col("time") + F.lit(validity)).alias("at"),
        F.lit(1).alias("kind"),
        F.lit(None).cast("long").alias("mark"),
        "episode",
    )
    following = (
        Window.partitionBy("cluster")
        .orderBy("at", "kind")
        .rowsBetween(Window.currentRow, Window.unboundedFollowing)
    )
    found = (
        marks.withColumn("episode", F.lit(None).cast("long"))
        .unionByName(probes)
        .withColumn("expired_at_sseq", F.first("mark", ignorenulls=True).over(following))
        .filter(F.col("kind") == 1)
        .select("episode", "expired_at_sseq")
    )
    return keyed.join(found, "episode").drop("episode")


def volume_history(
    successes: DataFrame, limit: Limit, validity: float, last_sseq: int
) -> VolumeHistory:
    """`successes`: cluster, sseq, time, log_dirs of every successful observation."""
    described = described_log_dirs(successes)
    episodes = _first_success_after_expiry(_gap_episodes(described, last_sseq), successes, validity)
    ends = F.least(
        F.coalesce(F.col("next_described"), F.lit(NO_NEXT)),
        F.coalesce(F.col("expired_at_sseq"), F.lit(NO_NEXT)),
        F.lit(last_sseq + 1),
    )
    cached = (
        episodes.withColumn("_end", ends - 1)
        .filter(F.col("_end") >= F.col("sseq") + 1)
        .withColumn("sseq", F.explode(F.sequence(F.col("sseq") + 1, F.col("_end"))))
        .select("sseq", "broker_id", "log_dir", "total_bytes", "available_bytes")
        .withColumn("cached", F.lit(True))
    )
    evicted = (
        episodes.filter(
            F.col("expired_at_sseq").isNotNull()
            & (
                F.col("next_described").isNull()
                | (F.col("expired_at_sseq") < F.col("next_described"))
            )
        )
        .groupBy(F.col("expired_at_sseq").alias("sseq"))
        .agg(F.count("*").alias("n_evicted"))
    )
    observed = (
        described.filter(F.col("reason").isNull())
        .select("sseq", "broker_id", "log_dir", "total_bytes", "available_bytes")
        .withColumn("cached", F.lit(False))
    )
    merged = observed.unionByName(cached).withColumn(
        "violating", limit.is_violated(F.col("available_bytes"), F.col("total_bytes"))
    )
    counts = merged.groupBy("sseq").agg(
        F.sum((~F.col("cached")).cast("long")).alias("n_observed"),
        F.sum(F.col("cached").cast("long")).alias("n_cached"),
        F.sum(F.col("violating").cast("long")).alias("n_violating"),
    )
    unusable = described.groupBy("sseq").agg(
        F.sum((F.col("reason") == UNUSABLE_ERROR).cast("long")).alias("unusable_error"),
        F.sum((F.col("reason") == UNUSABLE_NO_KIP827).cast("long")).alias("unusable_no_kip827"),
    )
    per_success = (
        successes.select("sseq")
        .join(counts, "sseq", "left")
        .join(unusable, "sseq", "left")
        .join(evicted, "sseq", "left")
        .na.fill(0)
    )
    return VolumeHistory(merged, per_success)
