"""Value parsers for properties: each returns the parsed value or raises ValueError saying what
is allowed (the caller adds the property name and the value)."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from datetime import timedelta
from urllib.parse import urlsplit

from kvq.settings.durations import format_duration, parse_duration

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$")
_LABEL_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def duration(text: str) -> timedelta:
    return parse_duration(text)


def positive_duration(text: str) -> timedelta:
    value = parse_duration(text)
    if value <= timedelta(0):
        raise ValueError("must be a positive ISO 8601 duration (e.g. PT10S)")
    return value


def positive_long(text: str) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise ValueError("must be a whole number greater than 0 (a Java long)") from None
    if not 0 < value < 2**63:
        raise ValueError("must be a whole number greater than 0 (a Java long)")
    return value


def number(text: str) -> float:
    try:
        value = float(text.strip())
    except ValueError:
        raise ValueError("must be a number") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError("must be a finite number")
    return value


def duration_between(low: timedelta, high: timedelta, why: str) -> Callable[[str], timedelta]:
    """Parses durations from `low` to `high` inclusive; `why` says where the bounds come from."""

    def parse(text: str) -> timedelta:
        value = parse_duration(text)
        if not low <= value <= high:
            raise ValueError(
                f"must be from {format_duration(low)} to {format_duration(high)} ({why})"
            )
        return value

    return parse


def duration_off_or_between(
    low: timedelta, high: timedelta, off: str
) -> Callable[[str], timedelta]:
    """Parses PT0S (off, as `off` says) or durations from `low` to `high` inclusive."""

    def parse(text: str) -> timedelta:
        value = parse_duration(text)
        if value and not low <= value <= high:
            raise ValueError(
                f"must be PT0S ({off}) or from {format_duration(low)} to {format_duration(high)}"
            )
        return value

    return parse


def positive_number(text: str) -> float:
    value = number(text)
    if not value > 0:
        raise ValueError("must be a number greater than 0")
    return value


def factor(text: str) -> float:
    value = number(text)
    if not 0.0 <= value <= 1.0:
        raise ValueError("must be a number from 0.0 to 1.0")
    return value


def open_ratio(text: str) -> float:
    value = number(text)
    if not 0.0 < value < 1.0:
        raise ValueError("must be a number between 0.0 and 1.0, both excluded")
    return value


def seconds(text: str) -> timedelta:
    try:
        value = int(text.strip())
    except ValueError:
        raise ValueError("must be a whole number of seconds (0 disables polling)") from None
    if value < 0:
        raise ValueError("must be a whole number of seconds (0 disables polling)")
    return timedelta(seconds=value)


def principals(text: str) -> tuple[str, ...]:
    entries = tuple(p.strip() for p in text.split(";") if p.strip())
    for entry in entries:
        if not entry.startswith("User:") or entry == "User:":
            raise ValueError(
                f"entry {entry!r} must be a principal 'User:<name>'; "
                "separate entries with ';' (names may contain commas)"
            )
    return entries


LISTEN_HOST_ENV = "KVQ_LISTEN_HOST"


def default_listen(port: int) -> str:
    """Where a server listens unless told: loopback, or `$KVQ_LISTEN_HOST` (the container image
    sets 0.0.0.0, so a pod's probes and Prometheus reach it)."""
    return f"{os.environ.get(LISTEN_HOST_ENV) or '127.0.0.1'}:{port}"


def listen(text: str) -> tuple[str, int]:
    """`HOST:PORT`, `[IPv6]:PORT`, or `:PORT` for every interface (host "") as in Go."""
    host, sep, port = text.strip().rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(
            "must be HOST:PORT, e.g. 127.0.0.1:9898, or :PORT for every interface (port 0..65535)"
        )
    return host.strip("[]"), int(port)


def text(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    return value.strip()


def http_url(value: str) -> str:
    """An http:// or https:// URL with a host, e.g. http://prometheus:9090."""
    url = value.strip()
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(
            "must be an http:// or https:// URL with a host, e.g. http://prometheus:9090"
        )
    return url


def names(value: str) -> tuple[str, ...]:
    return tuple(n.strip() for n in value.split(",") if n.strip())


def boolean(value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in ("true", "yes", "1"):
        return True
    if lowered in ("false", "no", "0"):
        return False
    raise ValueError("must be true or false")


def one_of(allowed: tuple[str, ...]) -> Callable[[str], str]:
    """A parser accepting exactly one of `allowed` (surrounding spaces ignored)."""

    def parse(value: str) -> str:
        if value.strip() not in allowed:
            raise ValueError(f"must be one of {', '.join(allowed)}")
        return value.strip()

    return parse


def label_name(text: str) -> str:
    """A Prometheus label name (names starting with `__` are Prometheus' own)."""
    name = text.strip()
    if not _LABEL_NAME_RE.fullmatch(name) or name.startswith("__"):
        raise ValueError(
            "must be a Prometheus label name: a letter or _, then letters, digits or _, not "
            "starting with __ (e.g. kafka_cluster)"
        )
    return name


def label_value(value: str) -> str:
    """A cluster or scenario name: safe in a label, a file name and a log line."""
    if not _NAME_RE.match(value.strip()):
        raise ValueError("must start with a letter or digit and use only A-Z a-z 0-9 _ . : -")
    return value.strip()
