"""The fail-safe: the enforcer reads the throttle factor itself while the alert path is silent.

A throttle normally reaches the enforcer as an alert: Prometheus scrapes the exporters and
evaluates the rules, Alertmanager posts the webhook. If Prometheus, the rules or Alertmanager are
down when a volume crosses its limit, no webhook comes and nothing throttles. So the shipped rules
also fire a heartbeat per cluster, `KafkaVolumeQuotaHeartbeat` (the Watchdog pattern of
kube-prometheus), always, while Prometheus has the cluster's throttle factor; routed to the
enforcer and re-sent by Alertmanager every few seconds, each one says that the whole path works
for that cluster.

When none has come for `kvq.enforcer.failsafe.after`, the cluster is in fail-safe: every
`kvq.enforcer.failsafe.interval` the enforcer reads the factor itself, from Prometheus' HTTP API
(`kvq.enforcer.prometheus.url`) if it answers, else from the exporters' `/metrics`
(`kvq.enforcer.failsafe.exporter.urls`, the lowest factor any of them publishes), and holds it as
a firing alert of its own (journaled like Alertmanager's, so a restart keeps it). Once heartbeats
come again it stands down STAND_DOWN_AFTERS x `after` later, time for Alertmanager to deliver a
throttle alert that is still firing, and the alerts alone decide again: a restore follows the
alert as usual.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import requests
from prometheus_client.parser import text_string_to_metric_families

from enforcer.journal import FiringAlerts
from enforcer.metrics import EnforcerMetrics
from enforcer.prometheus_check import METRIC
from kvq.contract.cluster_identity import ClusterIdentity
from kvq.settings.redaction import mask_url_credentials

log = logging.getLogger("kvq.enforcer")

STAND_DOWN_AFTERS = 2.0
"""How long the fail-safe holds its factor after heartbeats came back, in `after`s (a minute at
the default): time for Alertmanager to deliver a throttle alert that is still firing."""
FINGERPRINT = "kvq-failsafe"
"""The fingerprint of the fail-safe's own alert in the journal."""


def group_key(cluster: str) -> str:
    """The journal's alert group holding a cluster's fail-safe factor."""
    return f"{FINGERPRINT}/{cluster}"


class FactorSource(Protocol):
    """Where the fail-safe reads a cluster's throttle factor."""

    name: str

    def current(self, cluster: ClusterIdentity) -> float | None:
        """The lowest factor now, or None when it cannot say."""
        ...


class ExporterFactor:
    """The lowest `kafka_volume_quota_throttle_factor` of a cluster on the exporters' /metrics."""

    name = "the exporters' /metrics"

    def __init__(
        self,
        urls: Mapping[str, Sequence[str]],
        timeout_s: float = 3.0,
        session: requests.Session | None = None,
    ) -> None:
        """`urls`: per cluster name, its exporters' /metrics URLs."""
        self.urls = {cluster: list(found) for cluster, found in urls.items()}
        self.timeout_s = timeout_s
        self.session = session or requests.Session()

    def current(self, cluster: ClusterIdentity) -> float | None:
        urls = self.urls.get(cluster.name, [])
        factors = [f for url in urls if (f := self._read(url, cluster)) is not None]
        return min(factors) if factors else None

    def _read(self, url: str, cluster: ClusterIdentity) -> float | None:
        try:
            response = self.session.get(url, timeout=self.timeout_s)
            response.raise_for_status()
            families = list(text_string_to_metric_families(response.text))
        except (requests.RequestException, ValueError) as exc:
            log.warning(
                "cluster %s: exporter at %s not usable: %s",
                cluster.name,
                mask_url_credentials(url),
                exc,
            )
            return None
        values = [
            sample.value
            for family in families
            if family.name == METRIC
            for sample in family.samples
            if sample.name == METRIC and sample.labels.get(cluster.label) == cluster.name
        ]
        usable = [v for v in values if math.isfinite(v) and 0.0 <= v <= 1.0]
        return min(usable) if usable else None


def read_factor(
    sources: Sequence[FactorSource], cluster: ClusterIdentity
) -> tuple[float | None, str | None]:
    """The factor of the first of `sources` that answers, and its name (None, None: none)."""
    for source in sources:
        factor = source.current(cluster)
        if factor is not None:
            return factor, source.name
    return None, None


@dataclass
class AlertPath:
    """What the fail-safe knows of one cluster's alert path."""

    heard_at: float
    """Monotonic time of the last heartbeat (the start, before the first)."""
    silent: bool = False
    """No heartbeat for `after`: the fail-safe reads the factor itself."""
    back_since: float | None = None
    """First heartbeat after a silence (the stand-down runs from it)."""
    polled_at: float = -math.inf
    answered: bool = False
    """A read finished since the silence began (until then /healthz says it is reading)."""
    factor: float | None = None
    """The factor last read (None: no source answered, or not in fail-safe)."""
    source: str | None = None


class FailSafe:
    """Heartbeats per cluster, and the factor read while they are missing (see the module)."""

    def __init__(
        self,
        clusters: Iterable[ClusterIdentity],
        alerts: FiringAlerts,
        metrics: EnforcerMetrics,
        after_s: float,
        interval_s: float,
        sources: Sequence[FactorSource],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.clusters = {c.name: c for c in clusters}
        self.alerts = alerts
        self.metrics = metrics
        self.after_s = after_s
        self.stand_down_s = STAND_DOWN_AFTERS * after_s
        self.interval_s = interval_s
        self.sources = list(sources)
        self._clock = clock
        now = clock()
        self.paths = {name: AlertPath(heard_at=now) for name in self.clusters}
        for name in self.clusters:
            if self._held(name):  # a restart during a silence: held until heartbeats are back
                self.paths[name].back_since = now
            metrics.failsafe_active.labels(name).set(0)
            metrics.failsafe_factor.labels(name).set(1.0)  # nothing read: unthrottled

    def heard(self, cluster: str) -> None:
        """A heartbeat of `cluster` arrived."""
        path = self.paths.get(cluster)
        if path is None:
            return
        path.heard_at = self._clock()
        self.metrics.heartbeats.labels(cluster).inc()
        if path.silent:
            path.silent = False
            path.back_since = path.heard_at
            log.warning(
                "cluster %s: heartbeat back: the alert path works again; the fail-safe stands "
                "down in %.0f s",
                cluster,
                self.stand_down_s,
            )

    def step(self) -> set[str]:
        """Advance every cluster's fail-safe; returns the clusters whose fail-safe factor
        changed (their target must be applied)."""
        return {name for name in self.paths if self._step(name)}

    def _step(self, cluster: str) -> bool:
        path, now = self.paths[cluster], self._clock()
        if not path.silent and now - path.heard_at > self.after_s:
            path.silent, path.back_since, path.polled_at = True, None, -math.inf
            path.answered = False
            log.warning(
                "cluster %s: FAIL-SAFE: no heartbeat alert for %.0f s (Prometheus, the rules or "
                "Alertmanager down, or the route lost); reading the throttle factor from %s",
                cluster,
                now - path.heard_at,
                self._source_names(),
            )
            self.metrics.failsafe_active.labels(cluster).set(1)
        if path.silent:
            return self._poll(cluster, path, now)
        if path.back_since is not None and now - path.back_since >= self.stand_down_s:
            path.back_since, path.factor, path.source = None, None, None
            self.metrics.failsafe_active.labels(cluster).set(0)
            if self._hold(cluster, {}):
                log.warning("cluster %s: fail-safe stood down: the alerts decide again", cluster)
                return True
        return False

    def _poll(self, cluster: str, path: AlertPath, now: float) -> bool:
        if now - path.polled_at < self.interval_s:
            return False
        first = path.polled_at == -math.inf
        path.polled_at = now
        factor, source = self._read(self.clusters[cluster])
        path.answered = True
        if factor is None:
            if first or path.source is not None:
                log.error(
                    "cluster %s: fail-safe: no source answers with the throttle factor; "
                    "keeping what is applied",
                    cluster,
                )
            path.source = None
            return False
        if factor != path.factor or source != path.source:
            log.warning("cluster %s: fail-safe: factor %s from %s", cluster, factor, source)
        path.factor, path.source = factor, source
        self.metrics.failsafe_factor.labels(cluster).set(factor)
        return self._hold(cluster, {(cluster, FINGERPRINT): factor} if factor < 1.0 else {})

    def _hold(self, cluster: str, wanted: dict[tuple[str, str], float]) -> bool:
        """Journal `wanted` as the fail-safe's alerts of `cluster`, refreshed at every poll (the
        alert expiry must not forget it while the silence lasts); whether that changed them."""
        before: dict[tuple[str, str], float] = {}

        def next_state(previous: dict[tuple[str, str], float]) -> dict[tuple[str, str], float]:
            before.update(previous)
            return dict(wanted)

        self.alerts.update_group(group_key(cluster), next_state)
        return before != wanted

    def _source_names(self) -> str:
        return " or ".join(s.name for s in self.sources) or "nowhere (no source configured)"

    def _read(self, cluster: ClusterIdentity) -> tuple[float | None, str | None]:
        return read_factor(self.sources, cluster)

    def _state(self, cluster: str) -> dict[tuple[str, str], float]:
        return self.alerts.group_state(group_key(cluster))

    def _held(self, cluster: str) -> bool:
        """The journal holds a fail-safe factor for `cluster`."""
        return bool(self._state(cluster))

    def problems(self) -> list[str]:
        """One line per cluster in fail-safe, for /healthz."""
        out = []
        for cluster, path in sorted(self.paths.items()):
            if not path.silent:
                continue
            silent_s = self._clock() - path.heard_at
            if not path.answered:  # the first read is under way (a source may take seconds)
                acting = f"reading the throttle factor from {self._source_names()}"
            elif path.source is not None:
                acting = f"acting on factor {path.factor} from {path.source}"
            else:
                acting = "no source answers with the throttle factor"
            out.append(
                f"cluster {cluster}: fail-safe: no heartbeat alert for {silent_s:.0f} s; {acting}"
            )
        return out

    def status(self, cluster: str) -> dict[str, object]:
        path = self.paths[cluster]
        return {
            "active": path.silent or path.back_since is not None and self._held(cluster),
            "heartbeat_age_s": round(self._clock() - path.heard_at, 1),
            "factor": path.factor,
            "source": path.source,
        }
