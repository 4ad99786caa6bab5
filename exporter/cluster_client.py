"""The one adapter between the exporter and Kafka.

confluent-kafka (librdkafka) answers "which brokers are active" (its describe_cluster sends
Metadata); librdkafka has no DescribeLogDirs, so kafka-python 3.x sends DescribeLogDirs v4+ with
`topics=[]` (directory totals only) to every active broker at once, each with its own deadline:
a poll costs about one round trip, not one per broker.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kvq.kafka.admin_session import KafkaAdminSession, KafkaUnavailable
from kvq.kafka.client_settings import librdkafka_config
from kvq.model.volume import LogDir


class ClusterError(Exception):
    """A Kafka call failed; the message is safe to log (no secrets)."""


@dataclass(frozen=True, slots=True)
class Broker:
    broker_id: int
    host: str
    port: int


def describe_error(exc: BaseException) -> str:
    """A short, secret-free description of a client exception."""
    text = str(exc).strip() or exc.__class__.__name__
    name = exc.__class__.__name__
    return text if text.startswith(name) else f"{name}: {text}"


class KafkaClusterClient:
    """Active brokers through librdkafka; every broker's log dirs through kafka-python."""

    def __init__(self, admin_properties: Mapping[str, str], timeout_seconds: float) -> None:
        from confluent_kafka.admin import AdminClient

        self._props = dict(admin_properties)
        self.timeout_seconds = timeout_seconds
        config = librdkafka_config(self._props)
        config.setdefault("socket.timeout.ms", str(int(timeout_seconds * 1000)))
        config.setdefault("client.id", "kvq-exporter")
        self._librdkafka = AdminClient(config)
        self._session = KafkaAdminSession(self._props, "kvq-exporter", int(timeout_seconds * 1000))
        self._versions: dict[int, tuple[object, int]] = {}

    def active_brokers(self) -> list[Broker]:
        """DescribeCluster: the brokers currently in the active set."""
        if self._librdkafka is None:
            raise ClusterError("the cluster client is closed")
        try:
            future = self._librdkafka.describe_cluster(request_timeout=self.timeout_seconds)
            description = future.result(timeout=self.timeout_seconds + 1)
        except Exception as exc:  # librdkafka raises KafkaException, futures TimeoutError
            raise ClusterError(describe_error(exc)) from None
        return sorted(
            (Broker(node.id, node.host, node.port) for node in description.nodes),
            key=lambda b: b.broker_id,
        )

    def describe_log_dirs(
        self, broker_ids: Iterable[int]
    ) -> dict[int, list[LogDir] | ClusterError]:
        """DescribeLogDirs to every broker concurrently; per broker its log dirs or its error."""
        ids = sorted(set(broker_ids))
        try:
            return self._session.run(self._fan_out, ids)
        except ClusterError as exc:
            return {b: exc for b in ids}
        except KafkaUnavailable as exc:
            return {b: ClusterError(str(exc)) for b in ids}

    async def _fan_out(self, manager, ids: list[int]) -> dict[int, list[LogDir] | ClusterError]:
        timeout_ms = int(self.timeout_seconds * 1000)
        if any(manager.cluster.broker_metadata(b) is None for b in ids):
            try:
                refresh = manager.call_soon(manager.cluster.refresh_metadata)  # a Future
                await manager.wait_for(refresh, timeout_ms)
            except Exception as exc:
                raise ClusterError(f"metadata refresh failed: {describe_error(exc)}") from None
        deadline = time.monotonic() + self.timeout_seconds
        pending = {b: manager.call_soon(self._describe_one, manager, b, deadline) for b in ids}
        results: dict[int, list[LogDir] | ClusterError] = {}
        for broker_id, future in pending.items():
            try:
                results[broker_id] = await manager.wait_for(future, _remaining_ms(deadline))
            except Exception as exc:
                self._versions.pop(broker_id, None)
                results[broker_id] = ClusterError(describe_error(exc))
        return results

    async def _describe_one(self, manager, broker_id: int, deadline: float) -> list[LogDir]:
        """DescribeLogDirs to one broker at the highest version *that broker* supports."""
        from kafka.protocol.admin import DescribeLogDirsRequest

        if manager.cluster.broker_metadata(broker_id) is None:
            raise ClusterError(f"broker {broker_id} is not in the metadata")
        version = await self._describe_log_dirs_version(manager, broker_id, deadline)
        request = DescribeLogDirsRequest(version=version, topics=[])
        response = await manager.send(
            request, node_id=broker_id, request_timeout_ms=_remaining_ms(deadline)
        )
        result = _log_dirs(broker_id, response)
        if isinstance(result, ClusterError):
            raise result
        return result

    async def _describe_log_dirs_version(self, manager, broker_id: int, deadline: float) -> int:
        """Ask the broker itself (ApiVersions v0) which DescribeLogDirs versions it speaks.

        kafka-python applies the bootstrap broker's versions to every connection: in a mixed
        cluster it would ask a new broker with v3 and see no sizes (-1), so a full volume would
        never violate. The answer is cached per connection: a restarted broker is asked again.
        """
        from kafka.protocol.admin import DescribeLogDirsRequest
        from kafka.protocol.metadata import ApiVersionsRequest

        connection = manager._conns.get(broker_id)
        cached = self._versions.get(broker_id)
        if cached is not None and connection is not None and cached[0] is connection:
            return cached[1]
        response = await manager.send(
            ApiVersionsRequest(version=0),
            node_id=broker_id,
            request_timeout_ms=_remaining_ms(deadline),
        )
        supported = {k.api_key: k.max_version for k in response.api_keys}
        if DescribeLogDirsRequest.API_KEY not in supported:
            raise ClusterError(f"broker {broker_id} does not support DescribeLogDirs")
        version = min(supported[DescribeLogDirsRequest.API_KEY], DescribeLogDirsRequest.max_version)
        self._versions[broker_id] = (manager._conns.get(broker_id), version)
        return version

    def close(self) -> None:
        """Close both clients; librdkafka has no close(): dropping the last reference destroys
        the handle and joins its threads (otherwise it reconnects to stopped brokers for ever)."""
        self._session.close()
        self._librdkafka = None


def _remaining_ms(deadline: float) -> int:
    return max(1, int((deadline - time.monotonic()) * 1000))


def _log_dirs(broker_id: int, response) -> list[LogDir] | ClusterError:
    """Check the top-level error code; keep each log dir's own error code on the LogDir."""
    top_error = getattr(response, "error_code", 0) or 0
    if top_error:
        from kafka import errors

        name = errors.for_code(top_error).__name__
        return ClusterError(f"broker {broker_id}: DescribeLogDirs error {top_error} ({name})")
    return [
        LogDir(
            broker_id=broker_id,
            path=result.log_dir,
            total_bytes=int(getattr(result, "total_bytes", -1)),
            usable_bytes=int(getattr(result, "usable_bytes", -1)),
            error_code=int(result.error_code or 0),
        )
        for result in response.results
    ]
