"""Where a throttle's seconds go: when each hop of the loop passed it on, read after a run.

    exporter   the poll that saw the crossing (its log: `poll ok ... factor 0.0`)
    scrape     the first scrape carrying that factor (the sample's timestamp in Prometheus)
    rule       the evaluation that made KafkaVolumeQuotaThrottle fire (ALERTS' first sample)
    received   Alertmanager received the firing alert from Prometheus (its debug log)
    notify     Alertmanager flushed the alert's group to the enforcer's webhook (its debug log)
    enforcer   the enforcer set the throttled quotas, altered and verified (its log)
    producers  the first throttle a broker reported to a producer not throttled before the
               crossing (librdkafka's throttle callback): a broker enforcing the new quota

On real Kafka, from each broker's server.log (devkit's log4j2 config): when the first and the last
broker applied the enforcer's quotas (`Changing PRODUCE quota`), and for the Strimzi plugin when
the first and the last broker's own check saw the crossing (`Throttle Factor changed`).

Every moment is wall-clock seconds (time.time()); the caller turns them into seconds after the
crossing.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path

from demo.stack import ALERT, CLUSTER

_TIME = re.compile(r'\b(?:ts|time)="?(\d{4}-\d\d-\d\dT[\d:.]+(?:Z|[+-]\d\d:\d\d))"?')


def log_time(line: str) -> float | None:
    """The `ts=`/`time=` of a logfmt line (kvq's, Alertmanager's) as seconds since the epoch."""
    found = _TIME.search(line)
    if found is None:
        return None
    return datetime.fromisoformat(found.group(1).replace("Z", "+00:00")).timestamp()


def first_line_time(path: Path, after: float, *needles: str) -> float | None:
    """When the first line of the log at `path` holding every one of `needles` was written, at or
    after `after` (seconds since the epoch)."""
    if not path.is_file():
        return None
    for line in path.read_text(errors="replace").splitlines():
        if all(n in line for n in needles):
            at = log_time(line)
            if at is not None and at >= after:
                return at
    return None


def first_sample_time(
    prometheus, selector: str, after: float, window_seconds: int, below: float = float("inf")
) -> float | None:
    """Timestamp (a scrape's or a rule evaluation's time) of the first raw sample of `selector`
    below `below`, at or after `after`."""
    times = [
        float(t)
        for series in prometheus.query(f"{selector}[{window_seconds}s]")
        for t, value in series["values"]
        if float(t) >= after and float(value) < below
    ]
    return min(times, default=None)


def loop_hops(stack, crossed: float) -> list[tuple[float | None, str]]:
    """(moment or None, hop) of the kvq loop after the crossing at `crossed` (epoch seconds)."""
    window = int(time.time() - crossed) + 60  # back to a minute before the crossing
    exporter = first_line_time(
        stack.work_dir / "exporter.log", crossed - 1.0, "poll ok", "factor 0.0"
    )
    scrape = first_sample_time(
        stack.prometheus,
        f'kafka_volume_quota_throttle_factor{{cluster="{CLUSTER}"}}',
        crossed - 1.0,
        window,
        below=1.0,
    )
    rule = first_sample_time(
        stack.prometheus,
        f'ALERTS{{alertname="{ALERT}", alertstate="firing", cluster="{CLUSTER}"}}',
        crossed - 1.0,
        window,
    )
    alertmanager_log = stack.alertmanager.work_dir / "alertmanager.log"
    received = first_line_time(alertmanager_log, crossed - 1.0, "Received alert", f"{ALERT}[")
    notify = first_line_time(alertmanager_log, crossed - 1.0, "msg=flushing", f"{ALERT}[")
    enforcer = first_line_time(
        stack.work_dir / "enforcer.log", crossed - 1.0, f"cluster {CLUSTER}: factor 0", " applied: "
    )
    return [
        (exporter, "exporter: the poll that saw it"),
        (scrape, "Prometheus scraped factor < 1"),
        (rule, "alert firing (rule evaluated)"),
        (received, "Alertmanager received the alert"),
        (notify, "Alertmanager sent the webhook"),
        (enforcer, "enforcer altered and verified"),
    ]


_LOG4J_TIME = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]")


def log4j_time(line: str) -> float | None:
    """The `[%d]` of a Kafka server.log line (the JVM's local time) as seconds since the epoch."""
    found = _LOG4J_TIME.search(line)
    if found is None:
        return None
    return datetime.strptime(found.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()


PLUGIN_CHANGE = "Throttle Factor changed from"
"""The Strimzi plugin's line when its check changes the factor (PolicyBasedThrottle, INFO)."""
QUOTA_CHANGE = "Changing PRODUCE quota for"
"""A broker's line when it applies a produce quota record (ClientQuotaManager, INFO, for its
default callback): from then on it enforces the new value."""


def broker_lines(kafka, crossed: float, needle: str) -> dict[int, float]:
    """Node id -> when its server.log first had a line holding `needle`, at or after a second
    before `crossed` (epoch seconds)."""
    first: dict[int, float] = {}
    for node in kafka.node_list:
        path = node.logs_dir / "server.log"
        lines = path.read_text(errors="replace").splitlines() if path.is_file() else []
        for line in lines:
            at = log4j_time(line) if needle in line else None
            if at is not None and at >= crossed - 1.0:
                first[node.node_id] = min(at, first.get(node.node_id, at))
    return first


def first_and_every_broker(
    kafka, crossed: float, needle: str, what: str
) -> list[tuple[float | None, str]]:
    """(moment or None, hop): the first broker, and the last of all, logging `needle` after the
    crossing (`what` they did)."""
    seen = broker_lines(kafka, crossed, needle)
    every = len(seen) == len(kafka.node_list)
    return [
        (min(seen.values(), default=None), f"the first broker {what}"),
        (max(seen.values()) if every else None, f"every broker {what}"),
    ]


def plugin_hops(kafka, crossed: float) -> list[tuple[float | None, str]]:
    """The Strimzi plugin's checks (each broker's own schedule) that saw the crossing."""
    return first_and_every_broker(kafka, crossed, PLUGIN_CHANGE, "checked and saw it (plugin)")


def broker_quota_hops(kafka, crossed: float) -> list[tuple[float | None, str]]:
    """The brokers applying the enforcer's first quota change after the crossing."""
    return first_and_every_broker(kafka, crossed, QUOTA_CHANGE, "applied the quotas")


def first_new_throttle(producers: Iterable, crossed_monotonic: float) -> float | None:
    """Monotonic moment of the first throttle reported after the crossing to a producer that had
    none in the 10 s before it (librdkafka's throttle callback, the Java client's log)."""
    moments = [
        at
        for p in producers
        if not any(crossed_monotonic - 10 <= t < crossed_monotonic for t, _ in p.log.throttles)
        for at, _ in p.log.throttles
        if at >= crossed_monotonic
    ]
    return min(moments, default=None)
