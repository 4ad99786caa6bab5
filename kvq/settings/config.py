"""The configuration every app shares: the Strimzi proposal's properties and `kvq.cluster.name`.

A Java properties file with the Strimzi proposal's keys verbatim (prefix
`client.quota.callback.static.`), so a Strimzi user can paste their broker lines unchanged, plus the
project's own `kvq.*` settings. One file may serve every app: each app declares and checks its
own `kvq.<app>.*` namespace (see app_settings.py) and leaves the other apps' namespaces alone.
Command-line flags override properties; values may name environment variables as `${env:NAME}`
so secrets stay out of the file. Every error names the property, the bad value and what is
allowed; all errors are reported at once. Secret values and values taken from the environment
are never printed.

Every property is declared once, as a `Setting` (PROPOSAL_SETTINGS and SHARED_KVQ_SETTINGS here,
each app's own in its AppSettings), and read through its declaration: the configuration
reference (docs/configuration-reference.md) is written from the same declarations.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from kvq.contract import metric_families
from kvq.contract.cluster_identity import ClusterIdentity
from kvq.model.graceful_slowdown import (
    PEAK_MEMORY_SECONDS_DEFAULT,
    RESPONSE_SECONDS_DEFAULT,
    GracefulSlowdown,
)
from kvq.model.limits import (
    MIN_AVAILABLE_BYTES,
    MIN_AVAILABLE_RATIO,
    PREFIX,
    Limit,
    MinAvailableBytes,
    MinAvailableRatio,
)
from kvq.model.stop_on_violation import StopOnViolation
from kvq.model.throttle_factor_policy import ThrottleFactorPolicy
from kvq.settings import values
from kvq.settings.durations import format_duration
from kvq.settings.properties import PropertiesError, read_properties
from kvq.settings.redaction import MASK, mask_url_credentials, remember_secrets, url_secrets
from kvq.settings.setting import Setting

ADMIN_PREFIX = PREFIX + "kafka.admin."
BOOTSTRAP_SERVERS = ADMIN_PREFIX + "bootstrap.servers"
CHECK_INTERVAL = PREFIX + "storage.check.interval"
DEFAULT_CHECK_INTERVAL = "PT5S"
PLUGIN_CHECK_INTERVAL = PREFIX + "storage.check-interval"
FALLBACK = PREFIX + "throttle.factor.fallback"
VALIDITY = PREFIX + "throttle.factor.validity.duration"
PRODUCE = PREFIX + "produce"
FETCH = PREFIX + "fetch"
REQUEST = PREFIX + "request"
EXCLUDED = PREFIX + "excluded.principal.name.list"
REMOVED_BY_PROPOSAL = (PREFIX + "storage.hard", PREFIX + "storage.soft")
_AGGREGATE_LIMITS = (
    f"the proposal removed aggregate soft/hard limits; use {MIN_AVAILABLE_BYTES} or "
    f"{MIN_AVAILABLE_RATIO} (early warning is an alert rule)"
)
IGNORED_PLUGIN_KEYS = {
    **dict.fromkeys(REMOVED_BY_PROPOSAL, _AGGREGATE_LIMITS),
    **{
        f"{PREFIX}storage.{level}.free-{unit}": _AGGREGATE_LIMITS
        for level in ("hard", "soft")
        for unit in ("bytes", "percent")
    },
    PREFIX + "storage.percentages": _AGGREGATE_LIMITS,
    PREFIX + "storage.volume.source": "every log dir is read from the brokers (DescribeLogDirs)",
    PREFIX + "kafka.clientIdPrefix": (
        "kvq names its own Kafka clients; set kafka.admin.client.id to choose the client id"
    ),
}
"""Keys the Strimzi plugin has (or had: storage.hard/soft and their free-* variants, the volume
source) that we deliberately do not use: pasted broker lines carry them, so they are warnings that
say why, not errors. Every other unknown `client.quota.callback.static.*` key is an error."""
CLUSTER_NAME = "kvq.cluster.name"
CLUSTER_NAME_DEFAULT = "kafka"
CLUSTER_LABEL = "kvq.cluster.label"
CLUSTER_LABEL_DEFAULT = metric_families.CLUSTER_LABEL
"""`cluster`, the name the metric table is written with: the label's one default, which every app
and test tool takes from here (`Config.cluster`)."""
VIOLATION_HOLD = "kvq.departed.broker.violation.hold"
VIOLATION_HOLD_DEFAULT = "PT1H"
THROTTLE_POLICY = "kvq.throttle.policy"
STOP_ON_VIOLATION = "stop-on-violation"
GRACEFUL_SLOWDOWN = "graceful-slowdown"
POLICIES = (STOP_ON_VIOLATION, GRACEFUL_SLOWDOWN)
SLOWDOWN_HORIZON = "kvq.throttle.slowdown.horizon"
SLOWDOWN_HORIZON_DEFAULT = "PT10M"
SLOWDOWN_RESPONSE = "kvq.throttle.slowdown.response.time"
SLOWDOWN_RESPONSE_DEFAULT = format_duration(timedelta(seconds=RESPONSE_SECONDS_DEFAULT))
SLOWDOWN_PARTITION_SIZES = "kvq.throttle.slowdown.partition.sizes"
SLOWDOWN_PARTITION_SIZES_DEFAULT = "false"
SLOWDOWN_RETENTION_FORECAST = "kvq.throttle.slowdown.retention.forecast"
SLOWDOWN_RETENTION_FORECAST_DEFAULT = "false"
SLOWDOWN_PEAK_MEMORY = "kvq.throttle.slowdown.peak.memory"
SLOWDOWN_PEAK_MEMORY_DEFAULT = format_duration(timedelta(seconds=PEAK_MEMORY_SECONDS_DEFAULT))
APP_NAMESPACES = ("exporter", "enforcer", "backfill")
"""The apps that may share one properties file, each owning `kvq.<app>.*`."""


@values.parser(
    "label name",
    f"{values.label_name.accepts}, and none the series or alerts already carry "
    f"({', '.join(sorted(metric_families.TAKEN_LABELS))})",
)
def cluster_label_name(text: str) -> str:
    """kvq.cluster.label: a label name that none of our series, nor Prometheus, gives another
    meaning."""
    name = values.label_name(text)
    if name in metric_families.TAKEN_LABELS:
        raise values.NotAccepted(f"{name} is a label the series or alerts already carry")
    return name


PROPOSAL_SETTINGS = (
    Setting(
        BOOTSTRAP_SERVERS,
        values.text,
        None,
        "Required: the brokers to ask, host:port comma-separated. Every other "
        f"{ADMIN_PREFIX}* property (security.protocol, sasl.*, ssl.*, request.timeout.ms, ...) "
        "goes to the Kafka clients without the prefix.",
    ),
    Setting(
        MIN_AVAILABLE_BYTES,
        values.positive_long,
        None,
        "Throttle when a volume (one log dir of one broker) has this many bytes available or "
        "fewer. Exactly one of the two limits must be set.",
    ),
    Setting(
        MIN_AVAILABLE_RATIO,
        values.open_ratio,
        None,
        "Throttle when a volume has this share of its size available or less (0.05: 5 %). "
        "Exactly one of the two limits must be set.",
    ),
    Setting(
        CHECK_INTERVAL,
        values.duration,
        DEFAULT_CHECK_INTERVAL,
        "How often the exporter reads every broker's log dirs; PT0S disables the check (factor "
        "1.0, never a fallback, nothing throttles). The proposal's default is PT1M, ours PT5S: a "
        "poll is one small request per broker, and every second of delay lets a disk fill.",
    ),
    Setting(
        PLUGIN_CHECK_INTERVAL,
        values.seconds,
        None,
        f"The key the Strimzi plugin ships, in whole seconds: an alias of {CHECK_INTERVAL} "
        "(setting both is an error).",
    ),
    Setting(
        VALIDITY,
        values.positive_duration,
        "PT5M",
        "How long a factor holds after the observation that gave it while later ones fail; "
        "then the fallback factor applies, counted once, until an observation succeeds. Keep "
        "it several check intervals long (a shorter one is warned about).",
    ),
    Setting(
        FALLBACK,
        values.factor,
        "1.0",
        "The factor once the last one has expired: 1.0 lets producers write while kvq cannot "
        "see the brokers, 0.0 throttles them.",
    ),
    Setting(
        PRODUCE,
        values.positive_long,
        None,
        "The default user's unthrottled producer_byte_rate (bytes/s) where Kafka holds none: "
        "what the enforcer scales for it. Unset: unlimited (only factor 0 limits it, to the "
        "floor).",
    ),
    Setting(
        FETCH,
        values.positive_long,
        None,
        "As produce, for consumer_byte_rate (bytes/s), when kvq.enforcer.quota.keys has it.",
    ),
    Setting(
        REQUEST,
        values.positive_number,
        None,
        "As produce, for request_percentage (%), when kvq.enforcer.quota.keys has it.",
    ),
    Setting(
        EXCLUDED,
        values.principals,
        None,
        "Principals never throttled: while the default user is throttled the enforcer keeps "
        "their original limits with overrides of their own.",
    ),
)
"""The Strimzi proposal's properties (prefix `client.quota.callback.static.`), read by every
app. Their names are the proposal's verbatim, so a Strimzi user can paste their broker lines."""

SHARED_KVQ_SETTINGS = (
    Setting(
        CLUSTER_NAME,
        values.label_value,
        CLUSTER_NAME_DEFAULT,
        "The cluster's name: the value of the cluster label on every series and alert. The "
        "enforcer acts on the alerts that carry it, so every cluster needs its own.",
    ),
    Setting(
        CLUSTER_LABEL,
        cluster_label_name,
        CLUSTER_LABEL_DEFAULT,
        f"The name of the label that carries {CLUSTER_NAME} on every series, alert and matcher. "
        "Change it where `cluster` already means something else: in Thanos or Mimir it is "
        "often the Kubernetes cluster's external label, and a label already on a series wins, "
        "so queries by Kubernetes cluster would miss ours. Exporter, enforcer, backfill, rules "
        "and dashboards must use the same name (the Helm chart's clusterLabel sets them all).",
    ),
    Setting(
        VIOLATION_HOLD,
        values.duration,
        VIOLATION_HOLD_DEFAULT,
        "How long a volume that violated its limit when last seen keeps violating while "
        "unseen (its broker away, or its log dir offline: an error code, no sizes), counted "
        "from when it was last seen with sizes: a full broker that restarts does not release "
        "the throttle. PT0S: only as long as the validity duration, as the plugin.",
    ),
    Setting(
        THROTTLE_POLICY,
        values.one_of(POLICIES),
        STOP_ON_VIOLATION,
        f"Which policy turns the volumes into the factor: {STOP_ON_VIOLATION} (the proposal's: "
        f"0 while any volume violates its limit, else 1) or {GRACEFUL_SLOWDOWN} (production "
        f"slows down as a volume closes on its limit, see {SLOWDOWN_HORIZON}).",
    ),
    Setting(
        SLOWDOWN_HORIZON,
        values.positive_duration,
        SLOWDOWN_HORIZON_DEFAULT,
        f"{GRACEFUL_SLOWDOWN} only: no volume may be predicted to reach its limit sooner than "
        "this (the time an operator needs to react); production slows down as much as that "
        "takes.",
    ),
    Setting(
        SLOWDOWN_RESPONSE,
        values.duration_between(
            timedelta(seconds=1), timedelta(hours=1), "no hop of the loop is faster than a second"
        ),
        SLOWDOWN_RESPONSE_DEFAULT,
        f"{GRACEFUL_SLOWDOWN} only: the loop's response time, from a change of a volume's "
        "fill rate to Kafka's quotas following it: two polls (the fill rate is a median of "
        "three intervals), the scrape, the rule's evaluation and the alert to the enforcer's "
        "verified write (kafka_volume_quota_enforcer_alert_to_enforce_seconds). The policy "
        "keeps this much headroom at the rate it lets through and paces its steps to it: with "
        "retention keeping R seconds of data a steady load settles at R / (R + this) of the "
        "rate retention frees. For this and 5 s more after space is freed on any volume, "
        "a sudden growth is the backlog the lifted quotas let through, not a load step. The "
        "default is twice the recommended loop's 14 s; a slower loop (30 s scrapes and rule "
        "evaluation, a longer group_interval) needs its own, measured (docs/policies.md).",
    ),
    Setting(
        SLOWDOWN_PARTITION_SIZES,
        values.boolean,
        SLOWDOWN_PARTITION_SIZES_DEFAULT,
        f"{GRACEFUL_SLOWDOWN} only: whether the exporter asks DescribeLogDirs for every "
        "partition replica's size as well as the log dirs' totals, at each poll and check, "
        "to archive and judge each log dir's growth (grown_bytes). With it the policy holds "
        "the rate written at what retention frees and rides closer to the limit; without it "
        "(false), each answer carries the totals only and the policy reads the net fill rate. "
        "The answers grow with the replicas per broker. Off by default: on real Kafka it "
        "rides at about 85 % of the bound (75-79 % on the totals), but it counts on producers "
        "that buffer under a second of their writes: 40 principals buffering 8 s each went "
        "past the limit, and in the model a 10x load step after the first slowdown crosses it "
        "in half the runs, where the totals hold it; and on brokers that check retention "
        "every few seconds (log.retention.check.interval.ms; Kafka's default is 5 minutes, "
        "the model crosses from 10 s) (docs/policies.md).",
    ),
    Setting(
        SLOWDOWN_RETENTION_FORECAST,
        values.boolean,
        SLOWDOWN_RETENTION_FORECAST_DEFAULT,
        f"{GRACEFUL_SLOWDOWN} with {SLOWDOWN_PARTITION_SIZES} only: whether the exporter asks "
        "Kafka, at each poll, what retention frees in each log dir by each 5 s of the next two "
        "minutes (from the topics' retention and segment configs and the offsets by "
        "timestamp of the partitions the log dir holds: Metadata, DescribeConfigs and "
        "ListOffsets, which need Describe and DescribeConfigs on the topics), to archive it "
        "(retention_freed_bytes) and spend the headroom evenly until retention frees what is "
        "written now, instead of waiting to see what it frees. Off by default: on real Kafka "
        "(the slowdown bench) it stays above the limit, but does not yet ride closer to it "
        "than the partitions' sizes alone (docs/policies.md). A topic whose configs or "
        "offsets cannot be read frees nothing in the forecast.",
    ),
    Setting(
        SLOWDOWN_PEAK_MEMORY,
        values.duration_between(
            timedelta(minutes=1),
            timedelta(days=30),
            "shorter would forget the load between two polls' swings; a month is as good as never",
        ),
        SLOWDOWN_PEAK_MEMORY_DEFAULT,
        f"{GRACEFUL_SLOWDOWN} with {SLOWDOWN_PARTITION_SIZES} only: how long a log dir's "
        "peak write rate (the fastest its partitions grew, which sets how far the factor "
        "goes down) remembers a rate while the log dir is calm: its headroom lasting "
        f"{GracefulSlowdown.CALM_HORIZONS:g} horizons at the rate its partitions grow now. "
        "A rate is forgotten after between this and twice this of calm, so a replica copied "
        "onto the disk or last week's load stops slowing producers; time nearer the limit "
        "does not count, so no throttle forgets the load it holds back.",
    ),
)
"""The `kvq.` settings every app reads (the exporter decides with them, the backfill replays)."""
SHARED_KVQ_KEYS = tuple(setting.key for setting in SHARED_KVQ_SETTINGS)
SHARED_SETTINGS = {setting.key: setting for setting in (*PROPOSAL_SETTINGS, *SHARED_KVQ_SETTINGS)}
"""Every shared property's declaration by key: what `_read_shared` reads."""
_STATIC_KEYS = {setting.key for setting in PROPOSAL_SETTINGS}
_SECRET = re.compile(
    r"(password|secret|jaas|token|credential|oauthbearer\.config|(^|\.)key(\.pem)?$)",
    re.IGNORECASE,
)
_ENV_REF = re.compile(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}")
DIRECTORY_REF = re.compile(r"\$\{directory:([^:}]+):([^:}/]+)\}")
"""`${directory:DIR:FILE}`: the content of the file FILE in the directory DIR, as Kafka's
DirectoryConfigProvider reads a mounted Secret's key. Only `kafka.admin.*` values may hold one; the
Kafka client settings read it each time they are built (kvq.kafka.client_settings), so a password
that Strimzi changes with a renewed certificate is read again with the certificate."""
JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')
"""One `name="value"` option of a JAAS line (`sasl.jaas.config`)."""


class ConfigError(ValueError):
    """One or more configuration errors, each naming the property, the value and what is allowed."""

    def __init__(self, errors: list[str], source: str = "") -> None:
        self.errors = list(errors)
        self.source = source
        where = f" in {source}" if source else ""
        super().__init__(f"{len(errors)} configuration error(s){where}:\n  " + "\n  ".join(errors))


@dataclass(frozen=True)
class Config:
    """The effective, validated configuration of one cluster, as every app reads it."""

    source: str
    raw: Mapping[str, str]
    """The properties as written (with `${env:...}` references), what is safe to show."""
    properties: Mapping[str, str]
    """The properties with `${env:...}` substituted, what the clients use."""
    cluster_name: str
    cluster_label: str
    """The label carrying `cluster_name` (kvq.cluster.label)."""
    bootstrap_servers: str
    admin_properties: Mapping[str, str]
    """`kafka.admin.*` without the prefix (bootstrap.servers, security.protocol, sasl.*, ...)."""
    check_interval: timedelta
    validity: timedelta
    fallback_factor: float
    violation_hold: timedelta
    limit: Limit
    produce: int | None
    fetch: int | None
    request: float | None
    excluded_principals: tuple[str, ...]
    warnings: tuple[str, ...]
    policy_name: str = STOP_ON_VIOLATION
    slowdown_horizon: timedelta = timedelta(minutes=10)
    slowdown_response: timedelta = timedelta(seconds=RESPONSE_SECONDS_DEFAULT)
    slowdown_partition_sizes: bool = False
    slowdown_retention_forecast: bool = False
    slowdown_peak_memory: timedelta = timedelta(seconds=PEAK_MEMORY_SECONDS_DEFAULT)

    @property
    def cluster(self) -> ClusterIdentity:
        """The cluster as every series, alert matcher and query names it: what the apps hand on,
        instead of the name and the label one by one."""
        return ClusterIdentity(self.cluster_name, self.cluster_label)

    @property
    def policy(self) -> ThrottleFactorPolicy:
        """The throttle factor policy of this configuration (`kvq.throttle.policy`): every app
        takes it from here."""
        if self.policy_name == GRACEFUL_SLOWDOWN:
            return GracefulSlowdown(
                self.limit,
                self.slowdown_horizon.total_seconds(),
                self.slowdown_response.total_seconds(),
                self.slowdown_peak_memory.total_seconds(),
            )
        return StopOnViolation(self.limit)

    @property
    def reads_partition_sizes(self) -> bool:
        """Whether the exporter asks for the partitions' sizes (`kvq.throttle.slowdown.partition
        .sizes`, graceful-slowdown only: the other policy reads the totals alone)."""
        return self.policy_name == GRACEFUL_SLOWDOWN and self.slowdown_partition_sizes

    @property
    def reads_retention_forecast(self) -> bool:
        """Whether the exporter asks Kafka what retention frees by the times ahead at each poll
        (`kvq.throttle.slowdown.retention.forecast`, with the partitions' sizes only)."""
        return self.reads_partition_sizes and self.slowdown_retention_forecast

    def effective(self, own: Sequence[Setting] = ()) -> list[tuple[str, str]]:
        """Every property in force (with the defaults of `own`), secrets masked, sorted by key."""
        shown = {key: shown_value(key, self.raw[key]) for key in self.properties}
        for key in (PLUGIN_CHECK_INTERVAL, *IGNORED_PLUGIN_KEYS):
            shown.pop(key, None)
        shown[CHECK_INTERVAL] = format_duration(self.check_interval)
        shown[VALIDITY] = format_duration(self.validity)
        shown[FALLBACK] = repr(self.fallback_factor)
        shown.setdefault(CLUSTER_NAME, CLUSTER_NAME_DEFAULT)
        shown[CLUSTER_LABEL] = self.cluster_label
        shown[VIOLATION_HOLD] = format_duration(self.violation_hold)
        for setting in own:
            if setting.key not in shown and setting.default is not None:
                shown[setting.key] = setting.default
        for key in (PRODUCE, FETCH, REQUEST):
            shown.setdefault(key, "unlimited")
        return sorted(shown.items())


def is_secret(key: str) -> bool:
    """Whether a property's value is a secret (password, key, token, JAAS line, ...)."""
    return bool(_SECRET.search(key))


def shown_value(key: str, raw_value: str) -> str:
    """What may be printed of a property: `raw_value` as written (never a substituted
    `${env:...}`), masked if the key is secret-bearing, URL credentials masked otherwise."""
    return MASK if is_secret(key) else mask_url_credentials(raw_value)


def secret_values(properties: Mapping[str, str]) -> list[str]:
    """Every secret in `properties`: the values of secret-bearing keys, the secret options of a
    JAAS line (its password), and the credentials of any URL."""
    secrets = []
    for key, value in properties.items():
        if is_secret(key):
            secrets.append(value)
            secrets += [option for name, option in JAAS_OPTION.findall(value) if is_secret(name)]
        secrets += url_secrets(value)
    return [secret for secret in secrets if secret]


def read_directory_references(
    properties: Mapping[str, str], prefix: str = ""
) -> tuple[dict[str, str], list[str], list[str]]:
    """`properties` with every `${directory:DIR:FILE}` replaced by that file's content, read now
    (as is, as Kafka's DirectoryConfigProvider reads it); the errors, naming the property
    (`prefix` + key) and the file; the files read. Secrets read are masked in every later log
    line."""
    errors: list[str] = []
    files: list[str] = []

    def substitute(key: str) -> Callable[[re.Match], str]:
        def read(match: re.Match) -> str:
            path = os.path.join(match.group(1), match.group(2))
            files.append(path)
            try:
                with open(path, encoding="utf-8") as file:
                    return file.read()
            except (OSError, UnicodeDecodeError) as exc:
                reason = getattr(exc, "strerror", None) or "not UTF-8 text"
                errors.append(f"{prefix}{key} refers to {path}, which cannot be read ({reason})")
                return ""

        return read

    out = {key: DIRECTORY_REF.sub(substitute(key), value) for key, value in properties.items()}
    if files:
        remember_secrets(secret_values(out))
    return out, errors, files


def read_with_overrides(path: str | Path, overrides: Mapping[str, str] | None) -> dict[str, str]:
    """The file's properties with `overrides` (from flags) applied; raises ConfigError.

    An override of one limit property replaces a limit of the other type from the file.
    """
    try:
        properties = read_properties(path)
    except PropertiesError as exc:
        raise ConfigError([str(exc)], str(path)) from None
    for key, value in (overrides or {}).items():
        if key in (MIN_AVAILABLE_BYTES, MIN_AVAILABLE_RATIO):
            properties.pop(MIN_AVAILABLE_BYTES, None)
            properties.pop(MIN_AVAILABLE_RATIO, None)
        properties[key] = value
    return properties


def load_config(
    path: str | Path,
    overrides: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Config:
    """Read, expand and validate the shared part of a properties file (apps: AppSettings.load)."""
    return build_config(read_with_overrides(path, overrides), str(path), environ)


def build_config(
    raw: Mapping[str, str], source: str = "<properties>", environ: Mapping[str, str] | None = None
) -> Config:
    """Validate the shared part of a mapping of properties; raises ConfigError listing all."""
    config, _ = read_config(raw, source, environ)
    return config


def read_config(
    raw: Mapping[str, str],
    source: str = "<properties>",
    environ: Mapping[str, str] | None = None,
    namespace: str | None = None,
    own: Sequence[Setting] = (),
    kafka_checks: Callable[[Mapping[str, str]], list[str]] | None = None,
) -> tuple[Config, dict[str, Any]]:
    """Validate the shared properties plus one app's `kvq.<namespace>.*` settings `own`.

    Returns the Config and the parsed values of `own` by key. `kafka_checks` adds the errors the
    app's Kafka clients would fail on with these `kafka.admin.*` properties (prefix removed).
    Raises ConfigError listing every problem.
    """
    reader = _Reader(raw, os.environ if environ is None else environ)
    remember_secrets(secret_values(reader.properties))  # masked in every log line from now on
    config = _read_shared(reader, source)
    own_values = {setting.key: reader.read(setting) for setting in own}
    _check_kvq_keys(reader, namespace, {s.key for s in own})
    if kafka_checks is not None:
        reader.errors.extend(kafka_checks(_admin_properties(reader.properties)))
    if reader.errors or config is None:  # None: the shared part had errors
        raise ConfigError(reader.errors, source)
    return config, own_values


class _Reader:
    """Expanded properties plus the errors and warnings found while parsing them."""

    def __init__(self, raw: Mapping[str, str], environ: Mapping[str, str]) -> None:
        self.raw = dict(raw)
        self.errors: list[str] = []
        self.warnings: list[str] = []
        self.properties = {key: self._expand(key, value, environ) for key, value in raw.items()}

    def _expand(self, key: str, value: str, environ: Mapping[str, str]) -> str:
        if DIRECTORY_REF.search(value) and not key.startswith(ADMIN_PREFIX):
            self.errors.append(
                f"{key}: ${{directory:...}} references are read for {ADMIN_PREFIX}* properties "
                "only; use ${env:NAME} here"
            )

        def substitute(match: re.Match) -> str:
            name = match.group(1)
            if name not in environ:
                self.errors.append(f"{key} refers to environment variable {name}, which is not set")
                return ""
            return environ[name]

        return _ENV_REF.sub(substitute, value)

    def read(self, setting: Setting) -> Any:
        """The parsed value of `setting` (or of its default); None and an error if it does not
        parse."""
        return self.get(setting.key, setting.parse, setting.default)

    def get(self, key: str, parse: Callable[[str], Any], default: str | None = None) -> Any:
        """The parsed value of `key` (or of `default`); None and an error if it does not parse."""
        text = self.properties.get(key, default)
        if text is None:
            return None
        try:
            return parse(text)
        except ValueError as exc:
            written = self.raw.get(key, text)
            hint = ""
            if " #" in written:
                hint = (
                    " (looks like a trailing # comment: a .properties file has no end-of-line "
                    "comments, put the comment on its own line)"
                )
            self.errors.append(f"{key}={shown_value(key, written)!s}: {exc}{hint}")
            return None


def _admin_properties(properties: Mapping[str, str]) -> dict[str, str]:
    """`kafka.admin.*` without the prefix."""
    return {k[len(ADMIN_PREFIX) :]: v for k, v in properties.items() if k.startswith(ADMIN_PREFIX)}


def _short_validity_warning(validity: timedelta, check_interval: timedelta) -> str:
    # A factor that expires before the next poll can replace it leaves the fallback in force
    # whenever a poll ends later than the one before: the throttle alert resolves and the
    # enforcer restores the quotas while the disk is still full.
    return (
        f"{VALIDITY} {format_duration(validity)} is not longer than the check interval "
        f"{format_duration(check_interval)}: a poll that ends late lets the fallback factor "
        f"apply in between; keep it several intervals long (default PT5M)"
    )


def _short_response_warning(response: timedelta, check_interval: timedelta) -> list[str]:
    # The fill rate, a median of three intervals, shows a change two polls after it: a response
    # time shorter than that paces steps and floors on readings the last step has not reached
    # yet, and the factor swings (tests/kvq/model/test_graceful_slowdown.py).
    if response >= 2 * check_interval:
        return []
    return [
        f"{SLOWDOWN_RESPONSE} {format_duration(response)} is shorter than two polls "
        f"({CHECK_INTERVAL} {format_duration(check_interval)}): the fill rate shows a change "
        "two polls after it, so graceful-slowdown's factor swings; set it to at least "
        f"{format_duration(2 * check_interval)} plus the scrape, rule and alert-to-enforce "
        "times"
    ]


def _bootstrap_servers(reader: _Reader) -> str:
    """The brokers to ask ("" and an error when missing: blank is "required", not "must be
    text")."""
    if reader.properties.get(BOOTSTRAP_SERVERS, "").strip():
        bootstrap: str = reader.read(SHARED_SETTINGS[BOOTSTRAP_SERVERS])
        if bootstrap:
            return bootstrap
    reader.errors.append(
        f"{BOOTSTRAP_SERVERS} is required: the brokers to ask, e.g. "
        f"{BOOTSTRAP_SERVERS}=kafka-0:9092,kafka-1:9092"
    )
    return ""


def _check_interval(reader: _Reader) -> Any:
    """The poll interval, under the plugin's key or ours (None and an error when both are set)."""
    properties = reader.properties
    if PLUGIN_CHECK_INTERVAL in properties and CHECK_INTERVAL in properties:
        reader.errors.append(
            f"{PLUGIN_CHECK_INTERVAL} and {CHECK_INTERVAL} are both set; keep only "
            f"{CHECK_INTERVAL} (ISO 8601, e.g. PT1M)"
        )
        return None
    key = PLUGIN_CHECK_INTERVAL if PLUGIN_CHECK_INTERVAL in properties else CHECK_INTERVAL
    return reader.read(SHARED_SETTINGS[key])


def _check_plugin_keys(reader: _Reader) -> None:
    """Strimzi plugin keys this tool ignores are warnings; unknown ones are errors."""
    for key in sorted(reader.properties):
        if key in IGNORED_PLUGIN_KEYS:
            reader.warnings.append(
                f"{key} is a Strimzi plugin key this tool ignores: {IGNORED_PLUGIN_KEYS[key]}"
            )
        elif (
            key.startswith(PREFIX) and key not in _STATIC_KEYS and not key.startswith(ADMIN_PREFIX)
        ):
            reader.errors.append(
                f"{key} is not a property of the quota plugin{did_you_mean(key, _STATIC_KEYS)} "
                f"(known: {', '.join(sorted(k.removeprefix(PREFIX) for k in _STATIC_KEYS))}, "
                "kafka.admin.*)"
            )


def _read_shared(reader: _Reader, source: str) -> Config | None:
    """The shared part of the configuration; None when it has errors (in `reader.errors`)."""
    properties = reader.properties
    errors = reader.errors
    warnings = reader.warnings

    def read(key: str) -> Any:
        return reader.read(SHARED_SETTINGS[key])

    bootstrap = _bootstrap_servers(reader)
    check_interval = _check_interval(reader)
    validity = read(VALIDITY)
    fallback = read(FALLBACK)
    violation_hold = read(VIOLATION_HOLD)
    limit = _limit(reader)
    produce = read(PRODUCE)
    fetch = read(FETCH)
    request = read(REQUEST)
    excluded = read(EXCLUDED) or ()
    cluster_name = read(CLUSTER_NAME)
    policy_name = read(THROTTLE_POLICY)
    horizon = read(SLOWDOWN_HORIZON)
    response = read(SLOWDOWN_RESPONSE)
    partition_sizes = read(SLOWDOWN_PARTITION_SIZES)
    retention_forecast = read(SLOWDOWN_RETENTION_FORECAST)
    peak_memory = read(SLOWDOWN_PEAK_MEMORY)
    cluster_label = read(CLUSTER_LABEL)

    if check_interval and validity and validity <= check_interval:
        warnings.append(_short_validity_warning(validity, check_interval))
    if policy_name == GRACEFUL_SLOWDOWN and check_interval and response:
        warnings += _short_response_warning(response, check_interval)

    _check_plugin_keys(reader)

    if errors or check_interval is None or limit is None:
        return None
    return Config(
        source=source,
        raw=reader.raw,
        properties=properties,
        cluster_name=cluster_name,
        cluster_label=cluster_label,
        bootstrap_servers=bootstrap,
        admin_properties=_admin_properties(properties),
        check_interval=check_interval,
        validity=validity,
        fallback_factor=fallback,
        violation_hold=violation_hold,
        limit=limit,
        produce=produce,
        fetch=fetch,
        request=request,
        excluded_principals=excluded,
        warnings=tuple(warnings),
        policy_name=policy_name,
        slowdown_horizon=horizon,
        slowdown_response=response,
        slowdown_partition_sizes=partition_sizes,
        slowdown_retention_forecast=retention_forecast,
        slowdown_peak_memory=peak_memory,
    )


def did_you_mean(key: str, known: Iterable[str]) -> str:
    """`; did you mean <closest>?` when a known key is close to `key` (a typo), else ""."""
    close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.8)
    return f"; did you mean {close[0]}?" if close else ""


def _check_kvq_keys(reader: _Reader, namespace: str | None, own: set[str]) -> None:
    """Unknown `kvq.` namespaces and typos in the app's own namespace are errors; the other apps'
    namespaces are theirs to check."""
    own_prefix = f"kvq.{namespace}." if namespace else None
    for key in sorted(reader.properties):
        if not key.startswith("kvq.") or key in SHARED_KVQ_KEYS or key in own:
            continue
        if own_prefix and key.startswith(own_prefix):
            known = ", ".join(sorted(own)) or "none"
            hint = did_you_mean(key, own)
            reader.errors.append(f"{key} is not a known setting{hint} (known: {known})")
        elif not any(key.startswith(f"kvq.{app}.") for app in APP_NAMESPACES):
            known = ", ".join([*SHARED_KVQ_KEYS, *(f"kvq.{app}.*" for app in APP_NAMESPACES)])
            hint = did_you_mean(key, SHARED_KVQ_KEYS)
            reader.errors.append(f"{key} is not a known setting{hint} (known: {known})")


def _limit(reader: _Reader) -> Limit | None:
    properties = reader.properties
    has_bytes = MIN_AVAILABLE_BYTES in properties
    has_ratio = MIN_AVAILABLE_RATIO in properties
    if has_bytes == has_ratio:
        which = "both are set" if has_bytes else "neither is set"
        reader.errors.append(
            f"exactly one limit must be configured, {MIN_AVAILABLE_BYTES} (bytes, > 0) or "
            f"{MIN_AVAILABLE_RATIO} (between 0.0 and 1.0); {which}"
        )
        return None
    if has_bytes:
        value = reader.read(SHARED_SETTINGS[MIN_AVAILABLE_BYTES])
        return None if value is None else MinAvailableBytes(value)
    value = reader.read(SHARED_SETTINGS[MIN_AVAILABLE_RATIO])
    return None if value is None else MinAvailableRatio(value)
