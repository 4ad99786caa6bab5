"""Stand-ins for the two Strimzi operators that write client quotas, for tests and the demo.

They make the Admin API calls Strimzi's make, on Strimzi's schedule (read in
strimzi-kafka-operator):

- `UserOperator`: the User Operator's quota part. `QuotasCache` loads every user's quotas with
  DescribeClientQuotas (no filter) every `STRIMZI_CACHE_REFRESH_INTERVAL_MS` (15 s); each
  reconciliation (every `STRIMZI_FULL_RECONCILIATION_INTERVAL_MS`, 120 s, and at once when a
  `KafkaUser` is edited) compares a user's `spec.quotas` with the cached values as whole numbers
  (`QuotaUtils.fromClientQuota`) and, when they differ, alters `user=<name>` with all four keys
  (`QuotaUtils.toClientQuotaAlterationOps`: a field left out is removed), then caches the desired
  values (`QuotasOperator.internalUpsert`).
- `ClusterOperator`: `DefaultKafkaQuotasManager`. Each reconciliation of the `Kafka` resource
  describes the default user (`ClientQuotaFilter.containsOnly(ofDefaultEntity(USER))`) and, when
  any of the four keys differs from `spec.kafka.quotas` (type `kafka`), alters `user=<default>`
  with all four.

Left out: the User Operator's deletion of quotas of users without a `KafkaUser`, and its
micro-batching of alterations (one request per user here).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from kafka.protocol.admin.client_quotas import DescribeClientQuotasRequest

from enforcer.quota_client import (
    alter_request,
    check_alter_response,
    describe_request,
    snapshot_from_response,
)
from enforcer.quota_plan import Change
from kvq.kafka.admin_session import KafkaAdminSession
from kvq.kafka.quota_entity import QuotaEntity

log = logging.getLogger("kvq.devkit.strimzi")

MATCH_DEFAULT = 1
"""DescribeClientQuotas' match type for the default entity of a type."""


@dataclass(frozen=True)
class UserQuotas:
    """A `KafkaUser`'s `spec.quotas` (or the `Kafka` resource's `spec.kafka.quotas`): the four
    keys Strimzi manages, None where the field is left out."""

    producer_byte_rate: int | None = None
    consumer_byte_rate: int | None = None
    request_percentage: int | None = None
    controller_mutation_rate: float | None = None

    def changes(self, entity: QuotaEntity) -> list[Change]:
        """All four keys, a field left out removed (`toClientQuotaAlterationOps`)."""
        return [
            Change(entity, f.name, None if value is None else float(value))
            for f in fields(self)
            for value in [getattr(self, f.name)]
        ]

    @classmethod
    def from_kafka(cls, values: Mapping[str, float]) -> UserQuotas:
        """What the User Operator's cache holds for Kafka's values: the byte rates and the
        percentage cut to whole numbers (`Double.intValue`)."""

        def whole(key: str) -> int | None:
            return None if key not in values else int(values[key])

        return cls(
            whole("producer_byte_rate"),
            whole("consumer_byte_rate"),
            whole("request_percentage"),
            values.get("controller_mutation_rate"),
        )

    def differs_from(self, values: Mapping[str, float]) -> bool:
        """Kafka's values differ from these (`currentAndDesiredQuotasDiffer`, exact doubles)."""
        return any(values.get(c.key) != c.value for c in self.changes(QuotaEntity.default_user()))


class _Operator:
    """A reconcile loop on its own thread: `reconcile()` now, then every `interval` s, until
    stopped. Counts the alterations it made."""

    def __init__(self, admin_properties: Mapping[str, str], interval: float, name: str) -> None:
        self._session = KafkaAdminSession(admin_properties, name, 10_000)
        self.interval = interval
        self.alterations = 0
        """AlterClientQuotas requests sent: each put values back."""
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)

    def reconcile(self) -> None:
        raise NotImplementedError

    def start(self) -> _Operator:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=30)
        self._session.close()

    def __enter__(self) -> _Operator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._guarded(self.reconcile)
            self._stop.wait(self.interval)

    def _guarded(self, action: Any) -> None:
        try:
            with self._lock:
                action()
        except Exception as exc:  # noqa: BLE001 - an operator logs and tries again next period
            log.warning("%s: reconciliation failed: %s", self._thread.name, exc)

    def _describe(self, request: Any = None) -> dict[QuotaEntity, dict[str, float]]:
        return snapshot_from_response(self._session.send(request or describe_request()))

    def _alter(self, changes: list[Change]) -> None:
        check_alter_response(self._session.send(alter_request(changes, validate_only=False)))
        self.alterations += 1


class UserOperator(_Operator):
    """The User Operator's quotas: `users` maps a KafkaUser's principal name to its quotas."""

    def __init__(
        self,
        admin_properties: Mapping[str, str],
        users: Mapping[str, UserQuotas],
        interval: float = 120.0,
        cache_refresh: float = 15.0,
    ) -> None:
        super().__init__(admin_properties, interval, "strimzi-user-operator")
        self.users = dict(users)
        self.cache_refresh = cache_refresh
        self._cache: dict[str, UserQuotas] = {}
        self._refresher = threading.Thread(target=self._refresh_loop, daemon=True)

    def start(self) -> UserOperator:
        self._guarded(self.refresh_cache)  # the cache is loaded before the first reconciliation
        self._refresher.start()
        super().start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._refresher.is_alive():
            self._refresher.join(timeout=30)
        super().stop()

    def edit(self, user: str, quotas: UserQuotas) -> None:
        """A `KafkaUser` created or edited: reconciled at once."""
        self.users[user] = quotas
        self._guarded(lambda: self._reconcile_user(user))

    def refresh_cache(self) -> None:
        self._cache = {
            name: UserQuotas.from_kafka(values)
            for entity, values in self._describe().items()
            if entity.types == ("user",) and (name := entity.name("user")) is not None
        }

    def reconcile(self) -> None:
        for user in list(self.users):
            self._reconcile_user(user)

    def _reconcile_user(self, user: str) -> None:
        desired = self.users[user]
        if self._cache.get(user) == desired:
            return
        self._alter(desired.changes(QuotaEntity.user(user)))
        self._cache[user] = desired

    def _refresh_loop(self) -> None:
        while not self._stop.wait(self.cache_refresh):
            self._guarded(self.refresh_cache)


class ClusterOperator(_Operator):
    """The Cluster Operator's default-user quotas (`spec.kafka.quotas` of type `kafka`)."""

    def __init__(
        self, admin_properties: Mapping[str, str], quotas: UserQuotas, interval: float = 120.0
    ) -> None:
        super().__init__(admin_properties, interval, "strimzi-cluster-operator")
        self.quotas = quotas

    def reconcile(self) -> None:
        default = QuotaEntity.default_user()
        current = self._describe(_default_user_filter()).get(default, {})
        wanted = any(c.value is not None for c in self.quotas.changes(default))
        if (current or wanted) and self.quotas.differs_from(current):
            self._alter(self.quotas.changes(default))


def _default_user_filter() -> DescribeClientQuotasRequest:
    """`ClientQuotaFilter.containsOnly(ofDefaultEntity(USER))`."""
    component = DescribeClientQuotasRequest.ComponentData(
        entity_type="user", match_type=MATCH_DEFAULT, match=None
    )
    return DescribeClientQuotasRequest(components=[component], strict=True)
