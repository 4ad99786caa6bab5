"""Produce, as KafkaApis.handleProduceRequest and ReplicaManager.appendRecords answer it.

Per partition: UNKNOWN_TOPIC_OR_PARTITION (3) for a topic or partition that does not exist,
KAFKA_STORAGE_ERROR (56) when this broker's replica is in an offline log dir or the write finds no
space (the dir goes offline), NOT_LEADER_OR_FOLLOWER (6) when another broker leads, CORRUPT_MESSAGE
(2) for records that are not whole magic-2 batches; otherwise the batches are appended (offsets
assigned) to every in-sync replica and the base offset is returned. acks must be -1, 0 or 1
(INVALID_REQUIRED_ACKS, 21). The request's size is recorded against the connection's produce
quota (unless the broker runs a client.quota.callback.class: then Kafka ignores client quotas);
the throttle time goes into the response and the broker mutes the channel for it. With
acks=0 there is no response, and a partition error closes the connection instead.
"""

from __future__ import annotations

from kafka.protocol.producer import InitProducerIdResponse, ProduceResponse

from .broker_configs import CLIENT_QUOTA_CALLBACK_CLASS
from .cluster_view import ServingBroker
from .partition_log import CorruptBatch, NoSpace
from .protocol_codec import Request

NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
NOT_LEADER_OR_FOLLOWER = 6
INVALID_REQUIRED_ACKS = 21
KAFKA_STORAGE_ERROR = 56

_Topic = ProduceResponse.TopicProduceResponse
_Partition = _Topic.PartitionProduceResponse


def produce(broker: ServingBroker, req: Request) -> ProduceResponse | None:
    body = req.body
    session = req.session
    if CLIENT_QUOTA_CALLBACK_CLASS not in broker.config_overrides:  # a plugin replaces them
        req.throttle_ms = broker.produce_quotas.record(session.user, req.client_id or "", req.size)
    acks = body.acks
    topics = []
    failed = False
    for topic in body.topic_data:
        partitions = []
        for data in topic.partition_data:
            if acks not in (-1, 0, 1):
                code, base, message = INVALID_REQUIRED_ACKS, -1, None
            else:
                code, base, message = _append(broker, topic.name, data.index, data.records)
            failed = failed or code != NONE
            partitions.append(
                _Partition(
                    index=data.index,
                    error_code=code,
                    base_offset=base,
                    log_append_time_ms=-1,
                    log_start_offset=0 if code == NONE else -1,
                    record_errors=[],
                    error_message=message,
                )
            )
        topics.append(_Topic(name=topic.name, partition_responses=partitions))
    if acks == 0:
        req.close_after = failed  # Kafka closes the connection so the producer notices
        return None
    return ProduceResponse(
        version=req.api_version, responses=topics, throttle_time_ms=req.throttle_ms
    )


def _append(
    broker: ServingBroker, topic: str, partition: int, records
) -> tuple[int, int, str | None]:
    cluster = broker.cluster
    replicas = cluster.partition_replicas(topic, partition)
    if replicas is None:
        return UNKNOWN_TOPIC_OR_PARTITION, -1, None
    store = cluster.replicas
    local = store.replica(broker.broker_id, topic, partition)
    if local is not None and not local.online:
        return KAFKA_STORAGE_ERROR, -1, f"log dir {local.log_dir.path} is offline"
    if store.leader(topic, partition, replicas) != broker.broker_id:
        return NOT_LEADER_OR_FOLLOWER, -1, None
    in_sync = store.in_sync(topic, partition, replicas)
    if records is None:
        return 2, -1, "no records"
    try:
        return NONE, store.append(broker.broker_id, topic, partition, records, in_sync), None
    except CorruptBatch as exc:
        return exc.code, -1, str(exc)
    except NoSpace as exc:
        return KAFKA_STORAGE_ERROR, -1, str(exc)


NOT_COORDINATOR = 16


def init_producer_id(broker: ServingBroker, req: Request) -> InitProducerIdResponse:
    """An idempotent producer's id (kafka-python and the Java client enable idempotence by
    default). Transactions need a transaction coordinator, which devcluster does not run."""
    if req.body.transactional_id is not None:
        return InitProducerIdResponse(
            version=req.api_version,
            throttle_time_ms=0,
            error_code=NOT_COORDINATOR,
            producer_id=-1,
            producer_epoch=-1,
        )
    return InitProducerIdResponse(
        version=req.api_version,
        throttle_time_ms=0,
        error_code=NONE,
        producer_id=broker.cluster.next_producer_id(),
        producer_epoch=0,
    )
