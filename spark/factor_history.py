"""Factor history: the state the exporter held at every grid time, from observation rows.

Mirrors `kvq.model.throttle_factor_source.ThrottleFactorSource` with window functions:
- observations are ordered by (time, file, line); `sseq` numbers the successes (0: none yet);
- a success's factor is 0.0 if any volume of its merged set violates, else 1.0;
- at grid time t, with s the last success <= t (or the start time, the first observation's time,
  before any): the fallback applies when t > s + validity;
- the fallback counter at t = gaps between consecutive successes (the first one starting at the
  start time) longer than validity, plus 1 while the fallback applies at t;
- active brokers come from the latest observation not failed at describe_cluster.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from kvq.model.observation import STAGE_DESCRIBE_CLUSTER, STAGE_DESCRIBE_LOG_DIRS
from kvq.model.throttle_factor_policy import THROTTLED, UNTHROTTLED
from spark.evaluation_grid import EvaluationGrid
from spark.grid_coverage import explode_onto_grid
from spark.volume_history import VolumeHistory

ORDER = ["time", "file", "line"]


@dataclass(frozen=True, slots=True)
class FallbackRules:
    validity: float
    fallback_factor: float
    start_time: float
    """The first observation's time: the initial factor 1.0 is valid from here."""
    checking: bool = True
    """False with storage.check.interval=PT0S: factor 1.0 for good, never a fallback."""


def number_observations(observations: DataFrame) -> DataFrame:
    """Adds `sseq`: the number of successes up to and including each observation."""
    upto = (
        Window.partitionBy("cluster")
        .orderBy(*ORDER)
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    return observations.withColumn("sseq", F.sum(F.col("ok").cast("long")).over(upto))


def success_states(successes: DataFrame, volumes: VolumeHistory, rules: FallbackRules) -> DataFrame:
    """Per success: its factor and the cumulative counters as of it."""
    by_seq = Window.partitionBy("cluster").orderBy("sseq")
    upto = by_seq.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    previous = F.coalesce(F.lag("time").over(by_seq), F.lit(rules.start_time))
    return (
        successes.select("cluster", "sseq", "time")
        .join(volumes.per_success, "sseq")
        .withColumn(
            "gap_fallback",
            ((F.col("time") > previous + rules.validity) & F.lit(rules.checking)).cast("long"),
        )
        .select(
            "cluster",
            "sseq",
            F.col("time").alias("success_time"),
            F.when(F.col("n_violating") > 0, THROTTLED).otherwise(UNTHROTTLED).alias("factor"),
            F.sum("n_violating").over(upto).alias("violated_total"),
            F.sum("n_evicted").over(upto).alias("evictions_total"),
            F.sum("gap_fallback").over(upto).alias("closed_fallbacks"),
            "n_observed",
            "n_cached",
            "n_held",
            "n_hold_expired",
            "unusable_error",
            "unusable_unknown_size",
        )
    )


def _is(stage, value: str):
    """1 when `stage` equals `value`, else 0 (also when it is null)."""
    return F.when(stage == value, 1).otherwise(0).cast("long")


def grid_states(
    numbered: DataFrame, states: DataFrame, rules: FallbackRules, grid: EvaluationGrid
) -> DataFrame:
    """One row per emitted grid time with every global value the exporter would publish."""
    upto = (
        Window.partitionBy("cluster")
        .orderBy(*ORDER)
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    stage = F.col("stage")
    per_observation = numbered.select(
        "cluster",
        *ORDER,
        "sseq",
        F.sum(_is(stage, STAGE_DESCRIBE_CLUSTER)).over(upto).alias("failed_cluster"),
        F.sum(_is(stage, STAGE_DESCRIBE_LOG_DIRS)).over(upto).alias("failed_dirs"),
        F.last("brokers", ignorenulls=True).over(upto).alias("active_brokers"),
    )
    on_grid = explode_onto_grid(per_observation, ORDER, grid)
    joined = on_grid.join(states.drop("cluster"), "sseq", "left")
    valid_from = F.coalesce(F.col("success_time"), F.lit(rules.start_time))
    fallback = (F.col("t") > valid_from + rules.validity) & F.lit(rules.checking)
    calculated = F.coalesce(F.col("factor"), F.lit(UNTHROTTLED))
    zero = F.lit(0).cast("long")
    return joined.select(
        "t",
        F.when(fallback, F.lit(rules.fallback_factor))
        .otherwise(calculated if rules.checking else F.lit(UNTHROTTLED))
        .alias("throttle_factor"),
        (F.coalesce(F.col("closed_fallbacks"), zero) + fallback.cast("long")).alias(
            "fallback_total"
        ),
        fallback.cast("long").alias("fallback_active"),
        F.coalesce(F.col("violated_total"), zero).alias("violated_total"),
        F.coalesce(F.col("evictions_total"), zero).alias("evictions_total"),
        F.coalesce(F.col("active_brokers"), zero).alias("active_brokers"),
        F.coalesce(F.col("n_observed"), zero).alias("active_log_dirs"),
        F.coalesce(F.col("n_cached"), zero).alias("cached_log_dirs"),
        F.coalesce(F.col("n_held"), zero).alias("held_log_dirs"),
        F.coalesce(F.col("n_hold_expired"), zero).alias("hold_expired"),
        F.coalesce(F.col("unusable_error"), zero).alias("unusable_error"),
        F.coalesce(F.col("unusable_unknown_size"), zero).alias("unusable_unknown_size"),
        F.col("failed_cluster"),
        F.col("failed_dirs"),
        F.col("success_time").alias("last_success"),
    )


def volume_states(successes: DataFrame, volumes: VolumeHistory, grid: EvaluationGrid) -> DataFrame:
    """One row per emitted grid time and volume of the last success's merged set."""
    owned = explode_onto_grid(successes.select("cluster", "sseq", "time"), ["sseq"], grid)
    return owned.select("sseq", "t").join(volumes.merged, "sseq")
