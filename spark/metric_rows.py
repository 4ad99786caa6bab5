"""Grid states -> sample rows (family, sample name, label text, time, value) for every family.

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
    value = F.regexp_replace(value, r"\\", r"\\\\")
    value = F.regexp_replace(value, "\n", r"\\n")
    return F.regexp_replace(value, '"', r"\\\"")


def _label_text(labels: dict[str, Column]) -> Column:
    """`{a="..",b=".."}` with names sorted, as `spark.openmetrics_text.label_text` writes it."""
    parts: list[Column] = []
    for number, name in enumerate(sorted(labels)):
        parts.append(F.lit(("," if number else "{") + f'{name}="'))
        parts.append(_escaped(labels[name]))
        parts.append(F.lit('"'))
    return F.concat(*parts, F.lit("}"))


def sample_rows(
    grid_states: DataFrame,
    volume_states: DataFrame,
    catalog: list[MetricFamily],
    limit: Limit,
    check_interval: float,
    base_labels: dict[str, str],
) -> DataFrame:
    """Columns: family (catalog index), name, labels (text), t (seconds), value (double)."""
    states = grid_states.withColumn("limit", F.lit(float(limit.threshold))).withColumn(
        "check_interval", F.lit(float(check_interval))
    )
    base = {k: F.lit(v) for k, v in base_labels.items()}
    global_samples: list[Column] = []
    volume_samples: list[Column] = []
    for index, family in enumerate(catalog):
        short = family.short
        if short in GLOBAL:
            for extra, column in GLOBAL[short]:
                labels = {**base, **{k: F.lit(v) for k, v in extra.items()}}
                global_samples.append(
                    F.struct(
                        F.lit(index).alias("family"),
                        F.lit(family.sample_name).alias("name"),
                        _label_text(labels).alias("labels"),
                        F.col(column).cast("double").alias("value"),
                    )
                )
        elif short in PER_VOLUME:
            volume_samples.append(
                F.struct(
                    F.lit(index).alias("family"),
                    F.lit(family.sample_name).alias("name"),
                    F.col("_labels").alias("labels"),
                    F.col(PER_VOLUME[short]).cast("double").alias("value"),
                )
            )
        else:
            raise UnknownFamily(
                f"the exporter publishes {family.name}, which the Spark job does not compute; "
                "add it to spark/metric_rows.py"
            )
    volume_labels = {
        **base,
        "broker_id": F.col("broker_id").cast("string"),
        "log_dir": F.col("log_dir"),
    }
    volumes = volume_states.withColumn("_labels", _label_text(volume_labels))
    rows = [
        states.select("t", F.explode(F.array(*global_samples)).alias("s")),
        volumes.select("t", F.explode(F.array(*volume_samples)).alias("s")),
    ]
    union = rows[0].unionByName(rows[1])
    return union.select("s.family", "s.name", "s.labels", "t", "s.value").filter(
        F.col("value").isNotNull()
    )
