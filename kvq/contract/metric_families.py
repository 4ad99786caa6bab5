"""The metric families the exporter publishes: one static table of name, type, help and labels.

Read by the exporter (`kvq.contract.metric_samples` fills it with values), by the Spark backfill
(the same headers, in the same order) and by the fake exporter of the rule tests. A test checks the
live `/metrics` exposition against this table, so a family cannot change in one place only.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvq.model.limits import Limit, MinAvailableBytes

NAMESPACE = "kafka_volume_quota"
GAUGE = "gauge"
COUNTER = "counter"
HISTOGRAM = "histogram"

CLUSTER_LABEL = "cluster"
"""The default name of the label holding the Kafka cluster's name (`kvq.cluster.label`): the table
below is written with it, `MetricFamily.label_names` puts the configured name in its place."""
CLUSTER = (CLUSTER_LABEL,)
PER_VOLUME = ("broker_id", CLUSTER_LABEL, "log_dir")
TAKEN_LABELS = frozenset(
    {"broker_id", "log_dir", "reason", "stage", "le", "scenario", "outcome"}
    | {"program", "version", "revision", "python_version"}
    | {"job", "instance", "namespace", "alertname", "alertstate", "severity"}
)
"""Label names the cluster's label cannot take: those of our own series (exporter, enforcer,
backfill's `scenario`, build info), those Prometheus adds at scrape (`job`, `instance`) and those
the rules' alerts carry (`namespace` in Kubernetes, `severity`, ALERTS' `alertname`,
`alertstate`)."""


@dataclass(frozen=True, slots=True)
class MetricFamily:
    """One family: `short` is its name without the namespace; counters without `_total`."""

    short: str
    type: str
    help: str
    labels: tuple[str, ...] = CLUSTER
    """Label names, sorted (as the exposition writes them)."""
    live_only: bool = False
    """Measured by the running exporter itself (timings), so the backfill cannot rebuild it."""

    @property
    def name(self) -> str:
        return f"{NAMESPACE}_{self.short}"

    def label_names(self, cluster_label: str) -> tuple[str, ...]:
        """The label names with the cluster's label named `cluster_label`, sorted (as the
        exposition writes them)."""
        return tuple(sorted(cluster_label if n == CLUSTER_LABEL else n for n in self.labels))

    @property
    def sample_name(self) -> str:
        """The name its samples carry: counters end in `_total`."""
        return self.name + "_total" if self.type == COUNTER else self.name


POLL_DURATION = MetricFamily(
    "poll_duration_seconds",
    HISTOGRAM,
    "Duration of one observation (DescribeCluster + DescribeLogDirs to all brokers).",
    live_only=True,
)
ARCHIVE_WRITE_FAILURES = MetricFamily(
    "archive_write_failures",
    COUNTER,
    "Polls the archive could not record (disk full, ...), lost to the backfill; 0 without one.",
    live_only=True,
)
THROTTLE_FACTOR = MetricFamily(
    "throttle_factor", GAUGE, "Throttle factor in force (Strimzi ThrottleFactor)."
)
FALLBACK_APPLIED = MetricFamily(
    "fallback_throttle_factor_applied",
    COUNTER,
    "Times the fallback factor was applied (Strimzi FallbackThrottleFactorApplied).",
)
LIMIT_VIOLATED = MetricFamily(
    "limit_violated", COUNTER, "Violating volumes summed over calculations (Strimzi LimitViolated)."
)
ACTIVE_BROKERS = MetricFamily(
    "active_brokers", GAUGE, "Brokers considered most recently (ActiveBrokers)."
)
ACTIVE_LOG_DIRS = MetricFamily(
    "active_log_dirs", GAUGE, "Volumes observed in the last calculation (ActiveLogDirs)."
)
FALLBACK_ACTIVE = MetricFamily("fallback_active", GAUGE, "1 while the fallback factor applies.")
CACHED_LOG_DIRS = MetricFamily(
    "cached_log_dirs",
    GAUGE,
    "Volumes judged from cache: missing from the last observation, or held offline.",
)
LOG_DIR_EVICTIONS = MetricFamily(
    "log_dir_evictions", COUNTER, "Cached volumes dropped after the validity duration."
)
HELD_LOG_DIRS = MetricFamily(
    "held_log_dirs",
    GAUGE,
    "Volumes held violating, last seen violating: their log dir offline, or their broker away "
    "beyond the validity.",
)
VIOLATION_HOLD_EXPIRED = MetricFamily(
    "violation_hold_expired_log_dirs",
    GAUGE,
    "Violating volumes released after the hold expired, still not seen again.",
)
UNUSABLE_LOG_DIRS = MetricFamily(
    "unusable_log_dirs",
    GAUGE,
    "Log dirs that cannot be judged, by reason.",
    (CLUSTER_LABEL, "reason"),
)
POLL_FAILURES = MetricFamily(
    "poll_failures",
    COUNTER,
    "Failed observations by the stage that failed.",
    (CLUSTER_LABEL, "stage"),
)
LAST_SUCCESSFUL_POLL = MetricFamily(
    "last_successful_poll_timestamp_seconds", GAUGE, "When the last observation succeeded."
)
LIMIT_BYTES = MetricFamily("limit_bytes", GAUGE, "Configured min available bytes per volume.")
LIMIT_RATIO = MetricFamily("limit_ratio", GAUGE, "Configured min available ratio per volume.")
CHECK_INTERVAL = MetricFamily("check_interval_seconds", GAUGE, "Configured poll interval.")
LOG_DIR_TOTAL_BYTES = MetricFamily(
    "log_dir_total_bytes", GAUGE, "Total bytes of the volume.", PER_VOLUME
)
LOG_DIR_AVAILABLE_BYTES = MetricFamily(
    "log_dir_available_bytes", GAUGE, "Available (usable) bytes of the volume.", PER_VOLUME
)
LOG_DIR_AVAILABLE_RATIO = MetricFamily(
    "log_dir_available_ratio", GAUGE, "Available bytes / total bytes.", PER_VOLUME
)
LOG_DIR_VIOLATING = MetricFamily(
    "log_dir_violating", GAUGE, "1 if the volume violates the limit.", PER_VOLUME
)
LOG_DIR_FILL_RATE = MetricFamily(
    "log_dir_fill_rate_bytes_per_second",
    GAUGE,
    "Bytes per second the volume fills at (graceful-slowdown: median of its last 3 intervals).",
    PER_VOLUME,
)
LOG_DIR_SECONDS_TO_LIMIT = MetricFamily(
    "log_dir_seconds_to_limit",
    GAUGE,
    "Predicted seconds until the volume reaches its limit at its fill rate (a year: not filling).",
    PER_VOLUME,
)
LOG_DIR_THROTTLE_FACTOR = MetricFamily(
    "log_dir_throttle_factor",
    GAUGE,
    "The throttle factor this volume asks for; the cluster's is the smallest.",
    PER_VOLUME,
)
POLICY_VOLUME_FAMILIES = (LOG_DIR_FILL_RATE, LOG_DIR_SECONDS_TO_LIMIT, LOG_DIR_THROTTLE_FACTOR)
"""Published only under a policy with gauges (graceful-slowdown): its gauges (`gauges` of the
policy), then each volume's factor. The proposal's policy publishes none of them, so its
exposition stays what it was."""

FAMILIES: tuple[MetricFamily, ...] = (
    POLL_DURATION,
    ARCHIVE_WRITE_FAILURES,
    THROTTLE_FACTOR,
    FALLBACK_APPLIED,
    LIMIT_VIOLATED,
    ACTIVE_BROKERS,
    ACTIVE_LOG_DIRS,
    FALLBACK_ACTIVE,
    CACHED_LOG_DIRS,
    LOG_DIR_EVICTIONS,
    HELD_LOG_DIRS,
    VIOLATION_HOLD_EXPIRED,
    UNUSABLE_LOG_DIRS,
    POLL_FAILURES,
    LAST_SUCCESSFUL_POLL,
    LIMIT_BYTES,
    LIMIT_RATIO,
    CHECK_INTERVAL,
    LOG_DIR_TOTAL_BYTES,
    LOG_DIR_AVAILABLE_BYTES,
    LOG_DIR_AVAILABLE_RATIO,
    LOG_DIR_VIOLATING,
    *POLICY_VOLUME_FAMILIES,
)
"""Every family, in the order the exporter publishes them."""

PER_VOLUME_FAMILIES = tuple(f for f in FAMILIES if f.labels == PER_VOLUME)


def limit_family(limit: Limit) -> MetricFamily:
    """The configured-limit gauge: bytes or ratio, whichever limit is configured."""
    return LIMIT_BYTES if isinstance(limit, MinAvailableBytes) else LIMIT_RATIO


def policy_families(gauges: tuple[str, ...]) -> tuple[MetricFamily, ...]:
    """The per-volume families of a policy with `gauges` (its `gauges`), then the volume's
    factor; none for a policy without gauges."""
    if not gauges:
        return ()
    by_short = {f.short: f for f in POLICY_VOLUME_FAMILIES}
    return (*(by_short[short] for short in gauges), LOG_DIR_THROTTLE_FACTOR)


def published(limit: Limit, gauges: tuple[str, ...] = ()) -> tuple[MetricFamily, ...]:
    """The families an exporter with `limit` and a policy with `gauges` publishes, in order."""
    unused = LIMIT_RATIO if limit_family(limit) is LIMIT_BYTES else LIMIT_BYTES
    own = policy_families(gauges)
    return tuple(
        f for f in FAMILIES if f is not unused and (f not in POLICY_VOLUME_FAMILIES or f in own)
    )


def backfilled(limit: Limit, gauges: tuple[str, ...] = ()) -> tuple[MetricFamily, ...]:
    """The families the backfill rebuilds from the archive: all but the live-only timings."""
    return tuple(f for f in published(limit, gauges) if not f.live_only)
