"""CreateTopics, answered as a KRaft cluster answers it (any broker forwards to the controller).

Each topic gets its own result: the checks of ``topics.place_replicas`` (counts or a manual
replica assignment), TOPIC_ALREADY_EXISTS; a topic named twice in one request is left out and
answered once, INVALID_REQUEST, after the others (ControllerApis.createTopics);
``validate_only`` checks and creates nothing. A topic that passes the checks is then counted
against the client's controller mutation quota (``mutation_quotas``), validate_only or not. Topic
configs are accepted and not applied (no retention or segment rolling here).
"""

from __future__ import annotations

from collections import Counter

from kafka.protocol.admin import CreateTopicsResponse

from .cluster_view import ServingBroker
from .mutation_quotas import THROTTLING_QUOTA_EXCEEDED, ThrottlingQuotaExceeded
from .protocol_codec import Request
from .topics import INVALID_REQUEST, NewTopic, TopicError

_Result = CreateTopicsResponse.CreatableTopicResult


def create_topics(broker: ServingBroker, req: Request) -> CreateTopicsResponse:
    cluster = broker.cluster
    body = req.body
    validate_only = bool(getattr(body, "validate_only", False))
    counts = Counter(t.name for t in body.topics)
    quota = cluster.mutation_quotas.quota_for(
        req.session.user, req.client_id or "", req.api_version
    )
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
            placement = cluster.create_topic(new, validate_only=True)
            quota.record(len(placement))
            if not validate_only:
                placement = cluster.create_topic(new)
        except TopicError as exc:
            results.append(_failed(topic.name, exc))
            continue
        except ThrottlingQuotaExceeded:
            results.append(_failed(topic.name, TopicError(THROTTLING_QUOTA_EXCEEDED, None)))
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
    req.throttle_ms = quota.throttle_ms()  # the broker mutes the channel that long
    return CreateTopicsResponse(
        version=req.api_version, throttle_time_ms=req.throttle_ms, topics=results
    )


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
