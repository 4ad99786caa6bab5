"""An in-memory QuotaClient with Kafka's validation rules (4.4's: no non-finite value), for unit
tests of the enforcer. Values set directly (`InMemoryQuotas(initial)`, `set`) bypass them: an
operator's, or a NaN stored before an upgrade."""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence

from enforcer.broker_quota_settings import BrokerQuotaSettings
from enforcer.quota_client import QuotaClientError, QuotaRejected
from enforcer.quota_plan import INTEGRAL_KEYS, KNOWN_KEYS, Change
from kvq.kafka.quota_entity import QuotaEntity


class InMemoryQuotas:
    """Quotas in a dict; `down=True` makes every call fail like an unreachable cluster."""

    def __init__(self, initial: dict[QuotaEntity, dict[str, float]] | None = None) -> None:
        self.values: dict[QuotaEntity, dict[str, float]] = {
            e: dict(v) for e, v in (initial or {}).items()
        }
        self.down = False
        self.refused: set[QuotaEntity] = set()
        """Entities whose changes are rejected, as Kafka rejects an entity it cannot accept."""
        self.calls: list[str] = []
        self.callbacks: dict[int, str] = {}
        """Brokers with client.quota.callback.class set (Kafka then ignores client quotas)."""
        self.windows: dict[int, float] = {}
        """Brokers' quota windows in seconds, as they would report them (none: none says)."""
        self.samples: dict[int, float] = {}
        """Brokers' quota.window.size.seconds (absent: Kafka's 1 s where a window is said)."""
        self.averages: dict[int, float] = {}
        """Brokers' throttle-time averages in seconds, metrics.num.samples x
        metrics.sample.window.ms (none: none says)."""
        self._lock = threading.Lock()

    def describe(self) -> dict[QuotaEntity, dict[str, float]]:
        with self._lock:
            self._check_up("describe")
            return {e: dict(v) for e, v in self.values.items()}

    def describe_agreed(self) -> dict[QuotaEntity, dict[str, float]]:
        """One store: every broker agrees."""
        return self.describe()

    def alter(self, changes: Sequence[Change], validate_only: bool = False) -> None:
        with self._lock:
            self._check_up("validate" if validate_only else "alter")
            bad = {c.entity: e for c in changes if (e := self._invalid(c))}
            if bad:
                raise QuotaRejected([f"{e.label()}: {m}" for e, m in bad.items()], list(bad))
            if validate_only:
                return
            for change in changes:
                values = self.values.setdefault(change.entity, {})
                if change.value is None:
                    values.pop(change.key, None)
                else:
                    values[change.key] = float(change.value)
                if not values:
                    del self.values[change.entity]

    def set(self, entity: QuotaEntity, key: str, value: float | None) -> None:
        """An operator's change, bypassing the enforcer."""
        with self._lock:
            if value is None:
                self.values.get(entity, {}).pop(key, None)
            else:
                self.values.setdefault(entity, {})[key] = float(value)

    def quota_settings(self) -> BrokerQuotaSettings:
        with self._lock:
            self._check_up("describe_configs")
            samples = {node: self.samples.get(node, 1.0) for node in self.windows}
            return BrokerQuotaSettings(
                dict(self.callbacks), dict(self.windows), samples, dict(self.averages)
            )

    def close(self) -> None:
        pass

    def _check_up(self, call: str) -> None:
        self.calls.append(call)
        if self.down:
            raise QuotaClientError("cannot reach Kafka at memory: down")

    def _invalid(self, change: Change) -> str | None:
        if change.entity in self.refused:
            return "InvalidRequestError: refused for this test"
        return _invalid(change)


def _invalid(change: Change) -> str | None:
    if change.key not in KNOWN_KEYS:
        return f"unknown key {change.key}"
    if change.value is None:
        return None
    value = float(change.value)
    if not math.isfinite(value):  # Kafka 4.4+ (4.3 stored NaN, and +inf for the double keys)
        return f"Quota {change.key} must be a finite number"
    if value <= 0:
        return f"{change.key} must be > 0, got {value}"
    if change.key in INTEGRAL_KEYS:
        if value > float(2**63 - 1):  # decided in double: 2^63 itself is accepted
            return f"{change.key} is too large for a LONG, got {value}"
        if abs(value % 1.0) > 1e-6:
            return f"{change.key} cannot be a fractional value, got {value}"
    return None
