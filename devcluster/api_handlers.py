"""What a broker answers to each supported Kafka API, following Kafka 4.x brokers (KRaft mode).

Each handler takes the answering broker and the decoded request and returns the response message
(with its version set). Handlers see the broker and the cluster through ``cluster_view``'s
Protocols, never the concrete classes. They run on the devcluster's event loop and do no network
I/O.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable

from kafka.errors import for_code
from kafka.protocol.admin import (
    AlterClientQuotasResponse,
    DescribeClientQuotasResponse,
    DescribeClusterResponse,
    DescribeConfigsResponse,
    DescribeLogDirsResponse,
)
from kafka.protocol.api_key import ApiKey
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.metadata import ApiVersionsResponse, MetadataResponse

from . import broker_configs as bc
from . import cluster_acls as acl
from . import quota_store as q
from .cluster_view import BrokerNode, ServingBroker
from .faults import APPLY_EARLY, AlterFault
from .protocol_codec import Request

Handler = Callable[[ServingBroker, Request], ApiMessage | None]
"""What answers one API: the response (with its version set); None for no answer (acks=0)."""

UNSUPPORTED_VERSION = 35
INVALID_REQUEST = 42
KAFKA_STORAGE_ERROR = 56
UNKNOWN_TOPIC_OR_PARTITION = 3
LEADER_NOT_AVAILABLE = 5
UNKNOWN_TOPIC_ID = 100
MISMATCHED_ENDPOINT_TYPE = 114
UNSUPPORTED_ENDPOINT_TYPE = 115

# Operations a principal holds without an authorizer (Kafka reports all supported ones).
_CLUSTER_OPERATIONS = {5, 7, 8, 9, 10, 11, 12}  # CREATE ALTER DESCRIBE CLUSTER_ACTION ...CONFIGS IW
_TOPIC_OPERATIONS = {3, 4, 5, 6, 7, 8, 10, 11}  # READ WRITE CREATE DELETE ALTER DESCRIBE ...CONFIGS


def api_versions(broker: ServingBroker, req: Request) -> ApiMessage:
    versions = broker.api_versions()
    listed = [_api_version(k, lo, hi) for k, (lo, hi) in versions.items()]
    if req.body is None:  # a version this broker does not know: error 35 in a v0 body (KIP-511)
        return ApiVersionsResponse(version=0, error_code=UNSUPPORTED_VERSION, api_keys=listed)
    return ApiVersionsResponse(
        version=req.api_version, error_code=0, api_keys=listed, throttle_time_ms=0
    )


def _api_version(key: int, lo: int, hi: int):
    return ApiVersionsResponse.ApiVersion(api_key=int(key), min_version=lo, max_version=hi)


def metadata(broker: ServingBroker, req: Request) -> ApiMessage:
    cluster = broker.cluster
    body = req.body
    version = req.api_version
    live = cluster.live_brokers()
    _Broker = MetadataResponse.MetadataResponseBroker
    requested = body.topics
    if version == 0 and requested == []:
        requested = None  # v0: an empty list means all topics
    topics = []
    if requested is None or requested:
        hosted = cluster.topics()
        if requested is None:
            wanted = [(name, None) for name in sorted(hosted)]
        else:
            wanted = [(t.name, t.topic_id if version >= 10 else None) for t in requested]
        topics = [
            _metadata_topic(cluster, hosted, name, topic_id, version) for name, topic_id in wanted
        ]
    include_topic_ops = version >= 8 and body.include_topic_authorized_operations
    for topic in topics:
        if include_topic_ops and topic.error_code == 0:
            topic.authorized_operations = _TOPIC_OPERATIONS
    response = MetadataResponse(
        version=version,
        throttle_time_ms=0,
        brokers=[
            _Broker(node_id=b.broker_id, host=b.host, port=_port(b, req), rack=None) for b in live
        ],
        cluster_id=cluster.cluster_id,
        controller_id=live[0].broker_id if live else -1,
        topics=topics,
    )
    if 8 <= version <= 10 and body.include_cluster_authorized_operations:
        response.authorized_operations = _cluster_operations(broker, req)
    return response


def _principal(req: Request) -> str:
    return req.session.principal


def _denied(broker: ServingBroker, req: Request, operation: str) -> bool:
    """True when the cluster has ACLs and the request's principal may not do ``operation``."""
    acls = broker.cluster.acls
    return acls is not None and not acls.allows(_principal(req), operation)


def _cluster_operations(broker: ServingBroker, req: Request) -> set[int]:
    acls = broker.cluster.acls
    return _CLUSTER_OPERATIONS if acls is None else acls.authorized_operations(_principal(req))


def _port(broker: BrokerNode, req: Request) -> int:
    """Kafka lists each broker's endpoint of the listener the request came in on."""
    return broker.port_for(req.session.listener)


def _metadata_topic(cluster, hosted, name, topic_id, version):
    _Topic = MetadataResponse.MetadataResponseTopic
    _Partition = _Topic.MetadataResponsePartition
    if name is None and topic_id is not None:  # v12+: asked by id
        name = next((n for n in hosted if cluster.topic_id(n) == topic_id), None)
        if name is None:
            return _Topic(error_code=UNKNOWN_TOPIC_ID, name=None, topic_id=topic_id, partitions=[])
    if name not in hosted:
        return _Topic(error_code=UNKNOWN_TOPIC_OR_PARTITION, name=name, partitions=[])
    partitions = []
    for index, replicas in sorted(hosted[name].items()):
        isr = cluster.replicas.in_sync(name, index, replicas)
        leader = cluster.replicas.leader(name, index, replicas)
        leader = -1 if leader is None else leader
        partitions.append(
            _Partition(
                error_code=0 if isr else LEADER_NOT_AVAILABLE,
                partition_index=index,
                leader_id=leader,
                leader_epoch=0,
                replica_nodes=replicas,
                isr_nodes=isr,
                offline_replicas=[b for b in replicas if b not in isr],
            )
        )
    return _Topic(error_code=0, name=name, topic_id=cluster.topic_id(name), partitions=partitions)


def describe_cluster(broker: ServingBroker, req: Request) -> ApiMessage:
    """As a Kafka 4.1 broker (KafkaApis.handleDescribeCluster, AuthHelper): brokers only
    (EndpointType 1); the unfenced brokers, and with v2's IncludeFencedBrokers the stopped ones
    too, still registered and fenced; a random live broker as "controller"."""
    cluster = broker.cluster
    body = req.body
    version = req.api_version
    if version >= 1 and body.endpoint_type != 1:
        # Kafka's error answer leaves every other field at its default: EndpointType 1, ClusterId ""
        mismatched = body.endpoint_type == 2
        return DescribeClusterResponse(
            version=version,
            error_code=MISMATCHED_ENDPOINT_TYPE if mismatched else UNSUPPORTED_ENDPOINT_TYPE,
            error_message=(
                "The request was sent to an endpoint of type BROKER, but we wanted an endpoint "
                "of type CONTROLLER"
                if mismatched
                else f"Unsupported endpoint type {body.endpoint_type}"
            ),
            endpoint_type=1,
            cluster_id="",
            brokers=[],
        )
    live = cluster.live_brokers()
    with_fenced = version >= 2 and body.include_fenced_brokers
    listed = cluster.brokers if with_fenced else live
    _Broker = DescribeClusterResponse.DescribeClusterBroker
    return DescribeClusterResponse(
        version=version,
        throttle_time_ms=0,
        error_code=0,
        error_message=None,
        endpoint_type=1,
        cluster_id=cluster.cluster_id,
        # KRaft brokers have no controller to name: Kafka picks a random unfenced broker per answer
        controller_id=random.choice(live).broker_id if live else -1,
        brokers=[
            _Broker(
                broker_id=b.broker_id,
                host=b.host,
                port=_port(b, req),
                rack=None,
                is_fenced=not b.up,
            )
            for b in listed
        ],
        authorized_operations=(
            _cluster_operations(broker, req) if body.include_cluster_authorized_operations else None
        ),
    )


def describe_log_dirs(broker: ServingBroker, req: Request) -> ApiMessage:
    version = req.api_version
    faults = broker.faults
    if _denied(broker, req, "Describe"):
        return DescribeLogDirsResponse(
            version=version,
            throttle_time_ms=0,
            error_code=acl.CLUSTER_AUTHORIZATION_FAILED,
            results=[],
        )
    if faults.fail_describe_log_dirs is not None:
        # Kafka's error response: a top-level code (v3+), no results.
        return DescribeLogDirsResponse(
            version=version,
            throttle_time_ms=0,
            error_code=faults.fail_describe_log_dirs,
            results=[],
        )
    # A broker capped below v4 predates KIP-827 and has no sizes to give. A client that sends v4
    # anyway (kafka-python reuses the bootstrap broker's versions; connections made before the
    # fault) gets -1 sizes, what a v3 answer decodes to, rather than a closed connection.
    cap = faults.max_describe_log_dirs_version
    pre_kip_827 = cap is not None and cap < 4
    wanted = None  # None: every partition
    if req.body.topics is not None:
        wanted = {(t.topic, p) for t in req.body.topics for p in t.partitions}
    _Result = DescribeLogDirsResponse.DescribeLogDirsResult
    _Topic = _Result.DescribeLogDirsTopic
    _Partition = _Topic.DescribeLogDirsPartition
    results = []
    for index, log_dir in enumerate(broker.log_dirs):
        path = str(log_dir.path)
        code = faults.log_dir_errors.get(index)
        if code is None and log_dir.offline_reason is not None:
            code = KAFKA_STORAGE_ERROR  # a write failed here: offline until brought back
        if code is None:
            try:
                space = log_dir.space()  # also how a vanished directory shows up
                partitions = [] if wanted == set() else log_dir.partitions()
            except OSError:  # Kafka takes a log dir offline on an I/O error
                code = KAFKA_STORAGE_ERROR
        if code is not None:
            results.append(_Result(error_code=code, log_dir=path, topics=[]))
            continue
        by_topic: dict[str, list] = {}
        for topic, partition, size in partitions:
            if wanted is None or (topic, partition) in wanted:
                by_topic.setdefault(topic, []).append(
                    _Partition(
                        partition_index=partition,
                        partition_size=size,
                        offset_lag=0,
                        is_future_key=False,
                    )
                )
        result = _Result(
            error_code=0,
            log_dir=path,
            topics=[_Topic(name=t, partitions=ps) for t, ps in by_topic.items()],
        )
        if version >= 4 and not pre_kip_827:
            result.total_bytes = space.total_bytes
            result.usable_bytes = space.usable_bytes
        results.append(result)
    return DescribeLogDirsResponse(
        version=version, throttle_time_ms=0, error_code=0, results=results
    )


def describe_client_quotas(broker: ServingBroker, req: Request) -> ApiMessage:
    components = [
        q.FilterComponent(c.entity_type, c.match_type, c.match) for c in req.body.components
    ]
    _Entry = DescribeClientQuotasResponse.EntryData
    try:
        if _denied(broker, req, "DescribeConfigs"):
            raise q.QuotaError(
                acl.CLUSTER_AUTHORIZATION_FAILED, acl.CLUSTER_AUTHORIZATION_FAILED_MESSAGE
            )
        found = broker.cluster.quotas.describe(
            components, strict=req.body.strict, lag_s=broker.faults.quota_metadata_lag_ms / 1000
        )
    except q.QuotaError as exc:
        return DescribeClientQuotasResponse(
            version=req.api_version,
            throttle_time_ms=0,
            error_code=exc.code,
            error_message=exc.message,
            entries=None,
        )
    return DescribeClientQuotasResponse(
        version=req.api_version,
        throttle_time_ms=0,
        error_code=0,
        error_message=None,
        entries=[
            _Entry(
                entity=[
                    _Entry.EntityData(entity_type=t, entity_name=n) for t, n in q.java_order(entity)
                ],
                values=[_Entry.ValueData(key=k, value=v) for k, v in sorted(values.items())],
            )
            for entity, values in found
        ],
    )


def alter_client_quotas(
    broker: ServingBroker, req: Request, fault: AlterFault | None = None
) -> ApiMessage:
    """Applied by the cluster-wide quota store (the controller); ``fault`` makes it fail."""
    alterations = [
        q.Alteration(
            entity=tuple((e.entity_type, e.entity_name) for e in entry.entity),
            ops=tuple(q.Op(op.key, op.value, op.remove) for op in entry.ops),
        )
        for entry in req.body.entries
    ]
    code = None if fault is None else fault.error_code
    if _denied(broker, req, "AlterConfigs"):  # the controller's check
        results = q.failed_request(
            alterations, acl.CLUSTER_AUTHORIZATION_FAILED, acl.CLUSTER_AUTHORIZATION_FAILED_MESSAGE
        )
    elif fault is not None and code is not None and fault.entities is None:
        if fault.applied:  # the answer is an error, the change happened all the same
            broker.cluster.quotas.alter(alterations, validate_only=req.body.validate_only)
        results = q.failed_request(alterations, code, _error_description(code))
    else:
        forced = None
        if fault is not None and code and fault.entities is not None:
            forced = dict.fromkeys(fault.entities, (code, _error_description(code)))
        results = broker.cluster.quotas.alter(
            alterations, validate_only=req.body.validate_only, forced_errors=forced
        )
    _Entry = AlterClientQuotasResponse.EntryData
    return AlterClientQuotasResponse(
        version=req.api_version,
        throttle_time_ms=0,
        entries=[
            _Entry(
                error_code=r.error_code,
                error_message=r.error_message,
                entity=[
                    _Entry.EntityData(entity_type=t, entity_name=n)
                    for t, n in q.java_order(r.entity)
                ],
            )
            for r in results
        ],
    )


async def alter_client_quotas_with_faults(broker: ServingBroker, req: Request) -> ApiMessage:
    """AlterClientQuotas under the broker's ``alter_client_quotas`` fault: late (applied late, or
    applied at once and answered late) and/or failing. The delay does not depend on the client's
    connection: a client that timed out and left still gets its request applied."""
    fault = broker.cluster.take_alter_fault(broker, req.body.validate_only)
    if fault is None or not fault.delay_ms:
        return alter_client_quotas(broker, req, fault)
    if fault.apply == APPLY_EARLY:
        response = alter_client_quotas(broker, req, fault)
        await asyncio.sleep(fault.delay_ms / 1000)
        return response
    await asyncio.sleep(fault.delay_ms / 1000)
    return alter_client_quotas(broker, req, fault)


def _error_description(code: int) -> str:
    return for_code(code).description


def describe_configs(broker: ServingBroker, req: Request) -> ApiMessage:
    """BROKER resources as Kafka's ConfigHelper answers them (see ``broker_configs``); other
    resource types get INVALID_REQUEST: the devcluster has no topic, group or logger configs."""
    version = req.api_version
    body = req.body
    _Result = DescribeConfigsResponse.DescribeConfigsResult
    if any(r.resource_type not in bc.RESOURCE_TYPES for r in body.resources):
        # Kafka throws before answering any resource: the request's error response.
        results = [
            _Result(
                error_code=bc.INVALID_REQUEST,
                error_message=bc.INVALID_REQUEST_MESSAGE,
                resource_type=r.resource_type,
                resource_name=r.resource_name,
                configs=[],
            )
            for r in body.resources
        ]
        return DescribeConfigsResponse(version=version, throttle_time_ms=0, results=results)
    config = broker.static_config()
    synonyms = version >= 1 and body.include_synonyms
    documentation = version >= 3 and body.include_documentation
    results = []
    for r in body.resources:
        if r.resource_type == bc.BROKER and _denied(broker, req, "DescribeConfigs"):
            found = bc.ResourceResult(
                acl.CLUSTER_AUTHORIZATION_FAILED, acl.CLUSTER_AUTHORIZATION_FAILED_MESSAGE
            )
        elif r.resource_type == bc.BROKER:
            found = bc.describe_broker(
                broker.broker_id, r.resource_name, r.configuration_keys, config
            )
        else:
            found = bc.ResourceResult(
                bc.INVALID_REQUEST, "devcluster describes the configs of BROKER resources only"
            )
        results.append(
            _Result(
                error_code=found.error_code,
                error_message=found.error_message,
                resource_type=r.resource_type,
                resource_name=r.resource_name,
                configs=[_config_result(c, synonyms, documentation) for c in found.configs],
            )
        )
    return DescribeConfigsResponse(version=version, throttle_time_ms=0, results=results)


def _config_result(config: bc.Config, synonyms: bool, documentation: bool):
    _Config = DescribeConfigsResponse.DescribeConfigsResult.DescribeConfigsResourceResult
    return _Config(
        name=config.name,
        value=config.value,
        read_only=config.read_only,
        is_default=False,  # v0 only; Kafka's ConfigHelper never sets it
        config_source=config.source,
        is_sensitive=False,
        synonyms=[
            _Config.DescribeConfigsSynonym(name=n, value=v, source=s)
            for n, v, s in (config.synonyms if synonyms else ())
        ],
        config_type=config.type,
        documentation=config.doc if documentation else None,
    )


HANDLERS: dict[int, Handler] = {
    ApiKey.ApiVersions: api_versions,
    ApiKey.Metadata: metadata,
    ApiKey.DescribeCluster: describe_cluster,
    ApiKey.DescribeLogDirs: describe_log_dirs,
    ApiKey.DescribeClientQuotas: describe_client_quotas,
    ApiKey.AlterClientQuotas: alter_client_quotas,
    ApiKey.DescribeConfigs: describe_configs,
}
