"""Parse and validate Alertmanager's webhook payload (version 4) into typed values.

Every problem raises PayloadError naming the field (as a JSON path), the bad value and what is
allowed, so a 400 answer tells the operator exactly what to fix.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

FIRING = "firing"
RESOLVED = "resolved"
_STATUSES = (FIRING, RESOLVED)


class PayloadError(ValueError):
    """The webhook body is not a valid Alertmanager v4 payload."""


@dataclass(frozen=True, slots=True)
class Alert:
    status: str
    labels: dict[str, str]
    annotations: dict[str, str]
    starts_at: datetime
    ends_at: datetime | None
    fingerprint: str

    @property
    def firing(self) -> bool:
        return self.status == FIRING

    @property
    def name(self) -> str:
        return self.labels.get("alertname", "")


@dataclass(frozen=True, slots=True)
class WebhookPayload:
    receiver: str
    status: str
    group_key: str
    truncated_alerts: int
    alerts: tuple[Alert, ...]
    group_labels: dict[str, str] = field(default_factory=dict)


MAX_INT_DIGITS = 18
MAX_DEPTH = 32
"""Arrays and objects within each other: a v4 webhook is 4 levels deep. Bounded here, not by the
interpreter: Python 3.11's json fails near 1,000 levels, 3.12's goes far deeper."""
_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')
_BRACKET = re.compile(rb"[\[\]{}]")


def parse_webhook(body: bytes | str) -> WebhookPayload:
    """Decode JSON and validate the v4 shape; raises PayloadError."""
    _check_depth(body.encode() if isinstance(body, str) else body)
    try:
        data = json.loads(body, parse_int=_bounded_int, parse_constant=_no_constant)
    except RecursionError:  # unreachable past _check_depth; kept as the last guard
        raise PayloadError(_too_deep()) from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise PayloadError(f"body is not JSON: {shorten(str(exc))}") from None
    return webhook_from_dict(data)


def _check_depth(body: bytes) -> None:
    """Refuse a body whose arrays and objects nest deeper than MAX_DEPTH (brackets inside
    strings do not count; a malformed body is left for the parser to name)."""
    depth = 0
    for bracket in _BRACKET.finditer(_JSON_STRING.sub(b'""', body)):
        depth += 1 if bracket[0] in b"[{" else -1
        if depth > MAX_DEPTH:
            raise PayloadError(_too_deep())


def _too_deep() -> str:
    return f"body is nested too deeply: at most {MAX_DEPTH} levels (a webhook is 4 levels deep)"


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise PayloadError(
            f"body has an integer of {len(text)} digits; at most {MAX_INT_DIGITS} are allowed"
        )
    return int(text)


def _no_constant(name: str) -> float:
    raise PayloadError(f"body holds {name}, which is not JSON")


def webhook_from_dict(data: Any) -> WebhookPayload:
    if not isinstance(data, dict):
        raise PayloadError(f"body must be a JSON object, got {type(data).__name__}")
    version = data.get("version")
    if version != "4":
        raise PayloadError(f'$.version must be "4" (Alertmanager webhook v4), got {version!r}')
    alerts = data.get("alerts")
    if not isinstance(alerts, list):
        raise PayloadError(f"$.alerts must be a list of alerts, got {quoted(alerts)}")
    truncated = data.get("truncatedAlerts", 0)
    if not isinstance(truncated, int) or isinstance(truncated, bool) or truncated < 0:
        raise PayloadError(f"$.truncatedAlerts must be a whole number >= 0, got {truncated!r}")
    return WebhookPayload(
        receiver=_string(data, "receiver", "$"),
        status=_status(data, "$"),
        group_key=_string(data, "groupKey", "$"),
        truncated_alerts=truncated,
        alerts=tuple(_alert(a, f"$.alerts[{i}]") for i, a in enumerate(alerts)),
        group_labels=_labels(data.get("groupLabels", {}), "$.groupLabels"),
    )


def _alert(data: Any, path: str) -> Alert:
    if not isinstance(data, dict):
        raise PayloadError(f"{path} must be an object, got {quoted(data)}")
    ends_at = _time(data, "endsAt", path)
    return Alert(
        status=_status(data, path),
        labels=_labels(data.get("labels"), f"{path}.labels"),
        annotations=_labels(data.get("annotations", {}), f"{path}.annotations"),
        starts_at=_time(data, "startsAt", path),
        ends_at=None if ends_at.year == 1 else ends_at,
        fingerprint=_string(data, "fingerprint", path),
    )


_IDENTIFIERS = ("groupKey", "fingerprint", "receiver")


def _string(data: dict, key: str, path: str) -> str:
    value = data.get(key)
    if not isinstance(value, str):
        raise PayloadError(f"{path}.{key} must be a string, got {quoted(value)}")
    if not _encodable(value):
        raise PayloadError(f"{path}.{key} holds a lone surrogate, not text: {quoted(value)}")
    if key in _IDENTIFIERS and any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        raise PayloadError(
            f"{path}.{key} holds a control character (Alertmanager never sends one): "
            f"{quoted(value)}"
        )
    return value


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _status(data: dict, path: str) -> str:
    value = data.get("status")
    if value not in _STATUSES:
        raise PayloadError(f'{path}.status must be "firing" or "resolved", got {quoted(value)}')
    return value


def _labels(value: Any, path: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise PayloadError(f"{path} must be an object of strings, got {quoted(value)}")
    for k, v in value.items():
        if not _encodable(k + v):
            raise PayloadError(f"{path} holds a lone surrogate, not text: {quoted(k)}")
    return dict(value)


def _time(data: dict, key: str, path: str) -> datetime:
    """UTC. Alerts are ordered by these times (alert_episodes.py): no offset is not guessed, and
    a time that has no UTC equivalent (year 9999 at -14:00) is refused too."""
    text = _string(data, key, path)
    try:
        moment = datetime.fromisoformat(text)
        if moment.tzinfo is None:
            raise ValueError(text)
        return moment.astimezone(UTC)
    except (ValueError, OverflowError):
        raise PayloadError(
            f"{path}.{key} must be an RFC 3339 time with its offset like 2026-11-22T15:00:00Z, "
            f"got {quoted(text)}"
        ) from None


def quoted(value: Any) -> str:
    """The value for an error message: quoted, escaped (no newline, no surrogate), short."""
    text = json.dumps(value) if not isinstance(value, str) else ascii(value)
    return shorten(text)


def shorten(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
