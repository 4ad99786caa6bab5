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
series (Prometheus scrapes it every second; the exporters' /metrics without Prometheus). Producers
wait out whatever throttle time Kafka handed them before the restore, so each second here is a
second sooner back at their rate. A read of 1 does not forget the alerts: it stands in for their
factor (`restored_early`) while the reads every `every` say 1 and no alert was sent since. A
factor back below 1 within the rule's keep_firing_for keeps the same alert firing, and
Alertmanager, seeing nothing change, would not notify it again before its repeat_interval: so a
read below 1, or none, throttles at the held alerts' factor again at once, and a new step's alert
holds as it comes. A read that gets no answer waits `after` for the next (Prometheus down: the
loop is not held up every second).
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
        self._read_1: dict[str, tuple[str, float]] = {}
        """Per cluster restored early: when the last alert it held then was sent, and when the
        factor first read 1 for it (monotonic)."""

    def restored_early(self, cluster: str) -> bool:
        """Whether the factor read 1 stands in for the cluster's firing alerts: none was sent
        since that read."""
        covered = self._read_1.get(cluster)
        if covered is None:
            return False
        last = self.alerts.last_sent(cluster, except_fingerprint=FINGERPRINT)
        return last is not None and last <= covered[0]

    def step(self) -> set[str]:
        """Check each cluster due; returns those whose target changed (alerts forgotten, a
        restore before the resolution, or a throttle again)."""
        return {name for name in self.clusters if self._step(name)}

    def _step(self, cluster: str) -> bool:
        now = self._monotonic()
        if now < self._due_at[cluster]:
            return False
        if self.every is None:
            return self._step_lost(cluster, now)
        return self._step_quick(cluster, now)

    def _step_lost(self, cluster: str, now: float) -> bool:
        """Every `after` while Alertmanager is silent about the alerts held: forget them at 1."""
        last_sent = self.alerts.unrepeated(cluster, self.after, except_fingerprint=FINGERPRINT)
        if last_sent is None:
            return False  # nothing held, or a resolution may still be on its way
        self._due_at[cluster] = now + self.after.total_seconds()
        factor, source = read_factor(self.sources, self.clusters[cluster])
        if factor is None or factor < 1.0:
            return False
        return self._forget_lost(cluster, last_sent, source, factor)

    def _step_quick(self, cluster: str, now: float) -> bool:
        """Every `every` while alerts are held: 1 stands in for them, and forgets them once it
        has for `after` with no resolution; below 1 or no answer, their factor again."""
        last_sent = self.alerts.last_sent(cluster, except_fingerprint=FINGERPRINT)
        if last_sent is None:
            self._read_1.pop(cluster, None)  # resolved: nothing to stand in for
            return False
        factor, source = read_factor(self.sources, self.clusters[cluster])
        wait = self.after if factor is None or self.every is None else self.every
        self._due_at[cluster] = now + wait.total_seconds()
        if factor is None or factor < 1.0:
            return self._throttle_again(cluster, source, factor)
        covered = self._read_1.get(cluster)
        if covered is None or covered[0] != last_sent:
            self._read_1[cluster] = (last_sent, now if covered is None else covered[1])
            if covered is None:
                log.info(
                    "cluster %s: %s says factor %s: restoring before the alert's resolution comes",
                    cluster,
                    source,
                    factor,
                )
            return True
        if now - covered[1] < self.after.total_seconds():
            return False
        del self._read_1[cluster]
        return self._forget_lost(cluster, last_sent, source, factor)

    def _throttle_again(self, cluster: str, source: str | None, factor: float | None) -> bool:
        """A factor below 1 (or none) after a restore before the resolution: the held alerts'
        factor stands again. Whether the target changed."""
        if self._read_1.pop(cluster, None) is None:
            return False
        log.warning(
            "cluster %s: %s says factor %s before the alert's resolution came: throttling again",
            cluster,
            source or "no source",
            factor,
        )
        return True

    def _forget_lost(self, cluster: str, last_sent: str, source: str | None, factor: float) -> bool:
        """Forget the alerts last sent by `last_sent`: their resolution never came."""
        forgotten = self.alerts.forget(cluster, last_sent, except_fingerprint=FINGERPRINT)
        if forgotten:
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
