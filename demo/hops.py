"""Where a throttle's seconds go: when each hop of the loop passed it on, read after a run.

    exporter   the poll that saw the crossing (its log: `poll ok ... factor 0.0`)
    scrape     the first scrape carrying that factor (the sample's timestamp in Prometheus)
    rule       the evaluation that made KafkaVolumeQuotaThrottle fire (ALERTS' first sample)
    received   Alertmanager received the firing alert from Prometheus (its debug log)
    notify     Alertmanager flushed the alert's group to the enforcer's webhook (its debug log)
    enforcer   the enforcer set the throttled quotas, altered and verified (its log)
    producers  the first throttle a broker reported to a producer not throttled before the
               crossing (librdkafka's throttle callback): a broker enforcing the new quota

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


def first_new_throttle(producers: Iterable, crossed_monotonic: float) -> float | None:
    """Monotonic moment of the first throttle reported after the crossing to a producer that had
    none in the 10 s before it (librdkafka's throttle callback; the Java tool reports none)."""
    moments = [
        at
        for p in producers
        if not any(crossed_monotonic - 10 <= t < crossed_monotonic for t, _ in p.log.throttles)
        for at, _ in p.log.throttles
        if at >= crossed_monotonic
    ]
    return min(moments, default=None)
