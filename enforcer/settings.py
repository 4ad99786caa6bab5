"""The enforcer's own settings (`kvq.enforcer.*`), typed and validated with the shared config."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import ClassVar

from enforcer.observed_rates import (
    BASE,
    DEFAULT_LOOKBACK,
    DEFAULT_QUERY,
    DEFAULT_STEP_WINDOW,
    LONGEST_LOOKBACK,
    REFERENCES,
)
from enforcer.quota_plan import BURST_RATIO_MOST, KAFKA_QUOTA_WINDOW_SECONDS, KNOWN_KEYS
from enforcer.request_sizes import DEFAULT_THROTTLE_QUERY
from kvq.kafka.client_settings import problems
from kvq.settings import values
from kvq.settings.app_settings import AppSettings, setting
from kvq.settings.durations import format_duration

LISTEN = "kvq.enforcer.listen"
OTHER_PATHS = ("/webhook", "/status", "/ready", "/healthz")
"""What the server at LISTEN serves besides the metrics (whose path `--web.telemetry-path` sets,
and must not be one of these). Declared with the settings, not the server, so that `--help`
and `--check-config` need not import the server."""
JOURNAL = "kvq.enforcer.journal"
STATE_STORE = "kvq.enforcer.state.store"
LOCAL, KAFKA = "local", "kafka"
STATE_STORES = (LOCAL, KAFKA)
TOKEN_FILE = "kvq.enforcer.auth.bearer.token.file"
BASIC_FILE = "kvq.enforcer.auth.basic.file"
PROMETHEUS_URL = "kvq.enforcer.prometheus.url"
DRY_RUN = "kvq.enforcer.dry.run"
QUOTA_KEYS = "kvq.enforcer.quota.keys"
STALE_WINDOW = "kvq.enforcer.stale.window"
THROTTLE_REFERENCE = "kvq.enforcer.throttle.reference"
OBSERVED_RATE_LOOKBACK = "kvq.enforcer.throttle.observed.rate.lookback"
OBSERVED_RATE_STEP_WINDOW = "kvq.enforcer.throttle.observed.rate.step.window"
OBSERVED_RATE_BURST_RATIO = "kvq.enforcer.throttle.observed.rate.burst.ratio"
LONGEST_THROTTLE = "kvq.enforcer.throttle.longest.throttle.time"
REQUEST_BYTES = "kvq.enforcer.throttle.request.bytes"
REQUEST_THROTTLE = "kvq.enforcer.throttle.request.throttle.time"
REQUEST_SHARE = "kvq.enforcer.throttle.request.share"
REPEAT_INTERVAL = timedelta(minutes=5)
"""The enforcer route's repeat_interval in rules/alertmanager.example.yml."""


BURST_RATIO = values.number_between(
    1.0, BURST_RATIO_MOST, "beyond it a reference says little of the sustained rate"
)
"""What OBSERVED_RATE_BURST_RATIO accepts (also `make demo SCENARIO=slowdown --burst-ratio`)."""


@values.parser("list", f"comma-separated client quota keys of {', '.join(KNOWN_KEYS)}")
def quota_keys(text: str) -> tuple[str, ...]:
    """The client quota keys the factor scales; producer_byte_rate always is."""
    keys = values.names(text)
    unknown = [key for key in keys if key not in KNOWN_KEYS]
    if unknown:
        raise values.NotAccepted(f"unknown quota key(s) {', '.join(unknown)}")
    return keys


@values.parser(
    "duration",
    f"above PT0S and below {format_duration(REPEAT_INTERVAL)} (the enforcer route's "
    "repeat_interval: an alert Alertmanager resumes throttles only with the first repeat after "
    "the window)",
)
def stale_window(text: str) -> timedelta:
    """How long after a resolution a firing of the same episode is a late retry (ignored); a
    resumed alert's repeat must arrive after it, so it is kept below the route's repeat_interval."""
    value = values.positive_duration(text)
    if value >= REPEAT_INTERVAL:
        raise values.NotAccepted
    return value


@values.parser(
    "duration",
    "whole seconds from PT0S (off: the rate when the episode starts, no carry-over) to "
    f"{format_duration(LONGEST_LOOKBACK)}",
)
def observed_rate_lookback(text: str) -> timedelta:
    """PT0S, or whole seconds up to LONGEST_LOOKBACK (a fraction of a second means nothing
    against sensors scraped seconds apart)."""
    value = values.duration(text)
    if value > LONGEST_LOOKBACK or value % timedelta(seconds=1):
        raise values.NotAccepted
    return value


@dataclass(frozen=True)
class EnforcerSettings(AppSettings):
    NAMESPACE: ClassVar[str] = "enforcer"

    listen: tuple[str, int] = setting(
        LISTEN,
        values.listen,
        values.default_listen(9899),
        "The enforcer's HTTP address (the webhook, /metrics, health). The default host is "
        f"${values.LISTEN_HOST_ENV} where set (the container image sets 0.0.0.0), else 127.0.0.1.",
    )
    journal: str = setting(
        JOURNAL,
        values.path,
        "kvq-enforcer-journal.sqlite3",
        "The SQLite journal of the original quotas and the throttles in progress (a relative "
        "path is in the working directory); not on a network file system, where SQLite's WAL "
        "does not work.",
    )
    state_store: str = setting(
        STATE_STORE,
        values.one_of(STATE_STORES),
        LOCAL,
        "Where the enforcer's state (the original quotas, throttles in progress, firing alerts) "
        "lives. local: in the SQLite file kvq.enforcer.journal, for one replica on a volume of "
        "its own. kafka: in a compacted topic of each cluster (kvq.enforcer.state.topic), "
        "written in transactions that fence any other replica; the SQLite file is a working "
        "copy. Run two or more replicas: one acts, elected through a consumer group; the "
        "others hand the webhooks they take to it through the topic.",
    )
    state_topic: str = setting(
        "kvq.enforcer.state.topic",
        values.text,
        "kvq-enforcer-state",
        "With kvq.enforcer.state.store=kafka: the topic holding the cluster's state (created "
        "compacted, one partition, on up to three brokers if missing).",
    )
    state_group: str = setting(
        "kvq.enforcer.state.group",
        values.text,
        "kvq-enforcer",
        "With kvq.enforcer.state.store=kafka: the consumer group electing the replica that "
        "acts (on the first cluster's state topic), and the prefix of each cluster's "
        "transactional id (<group>.<kvq.cluster.name>). Installations sharing a Kafka cluster "
        "need different groups.",
    )
    token_file: str | None = setting(
        TOKEN_FILE,
        values.path,
        None,
        "The file holding the one bearer token Alertmanager sends. With neither credentials "
        "file the enforcer refuses to start, unless --insecure-no-auth.",
    )
    basic_file: str | None = setting(
        BASIC_FILE,
        values.path,
        None,
        "The file of user:password lines (# comments allowed) for basic authentication.",
    )
    alert_name: str = setting(
        "kvq.enforcer.alert.name",
        values.text,
        "KafkaVolumeQuotaThrottle",
        "The alert that throttles: its annotation throttle_factor is the factor.",
    )
    heartbeat_alert_name: str = setting(
        "kvq.enforcer.heartbeat.alert.name",
        values.text,
        "KafkaVolumeQuotaHeartbeat",
        "The alert that always fires while the alert path works for a cluster (the fail-safe "
        "acts when it stops coming).",
    )
    failsafe_after: timedelta = setting(
        "kvq.enforcer.failsafe.after",
        values.duration_off_or_between(
            timedelta(seconds=5), timedelta(hours=1), "no fail-safe: only alerts throttle"
        ),
        "PT30S",
        "With no heartbeat alert of a cluster for this long, the enforcer reads its throttle "
        "factor itself (from Prometheus, else the exporters) and acts on it until heartbeats "
        "come again.",
    )
    failsafe_interval: timedelta = setting(
        "kvq.enforcer.failsafe.interval",
        values.duration_between(timedelta(seconds=1), timedelta(minutes=5), "a poll's pace"),
        "PT5S",
        "How often the fail-safe reads the throttle factor while it is active.",
    )
    failsafe_exporter_urls: tuple[str, ...] = setting(
        "kvq.enforcer.failsafe.exporter.urls",
        values.http_urls,
        "",
        "The cluster's exporters' /metrics URLs the fail-safe reads the throttle factor from "
        "when Prometheus does not answer (the lowest factor any of them publishes).",
    )
    quota_keys: tuple[str, ...] = setting(
        QUOTA_KEYS,
        quota_keys,
        "producer_byte_rate",
        "The client quota keys the factor scales; producer_byte_rate always is.",
    )
    prometheus_url: str | None = setting(
        PROMETHEUS_URL,
        values.http_url,
        None,
        "Confirm a lower factor with this Prometheus before applying it (and, with "
        "observed-rate, read the rates there).",
    )
    dry_run: bool = setting(
        DRY_RUN,
        values.boolean,
        "false",
        "Validate every plan with Kafka (validate_only) and log it; change nothing.",
    )
    alert_expiry: timedelta = setting(
        "kvq.enforcer.alert.expiry",
        values.positive_duration,
        "PT12H",
        "Forget a firing throttle alert Alertmanager has not re-sent for this long (keep it well "
        "above the route's repeat_interval).",
    )
    resolution_check_after: timedelta = setting(
        "kvq.enforcer.resolution.check.after",
        values.duration_off_or_between(
            timedelta(seconds=5),
            timedelta(hours=1),
            "never: a resolution that never comes waits for kvq.enforcer.alert.expiry",
        ),
        "PT30S",
        "A cluster whose firing alerts Alertmanager has not re-sent for this long has its factor "
        "read where the fail-safe reads it (Prometheus, else the exporters): at 1 the resolution "
        "was lost (an Alertmanager replaced with its storage does not send one) and the quotas "
        "are restored. Checked again this often while the answer is below 1 or none.",
    )
    restore_check_interval: timedelta = setting(
        "kvq.enforcer.restore.check.interval",
        values.duration_off_or_between(
            timedelta(milliseconds=500),
            timedelta(minutes=1),
            "off: the quotas are restored when the alert's resolution comes",
        ),
        "PT1S",
        "While a cluster holds firing throttle alerts, its factor is read this often where the "
        "fail-safe reads it (Prometheus, else the exporters): at 1 the quotas are restored at "
        "once, a second or two before the alert's resolution comes (the rule's keep_firing_for "
        "and Alertmanager's group_interval), and throttled again if a read before it says "
        "below 1 or nothing. A read without an answer waits "
        "kvq.enforcer.resolution.check.after for the next.",
    )
    stale_window: timedelta = setting(
        STALE_WINDOW,
        stale_window,
        "PT2M",
        "A firing alert of an episode already resolved is ignored (a late retry) only if it "
        "arrives this soon after the resolution; later it throttles (Alertmanager resumed it).",
    )
    alter_settle: timedelta = setting(
        "kvq.enforcer.alter.settle",
        values.positive_duration,
        "PT75S",
        "How long an AlterClientQuotas that got no answer may still be applied by Kafka; "
        "applies and restores are verified again after it.",
    )
    byte_rate_floor: int = setting(
        "kvq.enforcer.throttle.byte.rate.floor",
        values.positive_long,
        "8192",
        "The lowest producer/consumer byte rate a throttle sets (bytes/s) for a quota entity "
        "kvq has not seen writing (with observed-rate, the others get their own minimum: "
        f"{LONGEST_THROTTLE}, {REQUEST_BYTES}): Kafka does not throttle a client whose rate is "
        "over ~195,000 x its quota (the throttle time overflows an int).",
    )
    longest_throttle: timedelta = setting(
        LONGEST_THROTTLE,
        values.duration_between(
            timedelta(seconds=1),
            timedelta(hours=1),
            "longer would let a burst of a few hundred times the observed rate wrap Kafka's int "
            "throttle time",
        ),
        "PT1M",
        "observed-rate: each quota entity seen writing is throttled no lower than the rate at "
        "which Kafka's throttle time for what it was writing is this long: its reference x "
        "W / (W + this), W the brokers' quota window (quota.window.num x "
        "quota.window.size.seconds, read from them; the longest if they differ; "
        f"{KAFKA_QUOTA_WINDOW_SECONDS:.0f} s by default: 15.5 % with PT1M, 4.8 % with 3 s): "
        "factor 0 holds the cluster to about that share of its rate, and mutes no producer for "
        "longer.",
    )
    request_bytes: int = setting(
        REQUEST_BYTES,
        values.positive_long,
        "32768",
        "observed-rate: the bytes a throttled producer sends to one broker in one produce "
        "request: what it buffered while it waited, up to its buffer or request size "
        "(librdkafka: queue.buffering.max.kbytes, message.max.bytes, 1 MB by default; Java: "
        "buffer.memory, batch.size per partition, 16 KiB). At factor f no quota entity seen "
        f"writing is throttled below f x 2 x this / {REQUEST_THROTTLE}, the quota at which "
        "Kafka answers no such request with a longer throttle time: an entity writing less "
        "is slowed last, and still slowed by every lower factor.",
    )
    request_throttle: timedelta = setting(
        REQUEST_THROTTLE,
        values.duration_between(
            timedelta(seconds=1),
            timedelta(minutes=10),
            "a producer waits out its last throttle time after the restore",
        ),
        "PT8S",
        f"observed-rate: the longest throttle time Kafka may hand one request of {REQUEST_BYTES} "
        "at the request minimum (8,192 B/s with 32 KiB and PT8S; most get half), this / f at "
        "factor f: how long a producer held there goes without an acknowledgement, and the "
        "most it still waits after the restore.",
    )
    request_share: float = setting(
        REQUEST_SHARE,
        values.factor,
        "0.1",
        "observed-rate: a quota entity Kafka answers with throttle times averaging over half "
        f"{REQUEST_THROTTLE} (its requests are large for its quota: a Java producer's 16 KiB "
        "batches at 1.5 kB/s) is raised towards 2 x its request size (estimated from them, at "
        f"most {REQUEST_BYTES}) / {REQUEST_THROTTLE}, never above the rate it was seen writing "
        "(a user the default user's quota holds, alone: by a user=U quota of its own until the "
        "restore); the raises together add at most this share of what the throttled entities "
        "are allowed in all (cut in proportion beyond it), which the factor makes up for. "
        "0: none.",
    )
    observed_throttle_query: str = setting(
        "kvq.enforcer.throttle.observed.throttle.query",
        values.text,
        DEFAULT_THROTTLE_QUERY,
        "PromQL giving, per quota entity (labels user, clientId), its average produce throttle "
        "time in ms on the broker that throttles it most: Kafka's quota sensors as the JMX "
        f"exporter rules in deploy/jmx-exporter/ name them; asked during an episode for "
        f"{REQUEST_SHARE}.",
    )
    throttle_reference: str = setting(
        THROTTLE_REFERENCE,
        values.one_of(REFERENCES),
        BASE,
        "What a factor scales: base (each quota's original, or the configured base) or "
        "observed-rate (the lower of that and the rate each quota entity was producing when the "
        "episode started, from Prometheus; needs kvq.enforcer.prometheus.url).",
    )
    observed_rate_query: str = setting(
        "kvq.enforcer.throttle.observed.rate.query",
        values.text,
        DEFAULT_QUERY,
        "PromQL giving, per quota entity (labels user, clientId), its produce bytes/s on its "
        "busiest broker now: Kafka's quota sensors as the JMX exporter rules in "
        "deploy/jmx-exporter/ name them. An instant query: the enforcer wraps it for the "
        "lookback.",
    )
    observed_rate_lookback: timedelta = setting(
        OBSERVED_RATE_LOOKBACK,
        observed_rate_lookback,
        format_duration(DEFAULT_LOOKBACK),
        "observed-rate: each reference is the highest rate of the query over this long before "
        "the episode starts (Kafka's rate covers ~10 s: just after a throttle it is still the "
        "throttled rate), and a previous episode that ended less than this ago passes its "
        "references on as a lower bound; PT0S: the rate at the start only.",
    )
    observed_rate_step_window: timedelta = setting(
        OBSERVED_RATE_STEP_WINDOW,
        values.duration_off_or_between(
            timedelta(seconds=1), LONGEST_LOOKBACK, "off: the highest rate up to the start"
        ),
        format_duration(DEFAULT_STEP_WINDOW),
        "observed-rate, with a lookback: a rate that rose above all the lookback saw within "
        "this long before the episode starts is taken for a load step (the step fills the disk), "
        "and the reference is the highest rate over the lookback ending this long before, if the "
        "entity was seen then. Cost: an entity whose load rose for good within it is slowed more "
        "than the factor says.",
    )
    observed_rate_burst_ratio: float = setting(
        OBSERVED_RATE_BURST_RATIO,
        BURST_RATIO,
        "1",
        "observed-rate: how far each reference (the highest rate Kafka's sensor showed) sits "
        "above what its entity writes sustained (with a 3 s quota window: 1.26-1.50 on "
        "bench/slowdown). A factor f sets reference x f x (1/this + (1 - 1/this) x f^3): low "
        "factors scale the sustained rate, as graceful slowdown plans them, and near 1 the quota "
        "still lets the bursts through; 1: reference x f. 1.35 kept 40 principals' Java "
        "producers within 10 s of an acknowledgement, and cost six fast producers share "
        "(docs/enforcer.md).",
    )
    reconcile_interval: timedelta = setting(
        "kvq.enforcer.reconcile.interval",
        values.positive_duration,
        "PT30S",
        "How often unfinished throttles, restores and failed applies are retried.",
    )
    throttle_check_interval: timedelta = setting(
        "kvq.enforcer.throttle.check.interval",
        values.duration_off_or_between(
            timedelta(milliseconds=100), timedelta(hours=1), "only the reconcile round looks"
        ),
        "PT0.25S",
        "While a throttle is in force, how often Kafka is asked whether it still holds it "
        "(one DescribeClientQuotas): a value a reconciler such as Strimzi's User Operator put "
        "back, or an entity that appeared, is throttled again at once (and Kafka asked again "
        "right after). Spaced out further when a look is slow, to take at most a tenth of the "
        "time.",
    )

    @classmethod
    def kafka_problems(cls, admin_properties: Mapping[str, str]) -> list[str]:
        """kafka-python (client quotas) must accept the `kafka.admin.*` settings."""
        return problems(admin_properties, librdkafka=False)
