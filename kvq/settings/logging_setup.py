"""One log format for every `kvq-*` command: `--log.level` and `--log.format logfmt|json`, as
Prometheus exporters have them. Every line is one record on stderr; newlines inside a message are
escaped, so a value cannot forge a second line. No line shows a secret, at any level: every
record's final text (message and traceback, whichever logger wrote it: ours, kafka-python's config
dump at debug, urllib3's) passes `kvq.settings.redaction`."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from datetime import UTC, datetime
from typing import TextIO

from kvq.settings.redaction import redacted

LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warn": logging.WARNING,
    "error": logging.ERROR,
}
FORMATS = ("logfmt", "json")
_NAMES = {logging.DEBUG: "debug", logging.INFO: "info", logging.WARNING: "warn"}
_QUIET = ("kafka",)
"""kafka-python logs every connection failure itself; our own lines say what failed."""


def add_logging_flags(parser: argparse.ArgumentParser, default_level: str = "info") -> None:
    parser.add_argument(
        "--log.level",
        dest="log_level",
        choices=tuple(LEVELS),
        default=default_level,
        help=f"only log at this level and above (default {default_level})",
    )
    parser.add_argument(
        "--log.format",
        dest="log_format",
        choices=FORMATS,
        default="logfmt",
        help="one line per record: logfmt (key=value) or json (default logfmt)",
    )


def setup_logging(level: str = "info", fmt: str = "logfmt", stream: TextIO | None = None) -> None:
    """Send records at `level` and up to `stream` (stderr) in `fmt`; replaces any earlier setup."""
    handler = logging.StreamHandler(stream) if stream is not None else _StderrHandler()
    handler.setFormatter(JsonFormatter() if fmt == "json" else LogfmtFormatter())
    root = logging.getLogger()
    for old in root.handlers[:]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(LEVELS[level])
    for name in _QUIET:
        logging.getLogger(name).setLevel(logging.DEBUG if level == "debug" else logging.CRITICAL)


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever `sys.stderr` is when a record comes (as logging's last resort does), so
    a stream swapped and closed later (a test's capture) is never written to."""

    @property
    def stream(self) -> TextIO:  # type: ignore[override]
        return sys.stderr

    @stream.setter
    def stream(self, _value: TextIO) -> None:
        pass


def _fields(record: logging.LogRecord) -> dict[str, str]:
    moment = datetime.fromtimestamp(record.created, UTC)
    fields = {
        "ts": moment.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "level": _NAMES.get(record.levelno, "error"),
        "logger": record.name,
        "msg": redacted(record.getMessage()),
    }
    if record.exc_info:
        fields["exc"] = redacted(logging.Formatter().formatException(record.exc_info))
    return fields


class LogfmtFormatter(logging.Formatter):
    """`ts=... level=info logger=kvq.exporter msg="..."`"""

    def format(self, record: logging.LogRecord) -> str:
        return " ".join(f"{key}={_logfmt_value(value)}" for key, value in _fields(record).items())


class JsonFormatter(logging.Formatter):
    """`{"ts": "...", "level": "info", "logger": "kvq.exporter", "msg": "..."}`"""

    def format(self, record: logging.LogRecord) -> str:
        return json.dumps(_fields(record), ensure_ascii=False)


def _logfmt_value(value: str) -> str:
    if value and value.isprintable() and not any(c in value for c in ' ="\\'):
        return value
    return '"' + "".join(_escape(c) for c in value) + '"'


def _escape(char: str) -> str:
    if char in '"\\':
        return "\\" + char
    if char.isprintable():
        return char
    return {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(char, f"\\u{ord(char):04x}")
