"""What a differential test needs of either backend, and client quotas read and written alike.

A quota entity is a tuple of (entity type, name) pairs, a None name being the default entity;
`describe` answers ``{frozenset(pairs): {key: value}}``. On Kafka a broker's metadata image may
lag the controller's commit a little, so reads that follow a write go through `eventually`.
"""

from __future__ import annotations

import functools
import math
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import confluent_kafka.admin as ck
from kafka.admin import KafkaAdminClient
from kafka.protocol.admin import AlterClientQuotasRequest, DescribeClientQuotasRequest
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.producer import ProduceRequest
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest
from kafka.record.memory_records import MemoryRecordsBuilder

from devcluster.kafka_version import DEFAULT_VERSION, Version
from devkit.devcluster_wire import WireConnection, admin_send, exchange
from devkit.kafka_cluster import ADMIN, DEFAULT_USERS
from kvq.kafka.client_settings import kafka_python_config

Entry = AlterClientQuotasRequest.EntryData
Component = DescribeClientQuotasRequest.ComponentData
Pairs = tuple[tuple[str, str | None], ...]
Quotas = dict[frozenset, dict[str, float]]
T = TypeVar("T")

SETTLE_S = 15.0
"""How long a read may take to show a write: Kafka's brokers apply the controller's records
within milliseconds; the margin is for a loaded 2-core machine."""


@dataclass(frozen=True)
class Backend:
    name: str
    """"devcluster" or "kafka"."""
    bootstrap: str
    """PLAINTEXT listeners: principal User:ANONYMOUS."""
    sasl_bootstrap: str
    """SASL_PLAINTEXT (PLAIN) listeners, users DEFAULT_USERS."""
    node_ids: list[int]
    kafka_version: Version = DEFAULT_VERSION
    """The Kafka release answering (devcluster: imitating)."""

    def client_properties(self, user: str = ADMIN, password: str | None = None) -> dict[str, str]:
        """Java-style client properties for `user` over SASL/PLAIN."""
        return {
            "bootstrap.servers": self.sasl_bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": user,
            "sasl.password": DEFAULT_USERS[user] if password is None else password,
        }

    def address(self, node_id: int) -> str:
        """`host:port` of one broker's PLAINTEXT listener."""
        return self.bootstrap.split(",")[self.node_ids.index(node_id)]

    def sasl_address(self, node_id: int) -> str:
        """`host:port` of one broker's SASL_PLAINTEXT listener."""
        return self.sasl_bootstrap.split(",")[self.node_ids.index(node_id)]

    def admin_client(self) -> KafkaAdminClient:
        """kafka-python's admin client as the super user."""
        kwargs = kafka_python_config(self.client_properties(ADMIN))
        return KafkaAdminClient(request_timeout_ms=15000, **kwargs)


def unique(prefix: str) -> str:
    """A name no other test of the run (on the shared Kafka cluster) uses."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def eventually(read: Callable[[], T], done: Callable[[T], bool], timeout: float = SETTLE_S) -> T:
    """`read()` until `done` holds of its value, or the timeout; returns the last value read."""
    deadline = time.monotonic() + timeout
    while True:
        value = read()
        if done(value) or time.monotonic() > deadline:
            return value
        time.sleep(0.05)


# ---- topics and raw produce requests -------------------------------------------------------------


def create_topic(backend: Backend, name: str, replica_assignment: list[list[int]]) -> None:
    """Create a topic with librdkafka's admin client and wait until each partition's first
    replica knows itself as its leader (a broker learns of a new topic a moment later)."""
    admin = ck.AdminClient({"bootstrap.servers": backend.bootstrap, "log_level": 0})
    topic = ck.NewTopic(name, len(replica_assignment), replica_assignment=replica_assignment)
    admin.create_topics([topic], request_timeout=30)[name].result(30)
    for partition, replicas in enumerate(replica_assignment):
        leader = replicas[0]
        seen = eventually(
            functools.partial(_leader_seen_by, backend.address(leader), name, partition),
            lambda found, leader=leader: found == leader,
        )
        assert seen == leader, f"{name}-{partition}: broker {leader} sees leader {seen}"


def _leader_seen_by(address: str, topic: str, partition: int) -> int | None:
    [metadata] = exchange(address, [MetadataRequest(version=12, topics=None)])
    for found in metadata.topics:
        if found.name == topic:
            for state in found.partitions:
                if state.partition_index == partition and state.error_code == 0:
                    return state.leader_id
    return None


def record_batch(count: int, value_bytes: int) -> bytes:
    """One magic-2 record batch of `count` values of `value_bytes` each."""
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 30)
    for _ in range(count):
        builder.append(timestamp=None, key=None, value=b"v" * value_bytes, headers=[])
    builder.close()
    return bytes(builder.buffer())


def produce_request(topic: str, partition: int, records: bytes, acks: int = 1) -> Any:
    Topic = ProduceRequest.TopicProduceData
    return ProduceRequest(
        version=9,
        transactional_id=None,
        acks=acks,
        timeout_ms=10_000,
        topic_data=[
            Topic(
                name=topic,
                partition_data=[Topic.PartitionProduceData(index=partition, records=records)],
            )
        ],
    )


def sasl_connection(backend: Backend, node_id: int, user: str, client_id: str) -> WireConnection:
    """A raw connection to one broker's SASL listener, authenticated as `user` (SaslHandshake v1
    and SaslAuthenticate v2, PLAIN); the caller closes it."""
    connection = WireConnection(backend.sasl_address(node_id), client_id=client_id)
    try:
        connection.send(SaslHandshakeRequest(version=1, mechanism="PLAIN"))
        token = f"\0{user}\0{DEFAULT_USERS[user]}".encode()
        connection.send(SaslAuthenticateRequest(version=2, auth_bytes=token))
        shake, auth = connection.receive()[0], connection.receive()[0]
        assert (shake.error_code, auth.error_code) == (0, 0), (shake, auth)
    except BaseException:
        connection.close()
        raise
    return connection


# ---- client quotas over the wire -----------------------------------------------------------------


def entity(pairs: Pairs) -> list:
    return [Entry.EntityData(entity_type=t, entity_name=n) for t, n in pairs]


def ops(changes: Mapping[str, float | None]) -> list:
    """``{key: value}``; a None value removes the key."""
    return [
        Entry.OpData(key=k, value=0.0 if v is None else v, remove=v is None)
        for k, v in changes.items()
    ]


def alter_many(
    admin: KafkaAdminClient,
    request: Iterable[tuple[Pairs, Mapping[str, float | None]]],
    validate_only: bool = False,
) -> list[tuple[int, str | None, Pairs]]:
    """``[(pairs, {key: value})]`` -> the response entries as ``[(code, message, pairs)]``."""
    entries = [Entry(entity=entity(pairs), ops=ops(changes)) for pairs, changes in request]
    response = admin_send(
        admin, AlterClientQuotasRequest(entries=entries, validate_only=validate_only)
    )
    return [
        (e.error_code, e.error_message, tuple((d.entity_type, d.entity_name) for d in e.entity))
        for e in response.entries
    ]


def alter(
    admin: KafkaAdminClient,
    pairs: Pairs,
    changes: Mapping[str, float | None],
    validate_only: bool = False,
) -> tuple[int, str | None]:
    """One entity; (code, message) as Kafka's admin future would fail or succeed."""
    [(code, message, _)] = alter_many(admin, [(pairs, changes)], validate_only)
    return code, message


def set_quota_seen_by(
    admin: KafkaAdminClient,
    node_ids: int | Iterable[int],
    pairs: Pairs,
    changes: Mapping[str, float | None],
) -> None:
    """Alter one entity's quotas and wait until each broker of `node_ids` shows them: from then
    on its quota manager applies them. A combined node's controller applies a change before its
    broker shows it (one metadata loader, the controller's publishers installed first), so a
    quota the controller enforces (controller_mutation_rate, on the active controller, which
    any node may be) is in force once every node shows it."""
    assert alter(admin, pairs, changes) == (0, None)
    components = [(t, 0 if n is not None else 1, n) for t, n in pairs]  # exact / default
    wanted = {k: v for k, v in changes.items() if v is not None}

    def shown(node_id: int) -> dict[str, float]:
        response = describe_raw(admin, components, strict=True, node_id=node_id)
        return {v.key: v.value for e in response.entries for v in e.values}

    for node_id in [node_ids] if isinstance(node_ids, int) else node_ids:
        found = eventually(functools.partial(shown, node_id), lambda found: found == wanted)
        assert found == wanted, f"node {node_id} shows {found}"


def describe_raw(
    admin: KafkaAdminClient,
    components: Iterable[tuple],
    strict: bool,
    node_id: int | None = None,
) -> Any:
    """DescribeClientQuotas with filter components (type, match type, name), asked of
    `node_id` (None: any broker)."""
    request = DescribeClientQuotasRequest(
        components=[Component(entity_type=t, match_type=m, match=v) for t, m, v in components],
        strict=strict,
    )
    return admin_send(admin, request, node_id)


def describe(
    admin: KafkaAdminClient,
    components: Iterable[tuple] = (),
    strict=False,
    node_id: int | None = None,
) -> Quotas:
    response = describe_raw(admin, components, strict, node_id)
    assert response.error_code == 0, response.error_message
    return {
        frozenset((d.entity_type, d.entity_name) for d in e.entity): {
            v.key: v.value for v in e.values
        }
        for e in response.entries
    }


def same_quotas(a: Quotas, b: Quotas) -> bool:
    """Equal, NaN equal to NaN (a stored NaN is a value like any other)."""
    if a.keys() != b.keys():
        return False
    return all(_same_values(a[e], b[e]) for e in a)


def _same_values(a: Mapping[str, float], b: Mapping[str, float]) -> bool:
    return a.keys() == b.keys() and all(
        a[k] == b[k] or (math.isnan(a[k]) and math.isnan(b[k])) for k in a
    )


def quota_snapshot(admin: KafkaAdminClient) -> Quotas:
    return describe(admin)


RESTORE_CHUNK = 5000
"""Entries per request when putting quotas back: under the controller's 10,000-record bound."""


def restore_quotas(admin: KafkaAdminClient, before: Quotas, node_ids: Iterable[int]) -> None:
    """Put every client quota back as `before` had it, and wait until every broker shows it (the
    next test starts from what each broker enforces: on Kafka 4.0 a broker listed removed
    entities for up to a second after another showed them gone). A broker may answer from an
    image that still lacks the test's last change, so: read each broker, undo what one shows
    differently, and read again until all of them answer `before`."""
    deadline = time.monotonic() + SETTLE_S
    while True:
        views = [describe(admin, node_id=node_id) for node_id in node_ids]
        differing = [now for now in views if not same_quotas(now, before)]
        if not differing:
            return
        now = differing[0]
        assert time.monotonic() < deadline, f"client quotas not restored: {len(now)} entities"
        changes = _changes_back(now, before)
        for start in range(0, len(changes), RESTORE_CHUNK):
            answers = alter_many(admin, changes[start : start + RESTORE_CHUNK])
            assert {code for code, _, _ in answers} <= {0}, answers[:3]
        time.sleep(0.1)


def _changes_back(now: Quotas, before: Quotas) -> list[tuple[Pairs, dict[str, float | None]]]:
    """The alterations that turn `now` into `before`."""
    changes: list[tuple[Pairs, dict[str, float | None]]] = []
    for key in now.keys() | before.keys():
        wanted, current = before.get(key, {}), now.get(key, {})
        if _same_values(wanted, current):
            continue
        change: dict[str, float | None] = {k: None for k in current if k not in wanted}
        change.update(wanted)
        changes.append((tuple(sorted(key, key=lambda p: p[0])), change))
    return changes
