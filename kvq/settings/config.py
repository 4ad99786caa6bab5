"""Configuration shared by exporter, enforcer and backfill.

A Java properties file with the Strimzi proposal's keys verbatim (prefix
`client.quota.callback.static.`), so a Strimzi user can paste their broker lines unchanged, plus the
project's own `kvq.*` settings. Command-line flags override properties; values may name environment
variables as `${env:NAME}` so secrets stay out of the file. Every error names the property, the bad
value and what is allowed; all errors are reported at once.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from kvq.model.limits import (
    MIN_AVAILABLE_BYTES,
    MIN_AVAILABLE_RATIO,
    PREFIX,
    Limit,
    MinAvailableBytes,
    MinAvailableRatio,
)
from kvq.settings.durations import format_duration, parse_duration
from kvq.settings.properties import PropertiesError, read_properties

ADMIN_PREFIX = PREFIX + "kafka.admin."
BOOTSTRAP_SERVERS = ADMIN_PREFIX + "bootstrap.servers"
CHECK_INTERVAL = PREFIX + "storage.check.interval"
OLD_CHECK_INTERVAL = PREFIX + "storage.check-interval"
FALLBACK = PREFIX + "throttle.factor.fallback"
VALIDITY = PREFIX + "throttle.factor.validity.duration"
PRODUCE = PREFIX + "produce"
FETCH = PREFIX + "fetch"
REQUEST = PREFIX + "request"
EXCLUDED = PREFIX + "excluded.principal.name.list"
REMOVED_BY_PROPOSAL = (PREFIX + "storage.hard", PREFIX + "storage.soft")
CLUSTER_NAME = "kvq.cluster.name"

_STATIC_KEYS = {
    BOOTSTRAP_SERVERS,
    CHECK_INTERVAL,
    OLD_CHECK_INTERVAL,
    FALLBACK,
    VALIDITY,
    PRODUCE,
    FETCH,
    REQUEST,
    EXCLUDED,
    MIN_AVAILABLE_BYTES,
    MIN_AVAILABLE_RATIO,
    *REMOVED_BY_PROPOSAL,
}
_SECRET = re.compile(r"(password|secret|jaas|token|credential|\.key$)", re.IGNORECASE)
_ENV_REF = re.compile(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}")
_CLUSTER_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$")


class ConfigError(ValueError):
    """One or more configuration errors, each naming the property, the value and what is allowed."""

    def __init__(self, errors: list[str], source: str = "") -> None:
        self.errors = list(errors)
        self.source = source
        where = f" in {source}" if source else ""
        super().__init__(f"{len(errors)} configuration error(s){where}:\n  " + "\n  ".join(errors))


# --- value parsers: each returns the parsed value or raises ValueError saying what is allowed ---


def _duration(text: str) -> timedelta:
    return parse_duration(text)


def _positive_duration(text: str) -> timedelta:
    value = parse_duration(text)
    if value <= timedelta(0):
        raise ValueError("must be a positive ISO 8601 duration (e.g. PT10S)")
    return value


def _positive_long(text: str) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise ValueError("must be a whole number greater than 0 (a Java long)") from None
    if not 0 < value < 2**63:
        raise ValueError("must be a whole number greater than 0 (a Java long)")
    return value


def _positive_double(text: str) -> float:
    value = _double(text)
    if not value > 0:
        raise ValueError("must be a number greater than 0")
    return value


def _double(text: str) -> float:
    try:
        value = float(text.strip())
    except ValueError:
        raise ValueError("must be a number") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError("must be a finite number")
    return value


def _factor(text: str) -> float:
    value = _double(text)
    if not 0.0 <= value <= 1.0:
        raise ValueError("must be a number from 0.0 to 1.0")
    return value


def _open_ratio(text: str) -> float:
    value = _double(text)
    if not 0.0 < value < 1.0:
        raise ValueError("must be a number between 0.0 and 1.0, both excluded")
    return value


def _seconds(text: str) -> timedelta:
    try:
        value = int(text.strip())
    except ValueError:
        raise ValueError("must be a whole number of seconds (0 disables polling)") from None
    if value < 0:
        raise ValueError("must be a whole number of seconds (0 disables polling)")
    return timedelta(seconds=value)


def _principals(text: str) -> tuple[str, ...]:
    entries = tuple(p.strip() for p in text.split(";") if p.strip())
    for entry in entries:
        if not entry.startswith("User:") or entry == "User:":
            raise ValueError(
                f"entry {entry!r} must be a principal 'User:<name>'; "
                "separate entries with ';' (names may contain commas)"
            )
    return entries


def _listen(text: str) -> tuple[str, int]:
    host, sep, port = text.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError("must be HOST:PORT, e.g. 127.0.0.1:9898 (port 0..65535)")
    return host.strip("[]"), int(port)


def _text(text: str) -> str:
    if not text.strip():
        raise ValueError("must not be empty")
    return text.strip()


def _names(text: str) -> tuple[str, ...]:
    return tuple(n.strip() for n in text.split(",") if n.strip())


def _bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "yes", "1"):
        return True
    if lowered in ("false", "no", "0"):
        return False
    raise ValueError("must be true or false")


def _cluster_name(text: str) -> str:
    if not _CLUSTER_NAME_RE.match(text.strip()):
        raise ValueError("must start with a letter or digit and use only A-Z a-z 0-9 _ . : -")
    return text.strip()


@dataclass(frozen=True, slots=True)
class Setting:
    """One `kvq.*` setting: how to parse it, its default (None: unset) and what it does."""

    key: str
    parse: Callable[[str], Any]
    default: str | None
    help: str


SETTINGS: dict[str, Setting] = {
    s.key: s
    for s in (
        Setting(CLUSTER_NAME, _cluster_name, "kafka", "the `cluster` label on every metric/alert"),
        Setting("kvq.exporter.listen", _listen, "127.0.0.1:9898", "exporter HTTP address"),
        Setting("kvq.exporter.archive.dir", _text, None, "append one JSON line per poll here"),
        Setting(
            "kvq.exporter.request.timeout",
            _positive_duration,
            "PT10S",
            "per-broker timeout of each Kafka call in a poll",
        ),
        Setting("kvq.enforcer.listen", _listen, "127.0.0.1:9899", "enforcer HTTP address"),
        Setting("kvq.enforcer.journal", _text, "kvq-enforcer-journal.sqlite3", "durable journal"),
        Setting("kvq.enforcer.auth.bearer.token.file", _text, None, "file holding the token"),
        Setting("kvq.enforcer.auth.basic.file", _text, None, "file of user:password lines"),
        Setting(
            "kvq.enforcer.alert.name", _text, "KafkaVolumeQuotaThrottle", "alert that throttles"
        ),
        Setting(
            "kvq.enforcer.quota.keys",
            _names,
            "producer_byte_rate",
            "quota keys scaled by the factor (comma-separated)",
        ),
        Setting("kvq.enforcer.prometheus.url", _text, None, "confirm factors via this Prometheus"),
        Setting("kvq.enforcer.dry.run", _bool, "false", "validate and log plans, change nothing"),
        Setting(
            "kvq.enforcer.alert.expiry",
            _positive_duration,
            "PT12H",
            "forget a firing throttle alert Alertmanager has not re-sent for this long",
        ),
        Setting("kvq.backfill.step", _positive_duration, "PT1M", "evaluation grid step"),
    )
}


def register_setting(setting: Setting) -> None:
    """Let a component declare a further `kvq.*` setting (unknown `kvq.*` keys are errors)."""
    SETTINGS[setting.key] = setting


@dataclass(frozen=True)
class Config:
    """The effective, validated configuration of one cluster."""

    source: str
    properties: Mapping[str, str]
    cluster_name: str
    bootstrap_servers: str
    admin_properties: Mapping[str, str]
    """`kafka.admin.*` without the prefix (bootstrap.servers, security.protocol, sasl.*, ...)."""
    check_interval: timedelta
    validity: timedelta
    fallback_factor: float
    limit: Limit
    produce: int | None
    fetch: int | None
    request: float | None
    excluded_principals: tuple[str, ...]
    settings: Mapping[str, Any]
    warnings: tuple[str, ...]

    def setting(self, key: str) -> Any:
        """A parsed `kvq.*` setting (its default when unset, None when it has none)."""
        if key not in SETTINGS:
            raise KeyError(f"unknown setting {key}")
        return self.settings.get(key)

    def effective(self) -> list[tuple[str, str]]:
        """Every property in force (defaults included), secrets masked, sorted by key."""
        shown = dict(self.properties)
        for key in (OLD_CHECK_INTERVAL, *REMOVED_BY_PROPOSAL):
            shown.pop(key, None)
        shown[CHECK_INTERVAL] = format_duration(self.check_interval)
        shown[VALIDITY] = format_duration(self.validity)
        shown[FALLBACK] = repr(self.fallback_factor)
        for key, setting in SETTINGS.items():
            if key not in shown and setting.default is not None:
                shown[key] = setting.default
        for key in (PRODUCE, FETCH, REQUEST):
            shown.setdefault(key, "unlimited")
        return sorted((k, mask(k, v)) for k, v in shown.items())


def mask(key: str, value: str) -> str:
    """Hide the value of a secret-looking property."""
    return "********" if _SECRET.search(key) else value


def load_config(
    path: str | Path,
    overrides: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Config:
    """Read, expand and validate a properties file; `overrides` (from flags) win over the file.

    An override of one limit property replaces a limit of the other type from the file.
    Raises ConfigError listing every problem.
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
    return build_config(properties, str(path), os.environ if environ is None else environ)


def build_config(
    raw: Mapping[str, str], source: str = "<properties>", environ: Mapping[str, str] | None = None
) -> Config:
    """Validate a mapping of properties (see load_config)."""
    errors: list[str] = []
    warnings: list[str] = []
    properties = _expand_env(raw, os.environ if environ is None else environ, errors)

    def get(key: str, parse: Callable[[str], Any], default: str | None = None) -> Any:
        text = properties.get(key, default)
        if text is None:
            return None
        try:
            return parse(text)
        except ValueError as exc:
            errors.append(f"{key}={mask(key, text)!s}: {exc}")
            return None

    bootstrap = properties.get(BOOTSTRAP_SERVERS, "").strip()
    if not bootstrap:
        errors.append(
            f"{BOOTSTRAP_SERVERS} is required: the brokers to ask, e.g. "
            f"{BOOTSTRAP_SERVERS}=kafka-0:9092,kafka-1:9092"
        )
    admin = {k[len(ADMIN_PREFIX) :]: v for k, v in properties.items() if k.startswith(ADMIN_PREFIX)}

    if OLD_CHECK_INTERVAL in properties and CHECK_INTERVAL in properties:
        errors.append(
            f"{OLD_CHECK_INTERVAL} and {CHECK_INTERVAL} are both set; keep only "
            f"{CHECK_INTERVAL} (ISO 8601, e.g. PT1M)"
        )
        check_interval = None
    elif OLD_CHECK_INTERVAL in properties:
        check_interval = get(OLD_CHECK_INTERVAL, _seconds)
        if check_interval is not None:
            warnings.append(
                f"{OLD_CHECK_INTERVAL} (seconds) is deprecated; use "
                f"{CHECK_INTERVAL}={format_duration(check_interval)}"
            )
    else:
        check_interval = get(CHECK_INTERVAL, _duration, "PT1M")
    validity = get(VALIDITY, _positive_duration, "PT5M")
    fallback = get(FALLBACK, _factor, "1.0")

    limit = _limit(properties, get, errors)
    produce = get(PRODUCE, _positive_long)
    fetch = get(FETCH, _positive_long)
    request = get(REQUEST, _positive_double)
    excluded = get(EXCLUDED, _principals) or ()

    for key in REMOVED_BY_PROPOSAL:
        if key in properties:
            warnings.append(
                f"{key} is ignored: the proposal removed aggregate soft/hard limits; use "
                f"{MIN_AVAILABLE_BYTES} or {MIN_AVAILABLE_RATIO} (early warning is an alert rule)"
            )
    for key in sorted(properties):
        if key.startswith(PREFIX) and key not in _STATIC_KEYS and not key.startswith(ADMIN_PREFIX):
            warnings.append(f"{key} is not a property this tool knows; it is ignored")
        elif key.startswith("kvq.") and key not in SETTINGS:
            errors.append(f"{key} is not a known setting; known: {', '.join(sorted(SETTINGS))}")

    settings = {key: get(key, s.parse, s.default) for key, s in SETTINGS.items()}

    if errors:
        raise ConfigError(errors, source)
    return Config(
        source=source,
        properties=properties,
        cluster_name=settings[CLUSTER_NAME],
        bootstrap_servers=bootstrap,
        admin_properties=admin,
        check_interval=check_interval,
        validity=validity,
        fallback_factor=fallback,
        limit=limit,
        produce=produce,
        fetch=fetch,
        request=request,
        excluded_principals=excluded,
        settings=settings,
        warnings=tuple(warnings),
    )


def _limit(properties: Mapping[str, str], get: Callable, errors: list[str]) -> Limit | None:
    has_bytes = MIN_AVAILABLE_BYTES in properties
    has_ratio = MIN_AVAILABLE_RATIO in properties
    if has_bytes == has_ratio:
        which = "both are set" if has_bytes else "neither is set"
        errors.append(
            f"exactly one limit must be configured, {MIN_AVAILABLE_BYTES} (bytes, > 0) or "
            f"{MIN_AVAILABLE_RATIO} (between 0.0 and 1.0); {which}"
        )
        return None
    if has_bytes:
        value = get(MIN_AVAILABLE_BYTES, _positive_long)
        return None if value is None else MinAvailableBytes(value)
    value = get(MIN_AVAILABLE_RATIO, _open_ratio)
    return None if value is None else MinAvailableRatio(value)


def _expand_env(
    raw: Mapping[str, str], environ: Mapping[str, str], errors: list[str]
) -> dict[str, str]:
    expanded: dict[str, str] = {}
    for key, value in raw.items():

        def substitute(match: re.Match, key: str = key) -> str:
            name = match.group(1)
            if name not in environ:
                errors.append(f"{key} refers to environment variable {name}, which is not set")
                return ""
            return environ[name]

        expanded[key] = _ENV_REF.sub(substitute, value)
    return expanded


def print_warnings(config: Config, stream=None) -> None:
    for warning in config.warnings:
        print(f"warning: {warning}", file=stream or sys.stderr)
