"""The configuration every app shares: the Strimzi proposal's properties and `kvq.cluster.name`.

A Java properties file with the Strimzi proposal's keys verbatim (prefix
`client.quota.callback.static.`), so a Strimzi user can paste their broker lines unchanged, plus the
project's own `kvq.*` settings. One file may serve every app: each app declares and checks its
own `kvq.<app>.*` namespace (see app_settings.py) and leaves the other apps' namespaces alone.
Command-line flags override properties; values may name environment variables as `${env:NAME}`
so secrets stay out of the file. Every error names the property, the bad value and what is
allowed; all errors are reported at once. Secret values and values taken from the environment
are never printed.
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
from kvq.model.graceful_slowdown import GracefulSlowdown
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

ADMIN_PREFIX = PREFIX + "kafka.admin."
BOOTSTRAP_SERVERS = ADMIN_PREFIX + "bootstrap.servers"
CHECK_INTERVAL = PREFIX + "storage.check.interval"
DEFAULT_CHECK_INTERVAL = "PT5S"
"""Ours, not the proposal's PT1M: a poll is one small request per broker, and every second of
delay lets a disk fill (README "Reaction time"). A pasted broker line keeps its own value."""
PLUGIN_CHECK_INTERVAL = PREFIX + "storage.check-interval"
"""The key the Strimzi plugin ships (whole seconds): an alias of CHECK_INTERVAL."""
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
"""The name of the label that carries kvq.cluster.name on every series, alert and matcher: change
it where `cluster` already means something else (in Thanos or Mimir it is often the Kubernetes
cluster's external label, which would hide ours)."""
CLUSTER_LABEL_DEFAULT = metric_families.CLUSTER_LABEL
"""`cluster`, the name the metric table is written with: the label's one default, which every app
and test tool takes from here (`Config.cluster`)."""
VIOLATION_HOLD = "kvq.departed.broker.violation.hold"
"""How long a volume violating when last seen keeps violating while unseen: its broker away, or
its log dir offline (an error code, no sizes). Counted from when it was last seen with sizes."""
VIOLATION_HOLD_DEFAULT = "PT1H"
THROTTLE_POLICY = "kvq.throttle.policy"
"""Which policy turns the volumes into the factor (`POLICIES`): the proposal's by default."""
STOP_ON_VIOLATION = "stop-on-violation"
GRACEFUL_SLOWDOWN = "graceful-slowdown"
POLICIES = (STOP_ON_VIOLATION, GRACEFUL_SLOWDOWN)
SLOWDOWN_HORIZON = "kvq.throttle.slowdown.horizon"
"""graceful-slowdown: no volume may be predicted to reach its limit sooner than this (the time an
operator needs to react); production slows down as much as that takes."""
SLOWDOWN_HORIZON_DEFAULT = "PT10M"
SHARED_KVQ_KEYS = (CLUSTER_NAME, CLUSTER_LABEL, VIOLATION_HOLD, THROTTLE_POLICY, SLOWDOWN_HORIZON)
"""The `kvq.` settings every app reads (the exporter decides with them, the backfill replays)."""
APP_NAMESPACES = ("exporter", "enforcer", "backfill")
"""The apps that may share one properties file, each owning `kvq.<app>.*`."""

_STATIC_KEYS = {
    BOOTSTRAP_SERVERS,
    CHECK_INTERVAL,
    PLUGIN_CHECK_INTERVAL,
    FALLBACK,
    VALIDITY,
    PRODUCE,
    FETCH,
    REQUEST,
    EXCLUDED,
    MIN_AVAILABLE_BYTES,
    MIN_AVAILABLE_RATIO,
}
_SECRET = re.compile(
    r"(password|secret|jaas|token|credential|oauthbearer\.config|(^|\.)key(\.pem)?$)",
    re.IGNORECASE,
)
_ENV_REF = re.compile(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}")
JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')
"""One `name="value"` option of a JAAS line (`sasl.jaas.config`)."""


class ConfigError(ValueError):
    """One or more configuration errors, each naming the property, the value and what is allowed."""

    def __init__(self, errors: list[str], source: str = "") -> None:
        self.errors = list(errors)
        self.source = source
        where = f" in {source}" if source else ""
        super().__init__(f"{len(errors)} configuration error(s){where}:\n  " + "\n  ".join(errors))


@dataclass(frozen=True, slots=True)
class Setting:
    """One `kvq.*` setting: how to parse it, its default (None: unset) and what it does."""

    key: str
    parse: Callable[[str], Any]
    default: str | None
    help: str


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
            return GracefulSlowdown(self.limit, self.slowdown_horizon.total_seconds())
        return StopOnViolation(self.limit)

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
    own_values = {s.key: reader.get(s.key, s.parse, s.default) for s in own}
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
        def substitute(match: re.Match) -> str:
            name = match.group(1)
            if name not in environ:
                self.errors.append(f"{key} refers to environment variable {name}, which is not set")
                return ""
            return environ[name]

        return _ENV_REF.sub(substitute, value)

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


def _read_shared(reader: _Reader, source: str) -> Config | None:
    """The shared part of the configuration; None when it has errors (in `reader.errors`)."""
    properties = reader.properties
    errors = reader.errors
    warnings = reader.warnings
    get = reader.get

    bootstrap = properties.get(BOOTSTRAP_SERVERS, "").strip()
    if not bootstrap:
        errors.append(
            f"{BOOTSTRAP_SERVERS} is required: the brokers to ask, e.g. "
            f"{BOOTSTRAP_SERVERS}=kafka-0:9092,kafka-1:9092"
        )

    if PLUGIN_CHECK_INTERVAL in properties and CHECK_INTERVAL in properties:
        errors.append(
            f"{PLUGIN_CHECK_INTERVAL} and {CHECK_INTERVAL} are both set; keep only "
            f"{CHECK_INTERVAL} (ISO 8601, e.g. PT1M)"
        )
        check_interval = None
    elif PLUGIN_CHECK_INTERVAL in properties:
        check_interval = get(PLUGIN_CHECK_INTERVAL, values.seconds)
    else:
        check_interval = get(CHECK_INTERVAL, values.duration, DEFAULT_CHECK_INTERVAL)
    validity = get(VALIDITY, values.positive_duration, "PT5M")
    fallback = get(FALLBACK, values.factor, "1.0")
    violation_hold = get(VIOLATION_HOLD, values.duration, VIOLATION_HOLD_DEFAULT)
    limit = _limit(reader)
    produce = get(PRODUCE, values.positive_long)
    fetch = get(FETCH, values.positive_long)
    request = get(REQUEST, values.positive_number)
    excluded = get(EXCLUDED, values.principals) or ()
    cluster_name = get(CLUSTER_NAME, values.label_value, CLUSTER_NAME_DEFAULT)
    policy_name = get(THROTTLE_POLICY, values.one_of(POLICIES), STOP_ON_VIOLATION)
    horizon = get(SLOWDOWN_HORIZON, values.positive_duration, SLOWDOWN_HORIZON_DEFAULT)
    cluster_label = get(CLUSTER_LABEL, cluster_label_name, CLUSTER_LABEL_DEFAULT)

    if check_interval and validity and validity <= check_interval:
        warnings.append(_short_validity_warning(validity, check_interval))

    for key in sorted(properties):
        if key in IGNORED_PLUGIN_KEYS:
            warnings.append(
                f"{key} is a Strimzi plugin key this tool ignores: {IGNORED_PLUGIN_KEYS[key]}"
            )
        elif (
            key.startswith(PREFIX) and key not in _STATIC_KEYS and not key.startswith(ADMIN_PREFIX)
        ):
            errors.append(
                f"{key} is not a property of the quota plugin{did_you_mean(key, _STATIC_KEYS)} "
                f"(known: {', '.join(sorted(k.removeprefix(PREFIX) for k in _STATIC_KEYS))}, "
                "kafka.admin.*)"
            )

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
    )


def cluster_label_name(text: str) -> str:
    """kvq.cluster.label: a label name that none of our series, nor Prometheus, gives another
    meaning."""
    name = values.label_name(text)
    if name in metric_families.TAKEN_LABELS:
        raise ValueError(
            f"{name} is a label the series or alerts already carry; allowed: any other label "
            "name (e.g. kafka_cluster)"
        )
    return name


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
        value = reader.get(MIN_AVAILABLE_BYTES, values.positive_long)
        return None if value is None else MinAvailableBytes(value)
    value = reader.get(MIN_AVAILABLE_RATIO, values.open_ratio)
    return None if value is None else MinAvailableRatio(value)
