"""A prometheus_client Collector that builds the exporter's families at scrape time."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from exporter.poller import Poller
from kvq.contract.metric_samples import COUNTER, families
from kvq.model.limits import Limit


class ThrottleCollector(Collector):
    """Reads the policy state under the poller's lock; reading applies due expiry."""

    def __init__(
        self,
        poller: Poller,
        cluster: str,
        limit: Limit,
        check_interval_seconds: float,
        clock: Callable[[], float],
    ) -> None:
        self.poller = poller
        self.cluster = cluster
        self.limit = limit
        self.check_interval_seconds = check_interval_seconds
        self.clock = clock

    def collect(self) -> Iterator[Metric]:
        with self.poller.lock:
            built = list(
                families(
                    self.poller.throttle,
                    self.clock(),
                    self.cluster,
                    self.limit,
                    self.check_interval_seconds,
                )
            )
        for family in built:
            labels = sorted({key for sample_labels, _ in family.samples for key in sample_labels})
            kind = CounterMetricFamily if family.type == COUNTER else GaugeMetricFamily
            metric = kind(family.name, family.help, labels=labels)
            for sample_labels, value in family.samples:
                metric.add_metric([sample_labels[key] for key in labels], value)
            yield metric
