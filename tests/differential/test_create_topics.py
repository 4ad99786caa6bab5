"""CreateTopics on devcluster and on real Kafka alike (KRaft: any broker forwards to the
controller, whose ReplicationControlManager checks each topic on its own): every error code and
message, validate_only, a name given twice, a topic that exists."""

from __future__ import annotations

import pytest
from kafka.protocol.admin import CreateTopicsRequest

from devcluster.kafka_version import CORDONED_LOG_DIRS
from devkit.devcluster_wire import admin_send, exchange
from tests.differential.backends import set_quota_seen_by, unique

pytestmark = pytest.mark.integration

Topic = CreateTopicsRequest.CreatableTopic
Assignment = Topic.CreatableReplicaAssignment
INVALID_TOPIC, ALREADY_EXISTS, INVALID_PARTITIONS = 17, 36, 37
INVALID_REPLICATION_FACTOR, INVALID_ASSIGNMENT, INVALID_REQUEST = 38, 39, 42
THROTTLING_QUOTA_EXCEEDED = 89


def topic(name: str, partitions: int = -1, replication: int = -1, assignment=()) -> Topic:
    return Topic(
        name=name,
        num_partitions=partitions,
        replication_factor=replication,
        assignments=[Assignment(partition_index=p, broker_ids=list(b)) for p, b in assignment],
        configs=[],
    )


def create(admin, topics: list[Topic], validate_only: bool = False) -> list[tuple]:
    """(name, code, message, partitions, replication factor) of each result, as answered."""
    request = CreateTopicsRequest(
        version=7, topics=topics, timeout_ms=30_000, validate_only=validate_only
    )
    answer = admin_send(admin, request, 0)
    return [
        (r.name, r.error_code, r.error_message, r.num_partitions, r.replication_factor)
        for r in answer.topics
    ]


def test_each_topic_is_checked_on_its_own_with_kafka_s_codes_and_messages(backend, admin_client):
    p = unique("ct")
    cases = [
        (
            topic(f"{p}-rf0", 1, 0),
            INVALID_REPLICATION_FACTOR,
            "Replication factor must be larger than 0, or -1 to use the default value.",
        ),
        (
            topic(f"{p}-p0", 0, 1),
            INVALID_PARTITIONS,
            "Number of partitions was set to an invalid non-positive value.",
        ),
        (
            topic(f"{p}-rf4", 1, 4),
            INVALID_REPLICATION_FACTOR,
            "Unable to replicate the partition 4 time(s): The target replication factor of 4 "
            "cannot be reached because only 3 broker(s) are registered"
            + (
                " or some brokers have all their log directories cordoned."
                if backend.kafka_version >= CORDONED_LOG_DIRS
                else "."
            ),
        ),
        (
            topic(f"{p}-both", 2, -1, [(0, [0])]),
            INVALID_REQUEST,
            "A manual partition assignment was specified, but numPartitions was not set to -1.",
        ),
        (
            topic(f"{p}-twice", assignment=[(0, [0]), (0, [1])]),
            INVALID_ASSIGNMENT,
            "Found multiple manual partition assignments for partition 0",
        ),
        (
            topic(f"{p}-dup", assignment=[(0, [0, 0])]),
            INVALID_ASSIGNMENT,
            "The manual partition assignment includes the broker 0 more than once.",
        ),
        (
            topic(f"{p}-empty", assignment=[(0, [])]),
            INVALID_ASSIGNMENT,
            "The manual partition assignment includes an empty replica list.",
        ),
        (
            topic(f"{p}-skew", assignment=[(0, [0]), (1, [0, 1])]),
            INVALID_ASSIGNMENT,
            "The manual partition assignment includes a partition with 2 replica(s), but this is "
            "not consistent with previous partitions, which have 1 replica(s).",
        ),
        (
            topic(f"{p}-gap", assignment=[(1, [0])]),
            INVALID_ASSIGNMENT,
            "partitions should be a consecutive 0-based integer sequence",
        ),
        (
            topic(f"{p}-nobody", assignment=[(0, [7])]),
            INVALID_ASSIGNMENT,
            "The manual partition assignment includes broker 7, but no such broker is registered.",
        ),
        (topic(f"{p}/slash", 1, 1), INVALID_TOPIC, None),
    ]
    answered = create(admin_client, [t for t, _, _ in cases])
    for (sent, code, message), (name, got_code, got_message, partitions, rf) in zip(
        cases, answered, strict=True
    ):
        assert (name, got_code, partitions, rf) == (sent.name, code, -1, -1)
        if message is not None:
            assert got_message == message, name
    assert "slash" in answered[-1][2]


def test_validate_only_creates_nothing_and_a_second_create_finds_the_topic(backend, admin_client):
    name, twice = unique("ct-made"), unique("ct-twice")
    assert create(admin_client, [topic(name, 2, 2)], validate_only=True) == [(name, 0, None, 2, 2)]
    assert create(admin_client, [topic(name, 2, 2)]) == [(name, 0, None, 2, 2)]
    # A name given twice is answered once (ControllerApis drops both copies before the
    # controller, then appends one INVALID_REQUEST for the name).
    assert create(admin_client, [topic(twice, 1, 1), topic(name, 1, 1), topic(twice, 1, 1)]) == [
        (name, ALREADY_EXISTS, f"Topic '{name}' already exists.", -1, -1),
        (twice, INVALID_REQUEST, "Duplicate topic name.", -1, -1),
    ]


def test_a_controller_mutation_quota_rejects_topics_once_its_token_bucket_is_empty(backend, admin):
    """ControllerMutationQuotaManager: a token bucket of `controller_mutation_rate` partitions per
    second, holding at most 11 windows' worth (11 x the rate); each topic takes its partition
    count. Strict from CreateTopics v6: a topic is refused (THROTTLING_QUOTA_EXCEEDED, 89) only
    once the bucket is already below zero, and the answer carries the time to refill it."""
    client = unique("mutations")
    set_quota_seen_by(
        admin, backend.node_ids, (("client-id", client),), {"controller_mutation_rate": 1.0}
    )
    p = unique("cmq")
    request = CreateTopicsRequest(
        version=7,
        topics=[topic(f"{p}-a", 5, 1), topic(f"{p}-b", 10, 1), topic(f"{p}-c", 1, 1)],
        timeout_ms=30_000,
        validate_only=False,
    )
    [answer] = exchange(backend.address(0), [request], client_id=client)
    codes = [(r.name, r.error_code, r.error_message) for r in answer.topics]
    assert codes == [
        (f"{p}-a", 0, None),
        (f"{p}-b", 0, None),  # 11 - 5 = 6 tokens left: taken although it needs 10
        (f"{p}-c", THROTTLING_QUOTA_EXCEEDED, None),
    ]
    assert 3000 < answer.throttle_time_ms <= 4000  # 4 tokens short at 1 per second
