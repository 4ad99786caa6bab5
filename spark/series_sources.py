"""Which value feeds each metric family the backfill writes: declared once, checked once.

The family list itself (names, types, help, order) is the static table
`kvq.contract.metric_families`; here each family gets its source: a field of
`spark.poll_history.GridState` (the cluster-wide series, written by the driver) or a column of
the volume runs (`spark.metric_rows`, written by Spark). A family the exporter gained but neither
table knows stops the job with a clear message instead of silently missing.
"""

from __future__ import annotations

from kvq.contract.metric_families import MetricFamily
from kvq.model.observation import STAGE_DESCRIBE_CLUSTER, STAGES
from kvq.model.volume import UNUSABLE_ERROR, UNUSABLE_REASONS

_REASON_FIELDS = {UNUSABLE_ERROR: "unusable_error"}
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
        ({"reason": r}, _REASON_FIELDS.get(r, "unusable_unknown_size")) for r in UNUSABLE_REASONS
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
EVENTS = -1
"""The `family` of the runs' event lines (read back by the driver, never published)."""
PER_VOLUME = {
    "log_dir_total_bytes": "total_bytes",
    "log_dir_available_bytes": "available_bytes",
    "log_dir_available_ratio": "available_ratio",
    "log_dir_violating": "violating",
    "log_dir_fill_rate_bytes_per_second": "log_dir_fill_rate_bytes_per_second",
    "log_dir_seconds_to_limit": "log_dir_seconds_to_limit",
    "log_dir_throttle_factor": "factor",
}


class UnknownFamily(RuntimeError):
    """The exporter publishes a family the Spark job does not compute."""


def families(catalog: list[MetricFamily]) -> list[tuple[int, MetricFamily, str]]:
    """(catalog index, family, short name) of every family; refuses one nobody computes."""
    known = []
    for index, family in enumerate(catalog):
        short = family.short
        if short not in GLOBAL and short not in PER_VOLUME:
            raise UnknownFamily(
                f"the exporter publishes {family.name}, which the Spark job does not compute; "
                "add it to spark/series_sources.py"
            )
        known.append((index, family, short))
    return known
