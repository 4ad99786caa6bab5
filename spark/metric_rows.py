"""Sample lines (family, OpenMetrics text) for every family: the global ones from the grid states,
the per-volume ones from the volume runs.

Which state column feeds which family is declared once here; the family list itself (names, types,
help, order) is the static table `kvq.contract.metric_families`. A family the exporter gained
but this table lacks stops the job with a clear message instead of silently missing.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from kvq.contract.metric_families import MetricFamily
from kvq.model.limits import Limit
from kvq.model.observation import STAGE_DESCRIBE_CLUSTER, STAGES
from kvq.model.volume import UNUSABLE_ERROR, UNUSABLE_REASONS
from spark.evaluation_grid import EvaluationGrid
from spark.openmetrics_text import MAX_EXACT_INTEGER

_REASON_COLUMNS = {UNUSABLE_ERROR: "unusable_error"}
GLOBAL: dict[str, list[tuple[dict[str, str], str]]] = {
    "throttle_factor": [({}, "throttle_factor")],
    "fallback_throttle_factor_applied": [({}, "fallback_total")],
    "limit_violated": [({}, "violated_total")],
    "active_brokers": [({}, "active_brokers")],
    "active_log_dirs": [({}, "active_log_dirs")],
    "fallback_active": [({}, "fallback_active")],
    "cached_log_dirs": [({}, "cached_log_dirs")],
    "log_dir_evictions": [({}, "evictions_total")],
    "held_log_dirs": [({}, "held_log_dirs")],
    "violation_hold_expired_log_dirs": [({}, "hold_expired")],
    "unusable_log_dirs": [
        ({"reason": r}, _REASON_COLUMNS.get(r, "unusable_unknown_size")) for r in UNUSABLE_REASONS
    ],
    "poll_failures": [
        ({"stage": s}, {STAGE_DESCRIBE_CLUSTER: "failed_cluster"}.get(s, "failed_dirs"))
        for s in STAGES
    ],
    "last_successful_poll_timestamp_seconds": [({}, "last_success")],
    "limit_bytes": [({}, "limit")],
    "limit_ratio": [({}, "limit")],
    "check_interval_seconds": [({}, "check_interval")],
}
PER_VOLUME = {
    "log_dir_total_bytes": "total_bytes",
    "log_dir_available_bytes": "available_bytes",
    "log_dir_available_ratio": "available_ratio",
    "log_dir_violating": "violating",
}


class UnknownFamily(RuntimeError):
    """The exporter publishes a family the Spark job does not compute."""


def _escaped(value: Column) -> Column:
    """`spark.openmetrics_text.escape_label_value` on a Column (plain replacements, no regex)."""
    for raw, escaped in (("\\", "\\\\"), ("\n", "\\n"), ('"', '\\"')):
        value = F.replace(value, F.lit(raw), F.lit(escaped))
    return value


def _label_text(labels: dict[str, Column]) -> Column:
    """`{a="..",b=".."}` with names sorted, as `spark.openmetrics_text.label_text` writes it."""
    parts: list[Column] = []
    for number, name in enumerate(sorted(labels)):
        parts.append(F.lit(("," if number else "{") + f'{name}="'))
        parts.append(_escaped(labels[name]))
        parts.append(F.lit('"'))
    return F.concat(*parts, F.lit("}"))


def value_text(value: Column) -> Column:
    """A sample value as `spark.openmetrics_text.format_value` writes it."""
    value = value.cast("double")
    whole = (value == F.floor(value)) & (F.abs(value) < F.lit(float(MAX_EXACT_INTEGER)))
    return F.when(whole, value.cast("long").cast("string")).otherwise(value.cast("string"))


def _sample_prefix(name: str, labels: Column, value: Column) -> Column:
    """`name{labels} value ` (the time follows); null when the value is."""
    return F.concat(F.lit(name), labels, F.lit(" "), value_text(value), F.lit(" "))


def _families(catalog: list[MetricFamily]) -> list[tuple[int, MetricFamily, str]]:
    known = []
    for index, family in enumerate(catalog):
        short = family.short
        if short not in GLOBAL and short not in PER_VOLUME:
            raise UnknownFamily(
                f"the exporter publishes {family.name}, which the Spark job does not compute; "
                "add it to spark/metric_rows.py"
            )
        known.append((index, family, short))
    return known


def global_lines(
    grid_states: DataFrame,
    catalog: list[MetricFamily],
    limit: Limit,
    check_interval: float,
    base_labels: dict[str, str],
) -> DataFrame:
    """family, text: every global sample, each series contiguous and in time order, in one
    partition (one row per grid time in, a few dozen lines out)."""
    states = grid_states.withColumn("limit", F.lit(float(limit.threshold))).withColumn(
        "check_interval", F.lit(float(check_interval))
    )
    base = {k: F.lit(v) for k, v in base_labels.items()}
    samples: list[Column] = []
    for index, family, short in _families(catalog):
        for variant, (extra, column) in enumerate(GLOBAL.get(short, [])):
            labels = _label_text({**base, **{k: F.lit(v) for k, v in extra.items()}})
            samples.append(
                F.struct(
                    F.lit(index).alias("family"),
                    F.lit(variant).alias("variant"),
                    _sample_prefix(family.sample_name, labels, F.col(column)).alias("prefix"),
                )
            )
    exploded = states.select("t", F.explode(F.array(*samples)).alias("s")).filter(
        F.col("s.prefix").isNotNull()
    )
    return (
        exploded.repartition(1)
        .sortWithinPartitions("s.family", "s.variant", "t")
        .select(
            F.col("s.family").alias("family"),
            F.concat(F.col("s.prefix"), F.col("t").cast("string")).alias("text"),
        )
    )


def volume_lines(
    runs: DataFrame, grid: EvaluationGrid, catalog: list[MetricFamily], base_labels: dict[str, str]
) -> DataFrame:
    """family, text: the per-volume samples, straight from the runs of `spark.volume_history`
    (partitioned by volume, ordered by success): in each partition every series comes out whole
    and in time order, the families interleaved (the writer splits them, keeping the order)."""
    base = {k: F.lit(v) for k, v in base_labels.items()}
    labels = _label_text(
        {**base, "broker_id": F.col("broker_id").cast("string"), "log_dir": F.col("log_dir")}
    )
    values = {
        "total_bytes": F.col("total_bytes"),
        "available_bytes": F.col("available_bytes"),
        "available_ratio": F.col("available_ratio"),
        "violating": F.col("violating").cast("long"),
    }
    prefixes = [
        F.struct(
            F.lit(index).alias("family"),
            _sample_prefix(family.sample_name, labels, values[PER_VOLUME[short]]).alias("prefix"),
        )
        for index, family, short in _families(catalog)
        if short in PER_VOLUME
    ]
    first, last = grid.first, grid.last
    if grid.ranges is not None:
        first = max(first, min(lo for lo, _ in grid.ranges))
        last = min(last, max(hi for _, hi in grid.ranges))
    lo = F.greatest(F.col("k"), F.lit(first))
    hi = F.least(F.coalesce(F.col("end_k"), F.lit(last + 1)) - 1, F.lit(last))
    shown = runs.filter(F.col("reason").isNull()).select(
        lo.alias("lo"), hi.alias("hi"), F.array(*prefixes).alias("prefixes")
    )
    exploded = (
        shown.filter(F.col("hi") >= F.col("lo"))
        .select(F.explode("prefixes").alias("p"), "lo", "hi")
        .select("p", F.explode(F.sequence("lo", "hi")).alias("k"))
    )
    if grid.ranges is not None:
        exploded = exploded.filter(_emitted(F.col("k"), grid))
    return exploded.select(
        F.col("p.family").alias("family"),
        F.concat(F.col("p.prefix"), (F.col("k") * grid.step).cast("string")).alias("text"),
    )


def _emitted(k: Column, grid: EvaluationGrid) -> Column:
    wanted = F.lit(False)
    for lo, hi in grid.ranges or ():
        wanted = wanted | k.between(lo, hi)
    return wanted
