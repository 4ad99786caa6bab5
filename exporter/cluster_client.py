"""The one adapter between the exporter and Kafka.

confluent-kafka (librdkafka) answers "which brokers are active" (its describe_cluster sends
Metadata); librdkafka has no DescribeLogDirs, so kafka-python 3.x sends DescribeLogDirs v4+ with
`topics=[]` (directory totals only) to every active broker at once, each with its own deadline:
a poll costs about one round trip, not one per broker.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kvq.kafka.admin_session import KafkaAdminSession, KafkaUnavailable, describe_error
from kvq.kafka.client_settings import librdkafka_config
from kvq.kafka.librdkafka_log import LIBRDKAFKA_LOG
from kvq.model.volume import LogDirDescription


class ClusterError(Exception):
    """A Kafka call failed; the message is safe to log (no secrets)."""


@dataclass(frozen=True, slots=True)
class Broker:
    broker_id: int
    host: str
    port: int


class KafkaClusterClient:
    """Active brokers through librdkafka; every broker's log dirs through kafka-python."""

    def __init__(self, admin_properties: Mapping[str, str], timeout_seconds: float) -> None:
        from confluent_kafka.admin import AdminClient

        self._props = dict(admin_properties)
        self.timeout_seconds = timeout_seconds
        config = librdkafka_config(self._props)
        config.setdefault("socket.timeout.ms", str(int(timeout_seconds * 1000)))
        config.setdefault("client.id", "kvq-exporter")
        config["logger"] = LIBRDKAFKA_LOG
        self._librdkafka = AdminClient(config)
        self._session = KafkaAdminSession(self._props, "kvq-exporter", int(timeout_seconds * 1000))

    def active_brokers(self) -> list[Broker]:
        """DescribeCluster: the brokers currently in the active set."""
        client = self._librdkafka
        if client is None:
            raise ClusterError("the cluster client is closed")
        try:
            future = client.describe_cluster(request_timeout=self.timeout_seconds)
            description = future.result(timeout=self.timeout_seconds + 1)
        except Exception as exc:  # librdkafka raises KafkaException, futures TimeoutError
            raise ClusterError(describe_error(exc)) from None
        finally:
            client.poll(0)  # hands librdkafka's queued log lines to LIBRDKAFKA_LOG
        return sorted(
            (Broker(node.id, node.host, node.port) for node in description.nodes),
            key=lambda b: b.broker_id,
        )

    def describe_log_dirs(
        self, broker_ids: Iterable[int]
    ) -> dict[int, list[LogDirDescription] | ClusterError]:
        """DescribeLogDirs to every broker concurrently; per broker its log dirs or its error.

        Each broker is asked at the highest version *it* supports (`topics=[]`: totals only).
        """
        from kafka.protocol.admin import DescribeLogDirsRequest

        ids = sorted(set(broker_ids))
        try:
            responses = self._session.send_to_each(
                ids,
                lambda version: DescribeLogDirsRequest(version=version, topics=[]),
                DescribeLogDirsRequest,
                self.timeout_seconds,
            )
        except KafkaUnavailable as exc:
            return {b: ClusterError(str(exc)) for b in ids}
        return {
            b: ClusterError(describe_error(r)) if isinstance(r, Exception) else _log_dirs(b, r)
            for b, r in responses.items()
        }

    def close(self) -> None:
        """Close both clients; librdkafka has no close(): dropping the last reference destroys
        the handle and joins its threads (otherwise it reconnects to stopped brokers for ever)."""
        self._session.close()
        if self._librdkafka is not None:
            self._librdkafka.poll(0)
        self._librdkafka = None


def _log_dirs(broker_id: int, response) -> list[LogDirDescription] | ClusterError:
    """Check the top-level error code; keep each log dir's own error code on its description."""
    top_error = getattr(response, "error_code", 0) or 0
    if top_error:
        from kafka import errors

        name = errors.for_code(top_error).__name__
        return ClusterError(f"broker {broker_id}: DescribeLogDirs error {top_error} ({name})")
    return [
        LogDirDescription(
            broker_id=broker_id,
            log_dir=result.log_dir,
            total_bytes=int(getattr(result, "total_bytes", -1)),
            usable_bytes=int(getattr(result, "usable_bytes", -1)),
            error_code=int(result.error_code or 0),
        )
        for result in response.results
    ]
