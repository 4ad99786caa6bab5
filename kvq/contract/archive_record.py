"""The archive's line format: one JSON object per poll, read back by the Spark backfill.

Schema version 1 (documented in docs/exporter.md, "The archive"):
  {"schema": 1, "cluster": "kafka", "time": 1763820000.123, "outcome": "success" | "failure",
   "failure_stage": null | "describe_cluster" | "describe_log_dirs", "error": null | "text",
   "active_brokers": [0, 1, 2],
   "log_dirs": [{"broker_id": 0, "path": "/var/lib/kafka/0", "total_bytes": 1000,
                 "usable_bytes": 400, "error_code": 0, "grown_bytes": 5000,
                 "retention_freed_bytes": {"5": 0, "10": 1048576, ...}}, ...]}
`time` is seconds since the epoch (UTC) at which the poll completed. `grown_bytes` (optional, only
when the exporter read the partitions' sizes: `LogDirDescription.grown_bytes`) is left out when
unknown; a line without it reads as unknown (None). `retention_freed_bytes` (optional, only when
the exporter foresaw retention: `LogDirDescription.retention_freed`): the seconds ahead of `time`
to the bytes retention frees by then at least (-1: past the log dir's shortest retention time,
unknown); read back as unknown (None) unless it has every one of
`kvq.model.retention_forecast.AHEAD_SECONDS`.
"""

from __future__ import annotations

import json
from typing import Any

from kvq.model.observation import Observation
from kvq.model.retention_forecast import AHEAD_SECONDS
from kvq.model.volume import LogDirDescription

SCHEMA_VERSION = 1
SUCCESS = "success"
FAILURE = "failure"


class ArchiveRecordError(ValueError):
    """A line that is not a valid archive record; the message says which field is wrong."""


def to_record(observation: Observation, cluster: str) -> dict[str, Any]:
    return {
        "schema": SCHEMA_VERSION,
        "cluster": cluster,
        "time": observation.time,
        "outcome": SUCCESS if observation.succeeded else FAILURE,
        "failure_stage": observation.failure_stage,
        "error": observation.error,
        "active_brokers": list(observation.active_brokers),
        "log_dirs": [_log_dir_record(d) for d in observation.log_dirs],
    }


def _log_dir_record(d: LogDirDescription) -> dict[str, Any]:
    record: dict[str, Any] = {
        "broker_id": d.broker_id,
        "path": d.log_dir,
        "total_bytes": d.total_bytes,
        "usable_bytes": d.usable_bytes,
        "error_code": d.error_code,
    }
    if d.grown_bytes is not None:
        record["grown_bytes"] = d.grown_bytes
    if d.retention_freed is not None:
        record["retention_freed_bytes"] = {
            str(ahead): freed for ahead, freed in zip(AHEAD_SECONDS, d.retention_freed, strict=True)
        }
    return record


def _retention_freed(value: Any) -> tuple[int, ...] | None:
    """A log dir's forecast from its record: None unless it has every time ahead."""
    if not isinstance(value, dict) or any(str(a) not in value for a in AHEAD_SECONDS):
        return None
    return tuple(int(value[str(a)]) for a in AHEAD_SECONDS)


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


def to_line(observation: Observation, cluster: str) -> str:
    """One archive line, newline included, with no whitespace inside."""
    return json.dumps(to_record(observation, cluster), separators=(",", ":")) + "\n"


def from_record(record: Any) -> tuple[str, Observation]:
    """(cluster, observation) from a decoded record; raises ArchiveRecordError when invalid."""
    if not isinstance(record, dict):
        raise ArchiveRecordError("a record must be a JSON object")
    if record.get("schema") != SCHEMA_VERSION:
        raise ArchiveRecordError(f"schema must be {SCHEMA_VERSION}, got {record.get('schema')!r}")
    try:
        outcome = record["outcome"]
        if outcome not in (SUCCESS, FAILURE):
            raise ArchiveRecordError(f"outcome must be success or failure, got {outcome!r}")
        log_dirs = tuple(
            LogDirDescription(
                int(d["broker_id"]),
                str(d["path"]),
                int(d["total_bytes"]),
                int(d["usable_bytes"]),
                int(d.get("error_code", 0)),
                _optional_int(d.get("grown_bytes")),
                retention_freed=_retention_freed(d.get("retention_freed_bytes")),
            )
            for d in record.get("log_dirs") or ()
        )
        observation = Observation(
            time=float(record["time"]),
            active_brokers=tuple(int(b) for b in record.get("active_brokers") or ()),
            log_dirs=log_dirs,
            failure_stage=None if outcome == SUCCESS else record.get("failure_stage"),
            error=record.get("error"),
        )
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, ArchiveRecordError):
            raise
        raise ArchiveRecordError(f"bad or missing field: {exc}") from None
    if outcome == FAILURE and observation.failure_stage is None:
        raise ArchiveRecordError("a failure record needs a failure_stage")
    return str(record.get("cluster", "")), observation


def from_line(line: str) -> tuple[str, Observation]:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ArchiveRecordError(f"not JSON: {exc.msg} at column {exc.colno}") from None
    return from_record(record)
