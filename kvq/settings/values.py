"""Value parsers for properties. Each is a `Parser`: it returns the parsed value, and says once
what it accepts, which the configuration reference prints and a refused value is told ("must be
<accepts>"; the caller adds the property name and the value), so the two cannot drift apart."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Generic, TypeVar
from urllib.parse import urlsplit

from kvq.settings.durations import format_duration, parse_duration

T = TypeVar("T")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$")
_LABEL_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class NotAccepted(ValueError):
    """Raised by a Parser's conversion for text it does not accept; the message, if any, says
    what exactly is wrong, and the Parser adds what is allowed."""


@dataclass(frozen=True)
class Parser(Generic[T]):
    """How a property's text becomes its value, and what it accepts.

    `kind` is the value's type as the reference lists it; `accepts` what the conversion lets
    through, a noun phrase that completes "must be ...". A ValueError the conversion raises that
    is not NotAccepted is passed on as it is: it already says more (a duration's "did you mean").
    """

    kind: str
    accepts: str
    convert: Callable[[str], T]

    def __call__(self, text: str) -> T:
        try:
            return self.convert(text)
        except NotAccepted as refused:
            why = f"{refused}; " if str(refused) else ""
            raise ValueError(f"{why}must be {self.accepts}") from None


def parser(kind: str, accepts: str) -> Callable[[Callable[[str], T]], Parser[T]]:
    """Make the decorated conversion a Parser of `kind` accepting `accepts`."""

    def make(convert: Callable[[str], T]) -> Parser[T]:
        return Parser(kind, accepts, convert)

    return make


def _whole(text: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise NotAccepted from None


def _finite(text: str) -> float:
    try:
        value = float(text.strip())
    except ValueError:
        raise NotAccepted from None
    if value != value or value in (float("inf"), float("-inf")):
        raise NotAccepted("not a finite number")
    return value


@parser("duration", "an ISO 8601 duration from PT0S to P36500D (e.g. PT30S, PT5M, P1D)")
def duration(text: str) -> timedelta:
    return parse_duration(text)


@parser("duration", "a positive ISO 8601 duration (e.g. PT10S)")
def positive_duration(text: str) -> timedelta:
    value = parse_duration(text)
    if value <= timedelta(0):
        raise NotAccepted
    return value


@parser("long", "a whole number greater than 0 (a Java long)")
def positive_long(text: str) -> int:
    value = _whole(text)
    if not 0 < value < 2**63:
        raise NotAccepted
    return value


def duration_between(low: timedelta, high: timedelta, why: str) -> Parser[timedelta]:
    """Parses durations from `low` to `high` inclusive; `why` says where the bounds come from."""

    def parse(text: str) -> timedelta:
        value = parse_duration(text)
        if not low <= value <= high:
            raise NotAccepted
        return value

    return Parser(
        "duration", f"from {format_duration(low)} to {format_duration(high)} ({why})", parse
    )


def duration_off_or_between(low: timedelta, high: timedelta, off: str) -> Parser[timedelta]:
    """Parses PT0S (off, as `off` says) or durations from `low` to `high` inclusive."""

    def parse(text: str) -> timedelta:
        value = parse_duration(text)
        if value and not low <= value <= high:
            raise NotAccepted
        return value

    accepts = f"PT0S ({off}) or from {format_duration(low)} to {format_duration(high)}"
    return Parser("duration", accepts, parse)


@parser("number", "a number greater than 0")
def positive_number(text: str) -> float:
    value = _finite(text)
    if not value > 0:
        raise NotAccepted
    return value


def number_between(low: float, high: float, why: str) -> Parser[float]:
    """Parses numbers from `low` to `high` inclusive; `why` says where the bounds come from."""

    def parse(text: str) -> float:
        value = _finite(text)
        if not low <= value <= high:
            raise NotAccepted
        return value

    return Parser("number", f"a number from {low:g} to {high:g} ({why})", parse)


@parser("number", "a number from 0.0 to 1.0")
def factor(text: str) -> float:
    value = _finite(text)
    if not 0.0 <= value <= 1.0:
        raise NotAccepted
    return value


@parser("number", "a number between 0.0 and 1.0, both excluded")
def open_ratio(text: str) -> float:
    value = _finite(text)
    if not 0.0 < value < 1.0:
        raise NotAccepted
    return value


@parser("whole seconds", "a whole number of seconds (0 disables polling)")
def seconds(text: str) -> timedelta:
    value = _whole(text)
    if value < 0:
        raise NotAccepted
    return timedelta(seconds=value)


@parser(
    "principal list",
    "principals User:<name> separated by ';' (names may contain commas), e.g. User:a;User:CN=b,O=c",
)
def principals(text: str) -> tuple[str, ...]:
    entries = tuple(p.strip() for p in text.split(";") if p.strip())
    for entry in entries:
        if not entry.startswith("User:") or entry == "User:":
            raise NotAccepted(f"entry {entry!r} is not a principal 'User:<name>'")
    return entries


LISTEN_HOST_ENV = "KVQ_LISTEN_HOST"


def default_listen(port: int) -> str:
    """Where a server listens unless told: loopback, or `$KVQ_LISTEN_HOST` (the container image
    sets 0.0.0.0, so a pod's probes and Prometheus reach it)."""
    return f"{os.environ.get(LISTEN_HOST_ENV) or '127.0.0.1'}:{port}"


@parser(
    "address",
    "HOST:PORT, e.g. 127.0.0.1:9898, or :PORT for every interface (port 0..65535)",
)
def listen(text: str) -> tuple[str, int]:
    """`HOST:PORT`, `[IPv6]:PORT`, or `:PORT` for every interface (host "") as in Go."""
    host, sep, port = text.strip().rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise NotAccepted
    return host.strip("[]"), int(port)


@parser("text", "text that is not blank")
def text(value: str) -> str:
    if not value.strip():
        raise NotAccepted
    return value.strip()


path = Parser("path", "a path that is not blank", text.convert)
"""A file or directory: any text, so the app's own check says what is wrong with it."""


@parser("URL", "an http:// or https:// URL with a host, e.g. http://prometheus:9090")
def http_url(value: str) -> str:
    url = value.strip()
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise NotAccepted
    return url


@parser("list", "comma-separated http:// or https:// URLs")
def http_urls(value: str) -> tuple[str, ...]:
    return tuple(http_url.convert(u) for u in value.split(",") if u.strip())


@parser("list", "comma-separated names")
def names(value: str) -> tuple[str, ...]:
    return tuple(n.strip() for n in value.split(",") if n.strip())


@parser("boolean", "true or false")
def boolean(value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in ("true", "yes", "1"):
        return True
    if lowered in ("false", "no", "0"):
        return False
    raise NotAccepted


def one_of(allowed: tuple[str, ...]) -> Parser[str]:
    """A parser accepting exactly one of `allowed` (surrounding spaces ignored)."""

    def parse(value: str) -> str:
        if value.strip() not in allowed:
            raise NotAccepted
        return value.strip()

    return Parser("choice", f"one of {', '.join(allowed)}", parse)


@parser(
    "label name",
    "a Prometheus label name: a letter or _, then letters, digits or _, not starting with __ "
    "(e.g. kafka_cluster)",
)
def label_name(text: str) -> str:
    name = text.strip()
    if not _LABEL_NAME_RE.fullmatch(name) or name.startswith("__"):
        raise NotAccepted
    return name


@parser("name", "a name of A-Z a-z 0-9 _ . : - starting with a letter or digit")
def label_value(value: str) -> str:
    """A cluster or scenario name: safe in a label, a file name and a log line."""
    if not _NAME_RE.match(value.strip()):
        raise NotAccepted
    return value.strip()
