"""The exporter's own settings (`kvq.exporter.*`), typed and validated with the shared config."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import ClassVar

from kvq.kafka.client_settings import problems
from kvq.settings import values
from kvq.settings.app_settings import AppSettings, setting

LISTEN = "kvq.exporter.listen"
OTHER_PATHS = ("/status", "/ready", "/healthz")
"""What the server at LISTEN serves besides the metrics (whose path `--web.telemetry-path` sets,
and must not be one of these). Declared with the settings, not the server, so that `--help`
and `--check-config` need not import the server."""
ARCHIVE_DIR = "kvq.exporter.archive.dir"
REQUEST_TIMEOUT = "kvq.exporter.request.timeout"
VIOLATION_CHECK_INTERVAL = "kvq.exporter.violation.check.interval"


@dataclass(frozen=True)
class ExporterSettings(AppSettings):
    NAMESPACE: ClassVar[str] = "exporter"

    listen: tuple[str, int] = setting(
        LISTEN,
        values.listen,
        values.default_listen(9898),
        "The exporter's HTTP address (/metrics, health, status). The default host is "
        f"${values.LISTEN_HOST_ENV} where set (the container image sets 0.0.0.0), else 127.0.0.1.",
    )
    archive_dir: str | None = setting(
        ARCHIVE_DIR,
        values.path,
        None,
        "Append one JSON line per poll to files in this directory: the history the backfill "
        "rebuilds the metrics from. Unset: no archive.",
    )
    request_timeout: timedelta = setting(
        REQUEST_TIMEOUT,
        values.duration_between(
            timedelta(milliseconds=10),
            timedelta(minutes=5),
            "librdkafka's socket.timeout.ms range",
        ),
        "PT10S",
        "The per-broker deadline of each Kafka call in a poll.",
    )
    violation_check_interval: timedelta = setting(
        VIOLATION_CHECK_INTERVAL,
        values.duration_off_or_between(
            timedelta(milliseconds=100),
            timedelta(hours=1),
            "PT0S: storage.check.interval always",
        ),
        "PT1S",
        "The poll interval while a volume violates the limit, and the check interval between "
        "polls (graceful-slowdown: always; the proposal's rule: while a factor below 1 is in "
        "force and three polls after it is lifted; a check counts only when it shows space "
        "freed, a volume closing on its limit within the response time or the limit reached); "
        "at most storage.check.interval: freed space and load steps are seen sooner.",
    )

    @classmethod
    def kafka_problems(cls, admin_properties: Mapping[str, str]) -> list[str]:
        """kafka-python must accept the `kafka.admin.*` settings; librdkafka checks them too, as
        it reads PEM contents kafka-python would only fail on when it connects."""
        return problems(admin_properties, librdkafka=True)
