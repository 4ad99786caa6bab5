"""CreateTopics, answered as a KRaft cluster answers it (any broker forwards to the controller).

Each topic gets its own result: the checks of ``topics.place_replicas`` (counts or a manual
replica assignment), TOPIC_ALREADY_EXISTS; a topic named twice in one request is left out and
answered once, INVALID_REQUEST, after the others (ControllerApis.createTopics);
``validate_only`` checks and creates nothing. Topic configs are accepted and not
applied (no retention or segment rolling here).
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from kafka.protocol.admin import CreateTopicsResponse

from .protocol_codec import Request
from .topics import INVALID_REQUEST, NewTopic, TopicError

if TYPE_CHECKING:
    from .broker import Broker

_Result = CreateTopicsResponse.CreatableTopicResult


def create_topics(broker: Broker, req: Request) -> CreateTopicsResponse:
    cluster = broker.cluster
    body = req.body
    validate_only = bool(getattr(body, "validate_only", False))
    counts = Counter(t.name for t in body.topics)
    results = []
    for topic in body.topics:
        if counts[topic.name] > 1:
            continue
        new = NewTopic(
            name=topic.name,
            num_partitions=topic.num_partitions,
            replication_factor=topic.replication_factor,
            assignments=tuple((a.partition_index, tuple(a.broker_ids)) for a in topic.assignments),
        )
        try:
            placement = cluster.create_topic(new, validate_only=validate_only)
        except TopicError as exc:
            results.append(_failed(topic.name, exc))
            continue
        results.append(
            _Result(
                name=topic.name,
                topic_id=cluster.topic_id(topic.name),
                error_code=0,
                error_message=None,
                num_partitions=len(placement),
                replication_factor=len(placement[0]),
                configs=[],
            )
        )
    for name in (name for name, count in counts.items() if count > 1):
        results.append(_failed(name, TopicError(INVALID_REQUEST, "Duplicate topic name.")))
    return CreateTopicsResponse(version=req.api_version, throttle_time_ms=0, topics=results)


def _failed(name: str, error: TopicError) -> CreateTopicsResponse.CreatableTopicResult:
    return _Result(
        name=name,
        topic_id=None,
        error_code=error.code,
        error_message=error.message,
        num_partitions=-1,
        replication_factor=-1,
        configs=None,
    )
