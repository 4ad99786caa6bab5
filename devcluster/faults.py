"""Faults a broker can be told to show, each the way a real Kafka broker would show it."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from .validation import ControlError, boolean, integer, optional_integer, require_object

KAFKA_STORAGE_ERROR = 56
UNKNOWN_SERVER_ERROR = -1
INT16 = (-(2**15), 2**15 - 1)

FIELDS = (
    "latency_ms",
    "alter_client_quotas",
    "quota_metadata_lag_ms",
    "log_dir_error",
    "max_describe_log_dirs_version",
    "fail_describe_log_dirs",
    "leave_before_describe_log_dirs",
    "drop_describe_log_dirs",
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
    drop_describe_log_dirs: int = 0
    """The next this many DescribeLogDirs requests close their connection unanswered; the
    broker stays up. Kafka's SocketServer does this to any request but a re-authentication that
    reaches a connection whose SASL session expired (connections.max.reauth.ms)."""
    quota_metadata_lag_ms: int = 0
    """DescribeClientQuotas on this broker sees quota changes only this long after they were
    applied: a broker's metadata image lags the controller's commit."""
    alter_client_quotas: AlterFault | None = None
    """How this broker's AlterClientQuotas requests go wrong (late, failing); see AlterFault."""

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
        if "quota_metadata_lag_ms" in body:
            new.quota_metadata_lag_ms = integer(
                "quota_metadata_lag_ms", body["quota_metadata_lag_ms"], 0, 600_000
            )
        if "alter_client_quotas" in body:
            new.alter_client_quotas = AlterFault.parse(body["alter_client_quotas"])
        if "leave_before_describe_log_dirs" in body:
            new.leave_before_describe_log_dirs = boolean(
                "leave_before_describe_log_dirs", body["leave_before_describe_log_dirs"]
            )
        if "drop_describe_log_dirs" in body:
            new.drop_describe_log_dirs = integer(
                "drop_describe_log_dirs", body["drop_describe_log_dirs"], 0, 1_000_000
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
        if self.drop_describe_log_dirs:
            out["drop_describe_log_dirs"] = self.drop_describe_log_dirs
        if self.quota_metadata_lag_ms:
            out["quota_metadata_lag_ms"] = self.quota_metadata_lag_ms
        if self.alter_client_quotas is not None:
            out["alter_client_quotas"] = self.alter_client_quotas.active()
        return out


def _error_code(name: str, value: Any) -> int:
    code = integer(name, value, *INT16)
    if code == 0:
        raise ControlError(400, f"{name} must be a non-zero Kafka error code, got 0")
    return code


ALTER_FAULT_FIELDS = (
    "delay_ms",
    "apply",
    "error_code",
    "applied",
    "entities",
    "validate_only",
    "count",
)
APPLY_LATE, APPLY_EARLY = "late", "early"


@dataclass(frozen=True)
class AlterFault:
    """What goes wrong with the AlterClientQuotas requests a broker receives.

    ``delay_ms``: the request is answered that late; with ``apply="late"`` (default) it is also
    applied only then, so a request sent meanwhile on another connection lands first (a controller
    that was slow to commit), with ``"early"`` it is applied on arrival and only the answer is late.
    Either way it is applied after a client that timed out gave up. ``error_code``: the request
    fails with that code, nothing applied: every entry, or only the entries whose entity is one of
    ``entities`` (the others are applied); with ``applied`` the whole request is applied all the
    same, as when a broker's forwarding to the controller timed out (REQUEST_TIMED_OUT, 7) after the
    controller had it. ``validate_only``: true or false limits the fault to
    such requests (default both). ``count``: the fault hits that many requests, then disarms."""

    delay_ms: int = 0
    apply: str = APPLY_LATE
    error_code: int | None = None
    applied: bool = False
    entities: tuple[tuple[tuple[str, str | None], ...], ...] | None = None
    validate_only: bool | None = None
    count: int | None = None

    @classmethod
    def parse(cls, value: Any) -> AlterFault | None:
        if value is None or value is False:
            return None
        body = require_object(value, ALTER_FAULT_FIELDS)
        apply = body.get("apply", APPLY_LATE)
        if apply not in (APPLY_LATE, APPLY_EARLY):
            raise ControlError(
                400, f'alter_client_quotas.apply must be "late" or "early", got {apply!r}'
            )
        fault = cls(
            delay_ms=integer("alter_client_quotas.delay_ms", body.get("delay_ms", 0), 0, 600_000),
            apply=apply,
            error_code=(
                None
                if body.get("error_code") is None
                else _error_code("alter_client_quotas.error_code", body["error_code"])
            ),
            applied=boolean("alter_client_quotas.applied", body.get("applied", False)),
            entities=_entities(body["entities"]) if "entities" in body else None,
            validate_only=(
                None
                if body.get("validate_only") is None
                else boolean("alter_client_quotas.validate_only", body["validate_only"])
            ),
            count=optional_integer("alter_client_quotas.count", body.get("count"), 1),
        )
        if fault.applied and (fault.error_code is None or fault.entities is not None):
            raise ControlError(
                400, "alter_client_quotas.applied needs an error_code for the whole request"
            )
        if fault.entities is not None and fault.error_code is None:
            raise ControlError(400, "alter_client_quotas.entities needs an error_code")
        if not fault.delay_ms and fault.error_code is None:
            raise ControlError(
                400, "alter_client_quotas needs a delay_ms > 0 or an error_code (null removes it)"
            )
        return fault

    def matches(self, validate_only: bool) -> bool:
        return self.validate_only is None or self.validate_only == validate_only

    def spent(self) -> AlterFault | None:
        """The fault after it hit one more request (None once its count is used up)."""
        if self.count is None:
            return self
        return None if self.count == 1 else replace(self, count=self.count - 1)

    def active(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.delay_ms:
            out["delay_ms"] = self.delay_ms
            out["apply"] = self.apply
        if self.error_code is not None:
            out["error_code"] = self.error_code
        if self.applied:
            out["applied"] = True
        if self.entities is not None:
            out["entities"] = [dict(e) for e in self.entities]
        if self.validate_only is not None:
            out["validate_only"] = self.validate_only
        if self.count is not None:
            out["count"] = self.count
        return out


def _entities(value: Any) -> tuple[tuple[tuple[str, str | None], ...], ...]:
    """``[{"user": "alice"}, {"user": null, "client-id": "app"}]`` as quota store entities."""
    from .quota_store import entity_key

    bad = ControlError(
        400,
        "alter_client_quotas.entities must be a list of entities such as "
        f'{{"user": "alice", "client-id": null}}, got {value!r}',
    )
    if not isinstance(value, list) or not value:
        raise bad
    out = []
    for item in value:
        if not isinstance(item, Mapping) or not item:
            raise bad
        if not all(
            isinstance(k, str) and (v is None or isinstance(v, str)) for k, v in item.items()
        ):
            raise bad
        out.append(entity_key(item))
    return tuple(out)
