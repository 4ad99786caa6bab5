"""Firing throttle alerts whose resolution never came: the factor read again, the throttle lifted.

Alertmanager notifies a group's resolution only if it notified the group firing: its notification
log says what it sent. An Alertmanager replaced with its storage lost (a pod rescheduled without a
persistent volume, the Prometheus Operator's default) that first hears of a throttle alert after
Prometheus resolved it, or between hearing it firing and its first flush, never tells the enforcer
that the alert resolved; neither does a route to the enforcer removed while an alert fired. The
enforcer would hold the throttle, producers slowed with the disk long freed, until
kvq.enforcer.alert.expiry (12 h).

So every `after` (kvq.enforcer.resolution.check.after), a cluster holding firing alerts that
Alertmanager has not sent for that long (not the fail-safe's own, which it refreshes) has its
factor read where the fail-safe reads it (Prometheus, else the exporters' /metrics). A factor of 1
means the throttle's reason is gone, as a resolution would have said: the alerts held until then
are forgotten and the quotas restored. A factor below 1, or no answer, keeps them (protecting the
disk wins), and they are asked about again `after` later. An alert that arrives while the factor
is read is kept: only the alerts last sent before the question are forgotten.

The same read restores sooner than any resolution: every `every` (kvq.enforcer.restore.check.
interval) while a cluster holds firing alerts, whenever they were sent. The resolution takes a
second or two after the exporter publishes factor 1: the rule's next evaluation, its
`keep_firing_for` (one more, so that a step never reaches the enforcer as nothing firing) and
Alertmanager's group_interval. The factor read where the fail-safe reads it is the exporter's own
series (Prometheus scrapes it every second; the exporters' /metrics without Prometheus): at 1 the
throttle's reason is gone, and the resolution that follows finds nothing held. Producers wait out
whatever throttle time Kafka handed them before the restore, so each second here is a second
sooner back at their rate. A read that gets no answer waits `after` for the next (Prometheus
down: the loop is not held up every second).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import timedelta

from enforcer.failsafe import FINGERPRINT, FactorSource, read_factor
from enforcer.journal import FiringAlerts
from enforcer.metrics import EnforcerMetrics
from kvq.contract.cluster_identity import ClusterIdentity

log = logging.getLogger("kvq.enforcer")
NO_TIME = timedelta(0)


class LostResolutions:
    """Per cluster, when its unrepeated firing alerts were last checked against the factor."""

    def __init__(
        self,
        clusters: Iterable[ClusterIdentity],
        alerts: FiringAlerts,
        sources: Sequence[FactorSource],
        after: timedelta,
        metrics: EnforcerMetrics,
        monotonic: Callable[[], float] = time.monotonic,
        every: timedelta | None = None,
    ) -> None:
        self.clusters = {c.name: c for c in clusters}
        self.alerts = alerts
        self.sources = list(sources)
        self.after = after
        """How long Alertmanager's silence about a cluster's firing alerts makes them lost."""
        self.every = every or None
        """How often the factor is read while alerts are held, lost or not (None: only lost)."""
        self.metrics = metrics
        self._monotonic = monotonic
        self._due_at = {name: -float("inf") for name in self.clusters}

    def step(self) -> set[str]:
        """Check each cluster due; returns those whose firing alerts were forgotten (their
        quotas must be restored)."""
        return {name for name in self.clusters if self._step(name)}

    def _step(self, cluster: str) -> bool:
        now = self._monotonic()
        if now < self._due_at[cluster]:
            return False
        lost = self.alerts.unrepeated(cluster, self.after, except_fingerprint=FINGERPRINT)
        last_sent = lost
        if last_sent is None and self.every is not None:
            # Any alert held counts, however recently sent: the quick read before the resolution.
            last_sent = self.alerts.unrepeated(cluster, NO_TIME, except_fingerprint=FINGERPRINT)
        if last_sent is None:
            return False  # nothing held, or a resolution may still be on its way
        factor, source = read_factor(self.sources, self.clusters[cluster])
        wait = self.every if self.every is not None and factor is not None else self.after
        self._due_at[cluster] = now + wait.total_seconds()
        if factor is None or factor < 1.0:
            return False
        forgotten = self.alerts.forget(cluster, last_sent, except_fingerprint=FINGERPRINT)
        if forgotten and lost is None:
            log.info(
                "cluster %s: %s says factor %s: restoring before the alert's resolution comes",
                cluster,
                source,
                factor,
            )
        elif forgotten:
            self.metrics.lost_resolutions.labels(cluster).inc(forgotten)
            log.warning(
                "cluster %s: no resolution came for %d firing alert(s) last sent at %s, and %s "
                "says factor %s: forgetting them and restoring (a replaced Alertmanager does not "
                "notify the resolution of an alert it never notified firing)",
                cluster,
                forgotten,
                last_sent,
                source,
                factor,
            )
        return forgotten > 0
