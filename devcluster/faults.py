"""Faults a broker can be told to show, each the way a real Kafka broker would show it."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .validation import ControlError, boolean, integer, optional_integer, require_object

KAFKA_STORAGE_ERROR = 56
UNKNOWN_SERVER_ERROR = -1
INT16 = (-(2**15), 2**15 - 1)

FIELDS = (
    "latency_ms",
    "log_dir_error",
    "max_describe_log_dirs_version",
    "fail_describe_log_dirs",
    "leave_before_describe_log_dirs",
    "clear",
)


@dataclass
class Faults:
    latency_ms: int = 0
    """Every response of the broker is delayed by this much (requests of one connection queue)."""
    log_dir_errors: dict[int, int] = field(default_factory=dict)
    """log dir index -> error code answered for it (56 = KAFKA_STORAGE_ERROR, an offline dir)."""
    max_describe_log_dirs_version: int | None = None
    """Advertise DescribeLogDirs only up to this version (3: a broker older than KIP-827)."""
    fail_describe_log_dirs: int | None = None
    """Top-level error code of every DescribeLogDirs response (v3+; v1-2 get no results)."""
    leave_before_describe_log_dirs: bool = False
    """One shot: the next DescribeLogDirs request stops the broker (as POST stop) and its
    connection closes unanswered: a broker that left between DescribeCluster and DescribeLogDirs."""

    def updated(self, body: Any, log_dir_count: int) -> Faults:
        """The faults after a control request (``clear`` first, then the other fields); the
        request is checked whole before anything changes."""
        body = require_object(body, FIELDS)
        new = Faults() if body.get("clear") is True else copy.deepcopy(self)
        if "clear" in body:
            boolean("clear", body["clear"])
        if "latency_ms" in body:
            new.latency_ms = integer("latency_ms", body["latency_ms"], 0, 600_000)
        if "log_dir_error" in body:
            new._set_log_dir_error(body["log_dir_error"], log_dir_count)
        if "max_describe_log_dirs_version" in body:
            new.max_describe_log_dirs_version = optional_integer(
                "max_describe_log_dirs_version", body["max_describe_log_dirs_version"], 1, 4
            )
        if "fail_describe_log_dirs" in body:
            value = body["fail_describe_log_dirs"]
            if value is None or value is False:
                new.fail_describe_log_dirs = None
            elif value is True:
                new.fail_describe_log_dirs = UNKNOWN_SERVER_ERROR
            elif isinstance(value, int):
                new.fail_describe_log_dirs = _error_code("fail_describe_log_dirs", value)
            else:
                raise ControlError(
                    400,
                    "fail_describe_log_dirs must be true, false or a Kafka error code, "
                    f"got {value!r}",
                )
        if "leave_before_describe_log_dirs" in body:
            new.leave_before_describe_log_dirs = boolean(
                "leave_before_describe_log_dirs", body["leave_before_describe_log_dirs"]
            )
        return new

    def _set_log_dir_error(self, value: Any, log_dir_count: int) -> None:
        if not isinstance(value, Mapping) or "index" not in value or set(value) - {"index", "code"}:
            raise ControlError(
                400,
                f'log_dir_error must be {{"index": i, "code": c}} (code default 56), got {value!r}',
            )
        index = integer("log_dir_error.index", value["index"], 0, log_dir_count - 1)
        code = value.get("code", KAFKA_STORAGE_ERROR)
        if code == 0:
            self.log_dir_errors.pop(index, None)
        else:
            self.log_dir_errors[index] = _error_code("log_dir_error.code", code)

    def active(self) -> dict[str, Any]:
        """The faults in force, JSON-ready; empty when the broker behaves."""
        out: dict[str, Any] = {}
        if self.latency_ms:
            out["latency_ms"] = self.latency_ms
        if self.log_dir_errors:
            out["log_dir_errors"] = {str(i): c for i, c in sorted(self.log_dir_errors.items())}
        if self.max_describe_log_dirs_version is not None:
            out["max_describe_log_dirs_version"] = self.max_describe_log_dirs_version
        if self.fail_describe_log_dirs is not None:
            out["fail_describe_log_dirs"] = self.fail_describe_log_dirs
        if self.leave_before_describe_log_dirs:
            out["leave_before_describe_log_dirs"] = True
        return out


def _error_code(name: str, value: Any) -> int:
    code = integer(name, value, *INT16)
    if code == 0:
        raise ControlError(400, f"{name} must be a non-zero Kafka error code, got 0")
    return code
