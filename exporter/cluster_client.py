"""The one adapter between the exporter and Kafka, on the kafka-python session (kvq.kafka).

"Which brokers are active" is Kafka's DescribeCluster (KIP-700), asked of any one broker that
answers: the one that answered last, else the others in turn. (librdkafka's describe_cluster sends
Metadata and then waits for the broker that Metadata names as the controller; a KRaft broker names a
random live broker there, so once that broker stopped every call timed out until librdkafka
refreshed its metadata, for up to minutes: no observation, and the throttle factor fell back.)
DescribeLogDirs v4+ with `topics=[]` (directory totals only; with `partition_sizes`, `topics=None`:
every partition replica's size too) goes to every active broker at once, each with its own
deadline: a poll costs about one round trip, not one per broker.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kvq.kafka.admin_session import KafkaAdminSession, KafkaUnavailable, describe_error
from kvq.kafka.broker_configs import (
    TOPIC_RESOURCE,
    BrokerConfigError,
    broker_config_request,
    broker_config_values,
    config_request,
    resource_config_values,
)
from kvq.model.volume import LogDirDescription


class ClusterError(Exception):
    """A Kafka call failed; the message is safe to log (no secrets)."""


@dataclass(frozen=True, slots=True)
class Broker:
    broker_id: int
    host: str
    port: int


class KafkaClusterClient:
    """Active brokers (DescribeCluster) and every broker's log dirs (DescribeLogDirs)."""

    def __init__(self, admin_properties: Mapping[str, str], timeout_seconds: float) -> None:
        self.timeout_seconds = timeout_seconds
        self._session = KafkaAdminSession(
            admin_properties, "kvq-exporter", int(timeout_seconds * 1000)
        )
        self._closed = False

    def active_brokers(self) -> list[Broker]:
        """DescribeCluster: the unfenced brokers, as one broker's metadata image lists them,
        with their endpoints on the listener the exporter connects to."""
        from kafka.protocol.admin import DescribeClusterRequest

        if self._closed:
            raise ClusterError("the cluster client is closed")
        try:
            response = self._session.send_to_any(
                lambda version: DescribeClusterRequest(version=version),
                DescribeClusterRequest,
                self.timeout_seconds,
            )
        except KafkaUnavailable as exc:
            raise ClusterError(str(exc)) from None
        if response.error_code:
            raise ClusterError(
                f"DescribeCluster error {_error_name(response.error_code)}: "
                f"{response.error_message}"
            )
        return sorted(
            (Broker(b.broker_id, b.host, b.port) for b in response.brokers),
            key=lambda b: b.broker_id,
        )

    def describe_log_dirs(
        self, broker_ids: Iterable[int], partition_sizes: bool = False
    ) -> dict[int, list[LogDirDescription] | ClusterError]:
        """DescribeLogDirs to every broker concurrently; per broker its log dirs or its error.

        Each broker is asked at the highest version *it* supports (`topics=[]`: totals only;
        with `partition_sizes`, all topics: each description's `replica_sizes` too).
        """
        from kafka.protocol.admin import DescribeLogDirsRequest

        ids = sorted(set(broker_ids))
        topics: list | None = None if partition_sizes else []
        try:
            responses = self._session.send_to_each(
                ids,
                lambda version: DescribeLogDirsRequest(version=version, topics=topics),
                DescribeLogDirsRequest,
                self.timeout_seconds,
            )
        except KafkaUnavailable as exc:
            return {b: ClusterError(str(exc)) for b in ids}
        return {
            b: (
                ClusterError(describe_error(r))
                if isinstance(r, Exception)
                else _log_dirs(b, r, partition_sizes)
            )
            for b, r in responses.items()
        }

    def broker_configs(self, broker_ids: Iterable[int], key: str) -> dict[int, str | ClusterError]:
        """DescribeConfigs of `key` of each broker, asked of that broker (a broker answers only
        for itself), one after the other: per broker its value ("" unset) or its error."""
        values: dict[int, str | ClusterError] = {}
        for broker_id in sorted(set(broker_ids)):
            try:
                response = self._session.send(broker_config_request(broker_id, [key]), broker_id)
                values[broker_id] = broker_config_values(response).get(key) or ""
            except BrokerConfigError as exc:
                values[broker_id] = ClusterError(str(exc))
            except KafkaUnavailable as exc:
                values[broker_id] = ClusterError(f"broker {broker_id}: {exc}")
        return values

    def partition_leaders(self) -> dict[tuple[str, int], int]:
        """Metadata of every topic: each partition's leader (a partition without one, or of a
        topic answered with an error, left out)."""
        from kafka.protocol.metadata import MetadataRequest

        try:
            response = self._session.send_to_any(
                lambda version: MetadataRequest(
                    version=version, topics=None, allow_auto_topic_creation=False
                ),
                MetadataRequest,
                self.timeout_seconds,
            )
        except KafkaUnavailable as exc:
            raise ClusterError(str(exc)) from None
        return {
            (topic.name, int(p.partition_index)): int(p.leader_id)
            for topic in response.topics
            if not topic.error_code
            for p in topic.partitions
            if not p.error_code and p.leader_id >= 0
        }

    def topic_configs(
        self, topics: Iterable[str], keys: Iterable[str]
    ) -> dict[str, dict[str, str | None] | ClusterError]:
        """DescribeConfigs of `keys` of `topics` in one request to any broker: per topic its
        values (a topic's default where unset) or its error."""
        from kafka.protocol.admin import DescribeConfigsRequest

        names, wanted = sorted(set(topics)), list(keys)
        if not names:
            return {}
        try:
            response = self._session.send_to_any(
                lambda version: config_request(TOPIC_RESOURCE, names, wanted, version),
                DescribeConfigsRequest,
                self.timeout_seconds,
            )
        except KafkaUnavailable as exc:
            raise ClusterError(str(exc)) from None
        return {
            name: ClusterError(str(values)) if isinstance(values, BrokerConfigError) else values
            for name, values in resource_config_values(response, "topic").items()
        }

    def list_offsets(
        self, asked: Mapping[int, Mapping[tuple[str, int], int]]
    ) -> dict[tuple[str, int], int]:
        """ListOffsets to each leader at once, for the partitions it leads, each at its own
        timestamp (ms since the epoch: the first offset at or after it, -1 if none; -2 the log
        start, -1 the log end): per partition its offset. A partition answered with an error
        (its leader moved), or whose leader did not answer, is left out."""
        from kafka.protocol.consumer import ListOffsetsRequest

        def build(partitions: Mapping[tuple[str, int], int]):
            by_topic: dict[str, list] = {}
            for (topic, partition), timestamp in sorted(partitions.items()):
                by_topic.setdefault(topic, []).append(
                    ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
                        partition_index=partition, timestamp=timestamp
                    )
                )
            topics = [
                ListOffsetsRequest.ListOffsetsTopic(name=name, partitions=partitions)
                for name, partitions in by_topic.items()
            ]
            return lambda version: ListOffsetsRequest(
                version=version, replica_id=-1, isolation_level=0, topics=topics
            )

        try:
            responses = self._session.send_to_each_its_own(
                {leader: build(partitions) for leader, partitions in asked.items() if partitions},
                ListOffsetsRequest,
                self.timeout_seconds,
            )
        except KafkaUnavailable:
            return {}
        return {
            (topic.name, int(p.partition_index)): int(p.offset)
            for response in responses.values()
            if not isinstance(response, Exception)
            for topic in response.topics
            for p in topic.partitions
            if not p.error_code
        }

    def close(self) -> None:
        """Close the session's connections; later calls fail instead of reconnecting."""
        self._closed = True
        self._session.close()


def _log_dirs(
    broker_id: int, response, partition_sizes: bool = False
) -> list[LogDirDescription] | ClusterError:
    """Check the top-level error code; keep each log dir's own error code on its description
    (and, when asked for, its replicas' sizes)."""
    top_error = getattr(response, "error_code", 0) or 0
    if top_error:
        return ClusterError(f"broker {broker_id}: DescribeLogDirs error {_error_name(top_error)}")
    return [
        LogDirDescription(
            broker_id=broker_id,
            log_dir=result.log_dir,
            total_bytes=int(getattr(result, "total_bytes", -1)),
            usable_bytes=int(getattr(result, "usable_bytes", -1)),
            error_code=int(result.error_code or 0),
            replica_sizes=_replica_sizes(result) if partition_sizes else None,
        )
        for result in response.results
    ]


def _replica_sizes(result) -> dict[tuple[str, int, bool], int]:
    """(topic, partition, future) -> size of each partition replica one log dir described."""
    return {
        (topic.name, int(p.partition_index), bool(p.is_future_key)): int(p.partition_size)
        for topic in result.topics or ()
        for p in topic.partitions
    }


def _error_name(code: int) -> str:
    """'41 (NotControllerError)': a Kafka error code with kafka-python's name for it."""
    from kafka import errors

    return f"{code} ({errors.for_code(code).__name__})"
