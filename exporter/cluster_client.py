"""The one adapter between the exporter and Kafka.

confluent-kafka (librdkafka) answers "which brokers are active" (its describe_cluster sends
Metadata); librdkafka has no DescribeLogDirs, so kafka-python 3.x sends DescribeLogDirs v4+ with
`topics=[]` (directory totals only) to every active broker at once, each with its own deadline:
a poll costs about one round trip, not one per broker.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from exporter.kafka_settings import kafka_python_config, librdkafka_config
from exporter.volume import LogDir


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
        self._kafka_python = None
        self._lock = threading.Lock()

    def active_brokers(self) -> list[Broker]:
        """DescribeCluster: the brokers currently in the active set."""
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
            admin = self._admin()
            return admin._manager.run(self._fan_out, admin, ids)
        except ClusterError as exc:
            return {b: exc for b in ids}
        except Exception as exc:  # bootstrap failure, closed client
            self._reset()
            return {b: ClusterError(describe_error(exc)) for b in ids}

    async def _fan_out(self, admin, ids: list[int]) -> dict[int, list[LogDir] | ClusterError]:
        from kafka.protocol.admin import DescribeLogDirsRequest

        manager = admin._manager
        timeout_ms = int(self.timeout_seconds * 1000)
        if any(manager.cluster.broker_metadata(b) is None for b in ids):
            try:
                await manager.wait_for(manager.cluster.refresh_metadata(), timeout_ms)
            except Exception as exc:
                raise ClusterError(f"metadata refresh failed: {describe_error(exc)}") from None
        deadline = time.monotonic() + self.timeout_seconds
        pending = {}
        results: dict[int, list[LogDir] | ClusterError] = {}
        for broker_id in ids:
            if manager.cluster.broker_metadata(broker_id) is None:
                results[broker_id] = ClusterError(f"broker {broker_id} is not in the metadata")
                continue
            # A new request per broker: the client stamps the negotiated version on it.
            request = DescribeLogDirsRequest(topics=[])
            pending[broker_id] = manager.send(
                request, node_id=broker_id, request_timeout_ms=timeout_ms
            )
        for broker_id, future in pending.items():
            remaining_ms = max(1, int((deadline - time.monotonic()) * 1000))
            try:
                response = await manager.wait_for(future, remaining_ms)
            except Exception as exc:
                results[broker_id] = ClusterError(describe_error(exc))
                continue
            results[broker_id] = _log_dirs(broker_id, response)
        return results

    def _admin(self):
        with self._lock:
            if self._kafka_python is None:
                from kafka.admin import KafkaAdminClient

                timeout_ms = int(self.timeout_seconds * 1000)
                self._kafka_python = KafkaAdminClient(
                    client_id="kvq-exporter",
                    request_timeout_ms=timeout_ms,
                    bootstrap_timeout_ms=timeout_ms,
                    **kafka_python_config(self._props),
                )
            return self._kafka_python

    def _reset(self) -> None:
        with self._lock:
            client, self._kafka_python = self._kafka_python, None
        if client is not None:
            with contextlib.suppress(Exception):  # closing a broken client
                client.close()

    def close(self) -> None:
        self._reset()


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
