"""What every kvq server publishes besides its own families: build info, process, connections."""

from __future__ import annotations

import platform
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

import kvq

BUILD_INFO = "kafka_volume_quota_build_info"
HTTP_PREFIX = "kafka_volume_quota_http_"
STANDARD_PREFIXES = (BUILD_INFO, HTTP_PREFIX, "process_")
"""Name prefixes of the families registered by `register_standard_metrics`."""


class BuildInfoCollector(Collector):
    """`kafka_volume_quota_build_info{version, revision, python_version, program} 1`."""

    def __init__(self, program: str) -> None:
        self.labels = {
            "version": kvq.__version__,
            "revision": kvq.revision(),
            "python_version": platform.python_version(),
            "program": program,
        }

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            BUILD_INFO,
            "A constant 1 labelled with the version of kafka-volume-quotas and its runtime.",
            labels=list(self.labels),
        )
        family.add_metric(list(self.labels.values()), 1)
        yield family


class ConnectionCollector(Collector):
    """Open HTTP connections and the ones the server closed on a limit, by reason."""

    def __init__(self, open_connections: Callable[[], int], dropped: dict[str, int]) -> None:
        self.open_connections = open_connections
        self.dropped = dropped

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(
            HTTP_PREFIX + "open_connections",
            "HTTP connections open now (idle ones included).",
            value=self.open_connections(),
        )
        dropped = CounterMetricFamily(
            HTTP_PREFIX + "connections_dropped",
            "HTTP connections closed by the server: idle_timeout, read_timeout (slow request), "
            "write_timeout (slow reader), evicted (oldest idle one at the connection limit), "
            "full (limit reached with every connection busy), auth_queue_full (429: too many "
            "bcrypt password checks pending), auth_client_gone (client left before its check).",
            labels=["reason"],
        )
        for reason, count in sorted(self.dropped.items()):
            dropped.add_metric([reason], count)
        yield dropped


def register_standard_metrics(registry: CollectorRegistry, program: str, server) -> None:
    """Build info, the process collector (CPU, memory, open fds) and `server`'s connections."""
    registry.register(BuildInfoCollector(program))
    ProcessCollector(registry=registry)
    registry.register(ConnectionCollector(lambda: server.open_connections, server.dropped))
