"""The enforcer's own Prometheus metrics (every series but webhooks carries `cluster`)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

PREFIX = "kafka_volume_quota_enforcer_"
WEBHOOK_OUTCOMES = (
    "applied",
    "ignored",
    "dry_run",
    "bad_request",
    "unauthorized",
    "too_large",
    "kafka_unavailable",
    "error",
)


class EnforcerMetrics:
    """Counters, gauges and the apply latency histogram, in a registry of their own."""

    content_type = CONTENT_TYPE_LATEST

    def __init__(self, clusters: tuple[str, ...] = ()) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.webhooks = Counter(
            PREFIX + "webhooks", "Webhook requests by outcome", ["outcome"], registry=r
        )
        self.applies = Counter(
            PREFIX + "applies", "Completed applies of a target factor", ["cluster"], registry=r
        )
        self.apply_failures = Counter(
            PREFIX + "apply_failures", "Applies that failed (Kafka error)", ["cluster"], registry=r
        )
        self.quota_changes = Counter(
            PREFIX + "quota_changes", "Quota values set or removed", ["cluster"], registry=r
        )
        self.apply_seconds = Histogram(
            PREFIX + "apply_duration_seconds",
            "Time to apply a target factor (describe, validate, alter, verify)",
            ["cluster"],
            buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
            registry=r,
        )
        self.target_factor = Gauge(
            PREFIX + "target_factor", "Factor the firing alerts ask for", ["cluster"], registry=r
        )
        self.applied_factor = Gauge(
            PREFIX + "applied_factor", "Factor last applied completely", ["cluster"], registry=r
        )
        self.drift = Gauge(
            PREFIX + "drift_pairs",
            "Quota values an operator changed while throttled (kept as they are)",
            ["cluster"],
            registry=r,
        )
        for outcome in WEBHOOK_OUTCOMES:
            self.webhooks.labels(outcome)
        for cluster in clusters:
            for metric in (self.applies, self.apply_failures, self.quota_changes):
                metric.labels(cluster)
            self.apply_seconds.labels(cluster)
            self.drift.labels(cluster).set(0)

    def render(self) -> bytes:
        return generate_latest(self.registry)
