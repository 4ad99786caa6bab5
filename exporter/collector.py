"""A prometheus_client Collector that builds the exporter's families at scrape time."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from kvq.contract.metric_families import COUNTER
from kvq.contract.metric_samples import families
from kvq.model.limits import Limit
from kvq.model.throttle_factor_source import ThrottleFactorSource


class ThrottleCollector(Collector):
    """Reads the policy state under `lock` (the one the poller feeds it under); reading applies
    due expiry."""

    def __init__(
        self,
        throttle: ThrottleFactorSource,
        lock: threading.Lock,
        cluster: str,
        limit: Limit,
        check_interval_seconds: float,
        clock: Callable[[], float],
    ) -> None:
        self.throttle = throttle
        self.lock = lock
        self.cluster = cluster
        self.limit = limit
        self.check_interval_seconds = check_interval_seconds
        self.clock = clock

    def collect(self) -> Iterator[Metric]:
        with self.lock:
            built = list(
                families(
                    self.throttle,
                    self.clock(),
                    self.cluster,
                    self.limit,
                    self.check_interval_seconds,
                )
            )
        for family in built:
            labels = list(family.family.labels)
            kind = CounterMetricFamily if family.type == COUNTER else GaugeMetricFamily
            metric = kind(family.name, family.help, labels=labels)
            for sample_labels, value in family.samples:
                metric.add_metric([sample_labels[key] for key in labels], value)
            yield metric
