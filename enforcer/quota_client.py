"""Talk to Kafka about client quotas: DescribeClientQuotas and AlterClientQuotas (KIP-546).

kafka-python 3.x carries the protocol classes but no admin methods for them, so requests are sent
through the shared KafkaAdminSession; every error code is checked here. The admin client
is created lazily and dropped after a failure, so an enforcer started while Kafka is down, or
outliving a Kafka outage, answers 503 until Kafka is back and then simply works.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from kafka.admin import KafkaAdminClient
from kafka.protocol.admin import DescribeConfigsRequest
from kafka.protocol.admin.client_quotas import (
    AlterClientQuotasRequest,
    DescribeClientQuotasRequest,
)
from kafka.protocol.metadata import MetadataRequest

from enforcer.broker_quota_settings import KEYS, BrokerQuotaSettings
from enforcer.quota_plan import Change, same_value
from kvq.kafka.admin_session import KafkaAdminSession, KafkaUnavailable, describe_error
from kvq.kafka.broker_configs import (
    BrokerConfigError,
    broker_config_request,
    broker_config_values,
    error_detail,
    error_name,
)
from kvq.kafka.quota_entity import QuotaEntity

MAX_PAIRS_PER_REQUEST = 10_000
"""A KRaft controller turns each changed or removed (entity, key) pair of an AlterClientQuotas
request into one record of a batch bounded at 10,000; one more and the whole request fails
(POLICY_VIOLATION), validate_only too."""


class QuotaClientError(RuntimeError):
    """Kafka could not be reached or refused the request; worth retrying later (503)."""


class QuotaRejected(QuotaClientError):
    """Kafka answered with errors for some entries."""

    def __init__(self, errors: Sequence[str], entities: Sequence[QuotaEntity] = ()) -> None:
        self.errors = list(errors)
        self.entities = list(entities)
        super().__init__("Kafka rejected: " + "; ".join(self.errors))


class QuotaClient(Protocol):
    """The two quota calls the enforcer needs."""

    def describe(self) -> dict[QuotaEntity, dict[str, float]]:
        """Every quota entity (all types) with its values."""

    def describe_agreed(self) -> dict[QuotaEntity, dict[str, float]]:
        """`describe()` as every broker answers it: where brokers differ, the value is
        NOT_AGREED (see `agreed`). What 'applied' is verified with."""

    def alter(self, changes: Sequence[Change], validate_only: bool = False) -> None:
        """Apply `changes` in order, in requests of at most MAX_PAIRS_PER_REQUEST pairs; raise
        QuotaRejected/QuotaClientError on any error (earlier requests stay applied)."""

    def quota_settings(self) -> BrokerQuotaSettings:
        """What the brokers say of their quota callback and quota window; raise
        QuotaClientError when no broker could be asked."""

    def close(self) -> None: ...


def quota_settings_request(node_id: int) -> DescribeConfigsRequest:
    """DescribeConfigs of one broker's quota settings (`broker_quota_settings.KEYS`), sent to
    that broker."""
    return broker_config_request(node_id, KEYS)


def quota_settings_from_response(response: Any) -> dict[str, str | None]:
    """The quota settings a broker reports; QuotaClientError for an error code."""
    try:
        return broker_config_values(response)
    except BrokerConfigError as exc:
        raise QuotaClientError(str(exc)) from None


def _failed(answer: Any) -> bool:
    return isinstance(answer, Exception)


NOT_AGREED = -1.0
"""Stands for a value the brokers do not all show alike: Kafka holds no quota <= 0 and no plan
sets one, so it never counts as landed."""
AGREE_TIMEOUT_S = 30.0
"""How long the brokers together may take to answer one DescribeClientQuotas each."""


def agreed(
    views: Sequence[Mapping[QuotaEntity, Mapping[str, float]]],
) -> dict[QuotaEntity, dict[str, float]]:
    """One snapshot of several brokers' answers: a value every view shows alike (NaN equal to
    NaN; unset in all: absent), NOT_AGREED where they differ.

    Each broker answers DescribeClientQuotas from its own copy of the metadata log, which follows
    the controller's commits a moment later (after a removal, up to about a second on Kafka 4.0):
    a value counts as applied when every broker shows it, since each one enforces what it shows.
    """
    if not views:
        return {}
    merged = {entity: dict(values) for entity, values in views[0].items()}
    differing = [view for view in views[1:] if view != merged]  # C speed; NaN never equal
    for view in differing:
        for entity in merged.keys() | view.keys():
            ours, theirs = merged.get(entity, {}), view.get(entity, {})
            for key in ours.keys() | theirs.keys():
                if not same_value(ours.get(key), theirs.get(key)):
                    merged.setdefault(entity, {})[key] = NOT_AGREED
    return merged


def describe_request() -> DescribeClientQuotasRequest:
    """All entities: no filter components, not strict."""
    return DescribeClientQuotasRequest(components=[], strict=False)


def batches(changes: Sequence[Change], limit: int = MAX_PAIRS_PER_REQUEST) -> list[list[Change]]:
    """`changes` in order, cut into runs of at most `limit` pairs (one pair per change)."""
    return [list(changes[i : i + limit]) for i in range(0, len(changes), limit)]


def alter_request(changes: Sequence[Change], validate_only: bool) -> AlterClientQuotasRequest:
    """One entry per entity, one op per key."""
    entry_cls = AlterClientQuotasRequest.EntryData
    by_entity: dict[QuotaEntity, list[Change]] = {}
    for change in changes:
        by_entity.setdefault(change.entity, []).append(change)
    entries = [
        entry_cls(
            entity=[
                entry_cls.EntityData(entity_type=t, entity_name=n) for t, n in entity.components
            ],
            ops=[
                entry_cls.OpData(
                    key=c.key, value=0.0 if c.value is None else c.value, remove=c.value is None
                )
                for c in entity_changes
            ],
        )
        for entity, entity_changes in by_entity.items()
    ]
    return AlterClientQuotasRequest(entries=entries, validate_only=validate_only)


def snapshot_from_response(response: Any) -> dict[QuotaEntity, dict[str, float]]:
    if response.error_code:
        raise QuotaClientError(
            f"DescribeClientQuotas failed: {error_name(response.error_code)}"
            f"{error_detail(response.error_message)}"
        )
    snapshot: dict[QuotaEntity, dict[str, float]] = {}
    for entry in response.entries or []:
        entity = QuotaEntity.of([(e.entity_type, e.entity_name) for e in entry.entity])
        snapshot[entity] = {v.key: float(v.value) for v in entry.values}
    return snapshot


def check_alter_response(response: Any) -> None:
    errors, entities = [], []
    for entry in response.entries:
        if entry.error_code:
            entity = QuotaEntity.of([(e.entity_type, e.entity_name) for e in entry.entity])
            entities.append(entity)
            errors.append(
                f"{entity.label()}: {error_name(entry.error_code)}"
                f"{error_detail(entry.error_message)}"
            )
    if errors:
        raise QuotaRejected(errors, entities)


RESET_ON_CLOSE = (
    (socket.IPPROTO_TCP, socket.TCP_NODELAY, 1),  # kafka-python's default
    (socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)),
)
"""The quota client's sockets: closing one resets the connection (RST) and drops what the broker
has not acknowledged. kafka-python closes a connection when a request gets no answer within its
timeout, and the session drops its client after any failure; with a plain close (FIN) the kernel
would keep retransmitting an AlterClientQuotas cut off on its way, and a network that comes back
a minute later would deliver it: a write of a replica that has lost the right to act, after the
other has taken over. Reset, a request reaches a broker within its timeout or never (and the
broker forwards it to the controller within 60 s: `kvq.enforcer.alter.settle`)."""


class KafkaQuotaClient:
    """QuotaClient over kafka-python's admin connection manager (the shared KafkaAdminSession)."""

    def __init__(
        self,
        admin_properties: Mapping[str, str],
        timeout_ms: int = 5000,
        admin_factory: Callable[..., Any] = KafkaAdminClient,
    ) -> None:
        self._session = KafkaAdminSession(
            admin_properties,
            "kvq-enforcer",
            timeout_ms,
            admin_factory=admin_factory,
            socket_options=RESET_ON_CLOSE,
        )

    @property
    def bootstrap(self) -> str:
        return self._session.bootstrap

    def describe(self) -> dict[QuotaEntity, dict[str, float]]:
        return snapshot_from_response(self._send(describe_request()))

    def describe_agreed(self) -> dict[QuotaEntity, dict[str, float]]:
        """Each broker the metadata lists is asked at once. A broker that does not answer is
        left out (a stopped broker loads the metadata log before it serves again); QuotaClientError
        when none answers, or a broker answers with an error."""
        try:
            metadata = self._session.send_to_any(
                lambda version: MetadataRequest(version=version, topics=[]),
                MetadataRequest,
                AGREE_TIMEOUT_S,
            )
            brokers = sorted(b.node_id for b in metadata.brokers)
            answers = self._session.send_to_each(
                brokers,
                lambda version: DescribeClientQuotasRequest(
                    version=version, components=[], strict=False
                ),
                DescribeClientQuotasRequest,
                AGREE_TIMEOUT_S,
            )
        except KafkaUnavailable as exc:
            raise QuotaClientError(
                f"DescribeClientQuotas of every broker of {self.bootstrap} failed: {exc}"
            ) from None
        views = [snapshot_from_response(a) for a in answers.values() if not _failed(a)]
        if not views:
            failures = "; ".join(f"{n}: {describe_error(a)}" for n, a in answers.items())
            raise QuotaClientError(f"no broker answered DescribeClientQuotas ({failures})")
        return agreed(views)

    def alter(self, changes: Sequence[Change], validate_only: bool = False) -> None:
        """Every request is checked before the next is sent. Validation checks all batches and
        reports every rejected entity at once."""
        rejected: list[QuotaRejected] = []
        for batch in batches(changes):
            try:
                check_alter_response(self._send(alter_request(batch, validate_only)))
            except QuotaRejected as exc:
                if not validate_only:
                    raise
                rejected.append(exc)
        if rejected:
            raise QuotaRejected(
                [e for exc in rejected for e in exc.errors],
                [e for exc in rejected for e in exc.entities],
            )

    def quota_settings(self) -> BrokerQuotaSettings:
        """Metadata for the brokers, then DescribeConfigs of each broker's own quota settings
        (a broker answers only for itself). Brokers that fail are skipped unless all fail."""
        brokers = sorted(b.node_id for b in self._send(MetadataRequest(topics=[])).brokers)
        found, errors = BrokerQuotaSettings(), []
        for node_id in brokers:
            try:
                values = quota_settings_from_response(
                    self._send(quota_settings_request(node_id), node_id)
                )
            except QuotaClientError as exc:
                errors.append(str(exc))
                continue
            found = found.with_broker(node_id, values)
        if errors and len(errors) == len(brokers):
            raise QuotaClientError(f"cannot read the quota settings of any broker: {errors[0]}")
        return found

    def close(self) -> None:
        self._session.close()

    def _send(self, request: Any, node_id: int | None = None) -> Any:
        try:
            return self._session.send(request, node_id)
        except KafkaUnavailable as exc:
            raise QuotaClientError(
                f"{type(request).__name__} to {self.bootstrap} failed: {exc}"
            ) from None
