"""Parse and validate Alertmanager's webhook payload (version 4) into typed values.

Every problem raises PayloadError naming the field (as a JSON path), the bad value and what is
allowed, so a 400 answer tells the operator exactly what to fix.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
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


def parse_webhook(body: bytes | str) -> WebhookPayload:
    """Decode JSON and validate the v4 shape; raises PayloadError."""
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PayloadError(f"body is not JSON: {exc}") from None
    return webhook_from_dict(data)


def webhook_from_dict(data: Any) -> WebhookPayload:
    if not isinstance(data, dict):
        raise PayloadError(f"body must be a JSON object, got {type(data).__name__}")
    version = data.get("version")
    if version != "4":
        raise PayloadError(f'$.version must be "4" (Alertmanager webhook v4), got {version!r}')
    alerts = data.get("alerts")
    if not isinstance(alerts, list):
        raise PayloadError(f"$.alerts must be a list of alerts, got {_short(alerts)}")
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
        raise PayloadError(f"{path} must be an object, got {_short(data)}")
    ends_at = _time(data, "endsAt", path)
    return Alert(
        status=_status(data, path),
        labels=_labels(data.get("labels"), f"{path}.labels"),
        annotations=_labels(data.get("annotations", {}), f"{path}.annotations"),
        starts_at=_time(data, "startsAt", path),
        ends_at=None if ends_at.year == 1 else ends_at,
        fingerprint=_string(data, "fingerprint", path),
    )


def _string(data: dict, key: str, path: str) -> str:
    value = data.get(key)
    if not isinstance(value, str):
        raise PayloadError(f"{path}.{key} must be a string, got {_short(value)}")
    return value


def _status(data: dict, path: str) -> str:
    value = data.get("status")
    if value not in _STATUSES:
        raise PayloadError(f'{path}.status must be "firing" or "resolved", got {_short(value)}')
    return value


def _labels(value: Any, path: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise PayloadError(f"{path} must be an object of strings, got {_short(value)}")
    return dict(value)


def _time(data: dict, key: str, path: str) -> datetime:
    text = _string(data, key, path)
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        raise PayloadError(
            f"{path}.{key} must be an RFC 3339 time like 2026-11-22T15:00:00Z, got {text!r}"
        ) from None


def _short(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
