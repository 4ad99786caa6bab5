"""The exporter's families written by prometheus_client itself: the reference the direct
rendering in `exporter/exposition.py` must equal byte for byte (tests), and its former cost (bench).
"""

from __future__ import annotations

from prometheus_client import generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from kvq.contract.metric_families import COUNTER
from kvq.contract.metric_samples import families


class _Collected:
    def __init__(self, metrics: list) -> None:
        self.metrics = metrics

    def collect(self):
        return iter(self.metrics)


def prometheus_client_text(exporter) -> bytes:
    """`/metrics` of a running `exporter.exporter_app.Exporter` as prometheus_client writes it."""
    config = exporter.config
    interval = config.check_interval.total_seconds()
    built = families(exporter.throttle, exporter.clock(), config.cluster, config.limit, interval)
    metrics = []
    for family in [exporter.archive_family(), *built]:
        labels = list(family.family.label_names(config.cluster.label))
        kind = CounterMetricFamily if family.type == COUNTER else GaugeMetricFamily
        metric = kind(family.name, family.help, labels=labels)
        for sample_labels, value in family.samples:
            metric.add_metric([sample_labels[key] for key in labels], value)
        metrics.append(metric)
    return generate_latest(exporter.registry) + generate_latest(_Collected(metrics))
