"""The enforcer's own Prometheus metrics (every series but webhooks carries `cluster`, or the
label kvq.cluster.label names)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from enforcer.request_sizes import CLIENT_TIMEOUT_SECONDS

PREFIX = "kafka_volume_quota_enforcer_"
INBOX_OUTCOMES = ("handled", "recorded", "dropped")

WEBHOOK_OUTCOMES = (
    "applied",
    "ignored",
    "dry_run",
    "heartbeat",
    "bad_request",
    "unauthorized",
    "too_large",
    "kafka_unavailable",
    "error",
)


class EnforcerMetrics:
    """Counters, gauges and the apply latency histogram, in a registry of their own."""

    content_type = CONTENT_TYPE_LATEST

    def __init__(self, clusters: tuple[str, ...], cluster_label: str) -> None:
        self.registry = CollectorRegistry()
        self.clusters = clusters
        self.cluster_label = cluster_label
        self._cluster_metrics: list = []
        self.webhooks = Counter(
            PREFIX + "webhooks", "Webhook requests by outcome", ["outcome"], registry=self.registry
        )
        self.inbox_entries = Counter(
            PREFIX + "inbox_entries",
            "Queued webhooks the acting replica handled (state in Kafka), by outcome: handled, "
            "recorded (alerts recorded, the apply left to the reconcile loop), dropped",
            ["outcome"],
            registry=self.registry,
        )
        counter, gauge = self._per_cluster(Counter), self._per_cluster(Gauge)
        self.applies = counter("applies", "Completed applies of a target factor")
        self.apply_failures = counter("apply_failures", "Applies that failed (Kafka error)")
        self.quota_changes = counter("quota_changes", "Quota values set or removed")
        self.apply_seconds = Histogram(
            PREFIX + "apply_duration_seconds",
            "Time to apply a target factor (describe, validate, alter, verify)",
            [cluster_label],
            buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
            registry=self.registry,
        )
        self.alert_to_enforce_seconds = Histogram(
            PREFIX + "alert_to_enforce_seconds",
            "From a throttle alert's startsAt (the rule evaluation that asked for its factor) to "
            "Kafka's quotas written and verified at that factor, once per alert (each factor step "
            "is an alert of its own) whose webhook applied it: with the poll, scrape and rule "
            "intervals, the loop's response time (kvq.throttle.slowdown.response.time)",
            [cluster_label],
            buckets=(0.25, 0.5, 1, 1.5, 2, 3, 5, 7.5, 10, 15, 20, 30, 60, 120, 300),
            registry=self.registry,
        )
        self.acting = gauge(
            "acting",
            "1 while this replica acts on the cluster (always with kvq.enforcer.state.store="
            "local; with kafka, one replica at a time), 0 while it stands by",
        )
        self.set_acting(True)
        self.target_factor = gauge("target_factor", "Factor the firing alerts ask for")
        self.applied_factor = gauge("applied_factor", "Factor last applied completely")
        self.drift = gauge(
            "drift_pairs", "Quota values an operator changed while throttled (kept as they are)"
        )
        self.drift_changes = counter(
            "drift_changes",
            "Quota values found changed by someone else to a new value while throttled (kept)",
        )
        self.reverted = counter(
            "reverted_pairs",
            "Throttled values found reset to exactly their original (a reconciler undoing the "
            "throttle), throttled again",
        )
        self.escaping = gauge(
            "escaping_entities",
            f"Throttled quota entities whose produce requests take {CLIENT_TIMEOUT_SECONDS:.0f} s "
            "or more of their quota (librdkafka's default socket.timeout.ms; request size / "
            "quota, from Kafka's throttle times), as last read during the episode: their "
            "librdkafka producers time out, reconnect and write a request per timeout, past the "
            "quota",
        )
        self.throttle_checks = counter(
            "throttle_checks",
            "Looks at Kafka between applies whether a throttle in force still holds (one "
            "DescribeClientQuotas each)",
        )
        self.heartbeats = counter(
            "heartbeats", "Heartbeat alerts received (the alert path works for the cluster)"
        )
        self.failsafe_active = gauge(
            "failsafe_active",
            "1 while no heartbeat alert comes and the enforcer reads the throttle factor itself",
        )
        self.failsafe_factor = gauge(
            "failsafe_factor", "The throttle factor the fail-safe last read (while active)"
        )
        self.lost_resolutions = counter(
            "lost_resolutions",
            "Firing throttle alerts forgotten because no resolution came and the factor read 1 "
            "(an Alertmanager replaced with its storage lost does not send one)",
        )
        self.no_limit_stand_ins = counter(
            "no_limit_stand_ins",
            "Quota values written as 9223372036854774784 (no limit) in place of a non-finite "
            "original (NaN, +inf) that Kafka 4.4+ refuses to store; brokers enforce both alike",
        )
        self.originals_recovered = counter(
            "originals_recovered",
            "Originals taken from Kafka's copy because the journal did not have them",
        )
        self.originals_unknown = gauge(
            "originals_unknown",
            "1 while the enforcer cannot know the original quotas and refuses to act",
        )
        self.reconcile_failures = counter(
            "reconcile_failures",
            "Reconcile rounds that could not finish a cluster's work (Kafka, journal or other "
            "error); the loop carries on",
        )
        self.quota_callback = gauge(
            "quota_callback_active",
            "1 when brokers set client.quota.callback.class: Kafka ignores client quotas and the "
            "enforcer refuses to report applied",
        )
        for outcome in WEBHOOK_OUTCOMES:
            self.webhooks.labels(outcome)
        for outcome in INBOX_OUTCOMES:
            self.inbox_entries.labels(outcome)
        for cluster in clusters:
            for metric in self._cluster_metrics:
                metric.labels(cluster)
            self.apply_seconds.labels(cluster)
            self.alert_to_enforce_seconds.labels(cluster)

    def set_acting(self, acting: bool) -> None:
        for cluster in self.clusters:
            self.acting.labels(cluster).set(1 if acting else 0)

    def _per_cluster(self, kind):
        """A factory of metrics labelled by cluster (each series exists from the start)."""

        def make(name: str, documentation: str):
            labels = [self.cluster_label]
            metric = kind(PREFIX + name, documentation, labels, registry=self.registry)
            self._cluster_metrics.append(metric)
            return metric

        return make

    def render(self) -> bytes:
        return generate_latest(self.registry)
