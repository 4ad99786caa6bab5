"""Client quotas as a test sets and reads them, on devcluster or on real Apache Kafka alike.

Tests of the enforcer that assert what Kafka holds run once per backend. Both backends offer:
`seed(entity, **values)` (an operator's change, not the enforcer's), `quotas()` (every quota
without the enforcer's copy of the originals, keyed like `key(user="alice")`), `originals_copy()`
and `admin_properties` (how the enforcer reaches the cluster).

On Kafka a quota change goes through the controller's metadata log and every broker learns it a
moment later, each from its own copy of the log; DescribeClientQuotas answers from that copy. So
`quotas()` asks every broker and returns the view once all of them agree: what Kafka enforces
everywhere. `KafkaQuotas.restore(snapshot)` puts the shared cluster back as it was found.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from kafka.protocol.admin.client_quotas import DescribeClientQuotasRequest

from devcluster.quota_store import Alteration, Op
from enforcer.quota_client import (
    MAX_PAIRS_PER_REQUEST,
    alter_request,
    batches,
    check_alter_response,
    snapshot_from_response,
)
from enforcer.quota_plan import Change
from kvq.kafka.admin_session import KafkaAdminSession
from kvq.kafka.quota_entity import ORIGINALS_USER, QuotaEntity

Key = tuple[tuple[str, str | None], ...]
Quotas = dict[Key, dict[str, float]]


def key(**entity: str | None) -> Key:
    """`key(user="alice", client_id=None)`: the entity as `quotas()` names it."""
    return tuple(sorted({k.replace("_", "-"): v for k, v in entity.items()}.items(), key=str))


def _is_copy(entity: Mapping[str, str | None]) -> bool:
    return entity.get("user") == ORIGINALS_USER


def canonical(view: Mapping[QuotaEntity, Mapping[str, float]]) -> str:
    """A text equal for equal quota views (NaN equal to NaN, default names sorted)."""
    return repr(
        sorted((entity.to_json(), sorted(values.items())) for entity, values in view.items())
    )


class DevclusterQuotas:
    """Quotas in devcluster's store, changed directly: only the enforcer's requests are counted."""

    name = "devcluster"

    def __init__(self, dc: Any) -> None:
        self.dc = dc
        self.admin_properties = {"bootstrap.servers": dc.bootstrap}

    def seed(
        self, entity: Mapping[str, str | None], everywhere: bool = True, **values: float
    ) -> None:
        """Set quotas directly in the store (`everywhere`: one store, always)."""
        ops = tuple(Op(k, v) for k, v in values.items())
        (result,) = self.dc.quotas.alter([Alteration(tuple(entity.items()), ops)])
        assert result.error_code == 0, result

    def seed_many(self, values: Mapping[QuotaEntity, Mapping[str, float]]) -> None:
        alterations = [
            Alteration(entity.components, tuple(Op(k, v) for k, v in keys.items()))
            for entity, keys in values.items()
        ]
        for start in range(0, len(alterations), MAX_PAIRS_PER_REQUEST):
            results = self.dc.quotas.alter(alterations[start : start + MAX_PAIRS_PER_REQUEST])
            assert {r.error_code for r in results} == {0}

    def quotas(self) -> Quotas:
        return {
            tuple(sorted(item["entity"].items(), key=str)): item["values"]
            for item in self.dc.quota_state()
            if not _is_copy(item["entity"])
        }

    def originals_copy(self) -> list[dict]:
        return [item for item in self.dc.quota_state() if _is_copy(item["entity"])]

    def wait_until_every_broker_holds(self, changes: Sequence[Change]) -> float:
        """0: devcluster's brokers share one store, changed when the request is answered."""
        view = {QuotaEntity.of(i["entity"].items()): i["values"] for i in self.dc.quota_state()}
        assert _holds(view, changes)
        return 0.0


class KafkaQuotas:
    """Quotas in a real Kafka cluster, through AlterClientQuotas/DescribeClientQuotas as the super
    user over SASL (kafka-python, the enforcer's own request builders)."""

    name = "kafka"

    def __init__(
        self, admin_properties: Mapping[str, str], node_ids: Sequence[int], agree_within: float = 30
    ) -> None:
        self.admin_properties = dict(admin_properties)
        self.node_ids = list(node_ids)
        self.agree_within = agree_within
        self._session = KafkaAdminSession(self.admin_properties, "kvq-test-quotas", 30_000)

    def close(self) -> None:
        self._session.close()

    # ---- changes ----

    def alter(self, changes: Sequence[Change], everywhere: bool = True) -> None:
        """`changes` in requests Kafka accepts, each checked; with `everywhere`, returns once every
        broker describes them (Kafka answers once the controller committed them; the brokers
        learn them from the metadata log a moment later)."""
        for batch in batches(changes):
            check_alter_response(self._session.send(alter_request(batch, validate_only=False)))
        if everywhere:
            self.wait_until_every_broker_holds(changes)

    def seed(
        self, entity: Mapping[str, str | None], everywhere: bool = True, **values: float
    ) -> None:
        """Set quotas as an operator would; `everywhere=False` returns without waiting for the
        brokers (when the enforcer may change them again at once)."""
        quota_entity = QuotaEntity.of(entity)
        self.alter([Change(quota_entity, k, v) for k, v in values.items()], everywhere)

    def seed_many(self, values: Mapping[QuotaEntity, Mapping[str, float]]) -> None:
        self.alter([Change(e, k, v) for e, keys in values.items() for k, v in keys.items()])

    # ---- reading ----

    def describe_each(self) -> dict[int, dict[QuotaEntity, dict[str, float]]]:
        """Every broker's own answer to DescribeClientQuotas (all entities, the copy included)."""
        answers = self._session.send_to_each(
            self.node_ids,
            lambda version: DescribeClientQuotasRequest(
                version=version, components=[], strict=False
            ),
            DescribeClientQuotasRequest,
            30.0,
        )
        views = {}
        for node_id, answer in answers.items():
            if isinstance(answer, Exception):
                raise answer
            views[node_id] = snapshot_from_response(answer)
        return views

    def agreed(self) -> dict[QuotaEntity, dict[str, float]]:
        """The quotas once every broker describes the same (NaN equal to NaN)."""
        views = self._await(
            lambda views: len({canonical(view) for view in views.values()}) == 1,
            self.agree_within,
            "every broker to describe the same quotas",
        )
        return next(iter(views.values()))

    def _await(
        self,
        done: Callable[[dict[int, dict[QuotaEntity, dict[str, float]]]], bool],
        timeout: float,
        what: str,
    ) -> dict[int, dict[QuotaEntity, dict[str, float]]]:
        """Every broker's quotas, asked again until `done` with them. A broker that cannot answer
        yet (restarted: kafka-python backs off its old connection) is asked again afresh."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                views = self.describe_each()
                if done(views):
                    return views
                problem = "they differ"
            except Exception as exc:  # noqa: BLE001 - any broker failing: ask again
                self._session.close()
                problem = repr(exc)
            if time.monotonic() > deadline:
                raise AssertionError(f"waited {timeout} s for {what}: {problem}")
            time.sleep(0.02)

    def quotas(self) -> Quotas:
        return {
            tuple(sorted(entity.components, key=str)): values
            for entity, values in self.agreed().items()
            if not entity.is_originals_record
        }

    def originals_copy(self) -> list[dict]:
        return [
            {"entity": entity.to_dict(), "values": values}
            for entity, values in self.agreed().items()
            if entity.is_originals_record
        ]

    def wait_until_every_broker_holds(
        self, changes: Sequence[Change], timeout: float = 60
    ) -> float:
        """Seconds until every broker describes each change (its value, or the key gone)."""
        started = time.monotonic()
        self._await(
            lambda views: all(_holds(view, changes) for view in views.values()),
            timeout,
            f"every broker to hold {len(changes)} changed values",
        )
        return time.monotonic() - started

    # ---- leaving the shared cluster as found ----

    def snapshot(self) -> dict[QuotaEntity, dict[str, float]]:
        return self.agreed()

    def restore(self, snapshot: Mapping[QuotaEntity, Mapping[str, float]]) -> None:
        """Every quota back to `snapshot`: keys it lacks removed, its values set again."""
        now = self.agreed()
        changes = [
            Change(entity, k, None)
            for entity, values in now.items()
            for k in values
            if k not in snapshot.get(entity, {})
        ]
        changes += [
            Change(entity, k, v)
            for entity, values in snapshot.items()
            for k, v in values.items()
            if repr(now.get(entity, {}).get(k)) != repr(v)
        ]
        if changes:
            self.alter(changes)
        assert canonical(self.agreed()) == canonical(snapshot), (
            "the shared cluster's quotas restored"
        )


@contextlib.contextmanager
def kafka_quotas_left_as_found(kafka: Any, agree_within: float = 30) -> Iterator[KafkaQuotas]:
    """KafkaQuotas of a running KafkaCluster; its quotas are put back as found on leaving, also
    when the test failed (the test's, the enforcer's and its copy of the originals removed)."""
    backend = KafkaQuotas(kafka.admin_properties, kafka.node_ids, agree_within)
    try:
        found = backend.snapshot()
        try:
            yield backend
        finally:
            backend.restore(found)
    finally:
        backend.close()


def _holds(view: Mapping[QuotaEntity, Mapping[str, float]], changes: Sequence[Change]) -> bool:
    return all(
        repr(view.get(change.entity, {}).get(change.key)) == repr(change.value)
        for change in changes
    )
