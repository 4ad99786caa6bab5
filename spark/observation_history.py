"""The per-observation state of one cluster: one small row per poll, windowed per cluster.

Mirrors `kvq.model.throttle_factor_source.ThrottleFactorSource` with window functions over rows
that carry no log dirs (the per-volume work is in `spark.volume_history`):
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
from spark.grid_coverage import explode_onto_grid, index_at_or_after

ORDER = ["time", "file", "line"]


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


def _upto(*order: str) -> Window:
    return (
        Window.partitionBy("cluster")
        .orderBy(*order)
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )


def _is(stage, value: str):
    """1 when `stage` equals `value`, else 0 (also when it is null)."""
    return F.when(stage == value, 1).otherwise(0).cast("long")


def number_observations(observations: DataFrame) -> DataFrame:
    """Adds `sseq` (successes so far), the failure counters and the active brokers so far."""
    upto = _upto(*ORDER)
    stage = F.col("stage")
    return observations.select(
        "cluster",
        *ORDER,
        "ok",
        F.sum(F.col("ok").cast("long")).over(upto).alias("sseq"),
        F.sum(_is(stage, STAGE_DESCRIBE_CLUSTER)).over(upto).alias("failed_cluster"),
        F.sum(_is(stage, STAGE_DESCRIBE_LOG_DIRS)).over(upto).alias("failed_dirs"),
        F.last("brokers", ignorenulls=True).over(upto).alias("active_brokers"),
    )


def _first_success_from(successes: DataFrame, seconds: float, name: str) -> DataFrame:
    """cluster, sseq, `<name>_sseq`/`<name>_k`: the first success at or after time + `seconds`
    (null when none), for every success: a cached volume is expired at the boundary, as the
    Strimzi plugin's CachingVolumeObserver and `kvq.model.volume_cache` judge it."""
    marks = successes.select(
        "cluster",
        F.col("time").alias("at"),
        F.lit(0).alias("kind"),
        F.col("sseq").alias("mark"),
        F.col("k").alias("mark_k"),
        F.lit(None).cast("long").alias("probe"),
    )
    probes = successes.select(
        "cluster",
        (F.col("time") + F.lit(seconds)).alias("at"),
        F.lit(-1).alias("kind"),
        F.lit(None).cast("long").alias("mark"),
        F.lit(None).cast("long").alias("mark_k"),
        F.col("sseq").alias("probe"),
    )
    # Backwards in time, the nearest later success is the last mark seen so far: a running
    # aggregate (an unbounded *following* frame would cost quadratic time). At equal times the
    # successes come first (at or after), the earliest of them last, then the probe.
    later_first = (
        Window.partitionBy("cluster")
        .orderBy(F.col("at").desc(), F.col("kind").desc(), F.col("mark").desc())
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    return (
        marks.unionByName(probes)
        .select(
            "cluster",
            "kind",
            "probe",
            F.last("mark", ignorenulls=True).over(later_first).alias(f"{name}_sseq"),
            F.last("mark_k", ignorenulls=True).over(later_first).alias(f"{name}_k"),
        )
        .filter(F.col("kind") == -1)
        .select("cluster", F.col("probe").alias("sseq"), f"{name}_sseq", f"{name}_k")
    )


def success_table(numbered: DataFrame, rules: FallbackRules, step: int) -> DataFrame:
    """One row per success: cluster, sseq, time, file, line, `k` (the first grid index it is
    visible at), and the first successes at or after time + validity (`expiry_*`: it
    evicts a volume last described here) and time + hold (`hold_*`: a held one)."""
    successes = numbered.filter("ok").select(
        "cluster", "sseq", *ORDER, index_at_or_after(F.col("time"), step).alias("k")
    )
    return successes.join(
        _first_success_from(successes, rules.validity, "expiry"), ["cluster", "sseq"]
    ).join(_first_success_from(successes, rules.hold, "hold"), ["cluster", "sseq"])


def success_states(successes: DataFrame, per_success: DataFrame, rules: FallbackRules) -> DataFrame:
    """Per success: its factor and the cumulative counters as of it.

    `per_success`: cluster, sseq and the volume deltas of `spark.volume_history.per_success`."""
    by_seq = Window.partitionBy("cluster").orderBy("sseq")
    upto = by_seq.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    previous = F.coalesce(F.lag("time").over(by_seq), F.lit(rules.start_time))
    counted = (
        successes.select("cluster", "sseq", "time")
        .join(per_success, ["cluster", "sseq"], "left")
        .na.fill(0)
        .select(
            "*",
            ((F.col("time") > previous + rules.validity) & F.lit(rules.checking))
            .cast("long")
            .alias("gap_fallback"),
            F.sum("d_cached").over(upto).alias("n_cached"),
            F.sum("d_held").over(upto).alias("n_held"),
            F.sum("d_hold_expired").over(upto).alias("n_hold_expired"),
            (F.col("violating") + F.sum("d_cached_violating").over(upto)).alias("n_violating"),
        )
    )
    return counted.select(
        "cluster",
        "sseq",
        F.col("time").alias("success_time"),
        F.when(F.col("n_violating") > 0, THROTTLED).otherwise(UNTHROTTLED).alias("factor"),
        F.sum("n_violating").over(upto).alias("violated_total"),
        F.sum("evicted").over(upto).alias("evictions_total"),
        F.sum("gap_fallback").over(upto).alias("closed_fallbacks"),
        F.col("observed").alias("n_observed"),
        "n_cached",
        "n_held",
        "n_hold_expired",
        "unusable_error",
        "unusable_unknown_size",
    )


def grid_states(
    numbered: DataFrame, states: DataFrame, rules: FallbackRules, grid: EvaluationGrid
) -> DataFrame:
    """One row per emitted grid time (`k`, `t`) with every global value the exporter publishes."""
    on_grid = explode_onto_grid(numbered.drop("ok"), ORDER, grid)
    joined = on_grid.join(states, ["cluster", "sseq"], "left")
    valid_from = F.coalesce(F.col("success_time"), F.lit(rules.start_time))
    fallback = (F.col("t") > valid_from + rules.validity) & F.lit(rules.checking)
    calculated = F.coalesce(F.col("factor"), F.lit(UNTHROTTLED))
    zero = F.lit(0).cast("long")
    return joined.select(
        "cluster",
        "k",
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
