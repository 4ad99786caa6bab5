"""What an apply that succeeded says: one log line (each value at debug), and its metrics."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from enforcer.apply.cluster_io import ClusterIO
from enforcer.apply.result import ApplyResult
from enforcer.log_lists import first_few
from enforcer.quota_plan import UNLIMITED, Change

log = logging.getLogger("kvq.enforcer")


def report(io: ClusterIO, result: ApplyResult, took: float) -> None:
    """The apply's summary line and its counts; the factor as applied once nothing is left to
    verify."""
    _log_summary(io.name, result, took)
    metrics, cluster = io.metrics, io.name
    metrics.applies.labels(cluster).inc()
    if not result.dry_run:
        metrics.quota_changes.labels(cluster).inc(len(result.changes))
        _report_stand_ins(io, result.changes)
        if not result.settling:
            metrics.applied_factor.labels(cluster).set(result.factor)


def _log_summary(cluster: str, result: ApplyResult, took: float) -> None:
    """One line per apply (each value is logged at debug): at info when it changed
    something, at debug when it only confirmed what Kafka holds (a throttle held in
    place)."""
    if result.idle:
        return
    changed = len(result.changes)
    log.log(
        logging.INFO if changed or result.reverted or result.drift else logging.DEBUG,
        "cluster %s: factor %s %s: %d value(s) %s in %.2f s%s",
        cluster,
        result.factor,
        "validated (dry run)" if result.dry_run else "applied",
        changed,
        "would change" if result.dry_run else "changed",
        took,
        ", verifying again once unanswered requests settle" if result.settling else "",
    )


def _report_stand_ins(io: ClusterIO, done: Iterable[Change]) -> None:
    """One warning per apply naming the values written as UNLIMITED in place of a non-finite
    original (Kafka 4.4+ refuses NaN and infinities; brokers enforce both as no limit), counted."""
    stand_ins = [c for c in done if c.stands_for is not None]
    if stand_ins:
        log.warning(
            "cluster %s: %d original(s) without effect that Kafka 4.4+ refuses to store (NaN, "
            "+inf) written as %s instead, which brokers enforce alike (no limit): %s",
            io.name,
            len(stand_ins),
            f"{UNLIMITED:.0f}",
            first_few(f"{c.entity.label()} {c.key} (was {c.stands_for!r})" for c in stand_ins),
        )
        io.metrics.no_limit_stand_ins.labels(io.name).inc(len(stand_ins))
