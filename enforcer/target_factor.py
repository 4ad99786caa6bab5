"""From webhook alerts to the target throttle factor of each cluster.

Alertmanager sends, per alert group (`groupKey`), every alert of the group each time. The firing
throttle alerts of a group therefore replace what that group said before (or are merged with it
when Alertmanager truncated the list). A cluster's target is the lowest factor among its firing
alerts over all groups, 1.0 when none fires.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from enforcer.webhook_payload import PayloadError, WebhookPayload, quoted
from kvq.model.throttle_factor_policy import UNTHROTTLED

FACTOR_ANNOTATION = "throttle_factor"


@dataclass(frozen=True, slots=True)
class ThrottleAlert:
    """One throttle alert of a managed cluster; factor is None once resolved."""

    cluster: str
    fingerprint: str
    factor: float | None
    starts_at: datetime
    """When the alert's episode started (Alertmanager may move it earlier while it fires)."""
    ends_at: datetime | None = None
    """When a resolved alert's episode ended; for a firing one None (or, from some Alertmanager
    versions, a time in the future)."""

    @property
    def firing(self) -> bool:
        return self.factor is not None

    @property
    def key(self) -> tuple[str, str]:
        return (self.cluster, self.fingerprint)


@dataclass(frozen=True, slots=True)
class Extracted:
    throttle: tuple[ThrottleAlert, ...]
    ignored: int
    """Alerts of other names or of clusters this enforcer does not manage."""
    heartbeats: tuple[str, ...] = ()
    """Managed clusters whose heartbeat alert fires (failsafe.py)."""


def extract(
    payload: WebhookPayload,
    alert_name: str,
    clusters: Iterable[str],
    cluster_label: str,
    heartbeat_name: str | None = None,
) -> Extracted:
    """The throttle alerts of managed clusters, named by their label `cluster_label`
    (kvq.cluster.label), and the clusters whose heartbeat alert (`heartbeat_name`) fires;
    raises PayloadError for a malformed throttle alert."""
    managed = set(clusters)
    found: list[ThrottleAlert] = []
    heartbeats: list[str] = []
    ignored = 0
    for index, alert in enumerate(payload.alerts):
        if heartbeat_name is not None and alert.name == heartbeat_name:
            cluster = alert.labels.get(cluster_label)
            if alert.firing and cluster in managed:
                heartbeats.append(cluster)
            else:
                ignored += 1
            continue
        if alert.name != alert_name:
            ignored += 1
            continue
        path = f"$.alerts[{index}]"
        cluster = alert.labels.get(cluster_label)
        if not cluster:
            raise PayloadError(
                f"{path}.labels.{cluster_label} is missing: alert {alert_name} must name the "
                f"cluster it throttles (one of: {', '.join(sorted(managed))}) in the label "
                "kvq.cluster.label names"
            )
        if cluster not in managed:
            ignored += 1
            continue
        factor = (
            parse_factor(alert.annotations.get(FACTOR_ANNOTATION), path) if alert.firing else None
        )
        found.append(
            ThrottleAlert(cluster, alert.fingerprint, factor, alert.starts_at, alert.ends_at)
        )
    return Extracted(tuple(found), ignored, tuple(heartbeats))


# What Prometheus' `{{ $value }}` prints for 0..1 (Go's %v: "0", "0.25", "1e-05"), nothing else:
# Python's float() would also take "0.0_1", " 0.5", "nan" or non-ASCII digits.
PLAIN_DECIMAL = re.compile(r"[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?", re.ASCII)


def parse_factor(text: str | None, path: str) -> float:
    where = f"{path}.annotations.{FACTOR_ANNOTATION}"
    if text is None:
        raise PayloadError(f"{where} is missing: a firing throttle alert needs a factor 0..1")
    if not PLAIN_DECIMAL.fullmatch(text):
        raise PayloadError(
            f"{where}={quoted(text)} is not a plain decimal number; allowed: 0.0 to 1.0"
        )
    value = float(text)
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise PayloadError(f"{where}={quoted(text)} is out of range; allowed: 0.0 to 1.0")
    return value


def next_group_state(
    previous: Mapping[tuple[str, str], float],
    alerts: Iterable[ThrottleAlert],
    truncated: bool,
    stale: Collection[tuple[str, str]] = (),
) -> dict[tuple[str, str], float]:
    """The group's firing alerts, (cluster, fingerprint) -> factor, after this notification.

    A complete notification replaces the group's state; a truncated one only adds its firing
    alerts and removes its resolved ones (unlisted alerts may still fire). A `stale` alert (one
    the enforcer already heard newer news of, see alert_episodes.py) keeps its previous state.
    """
    state = dict(previous) if truncated else {}
    for alert in alerts:
        key = alert.key
        if key in stale:
            if key in previous:
                state[key] = previous[key]
        elif alert.factor is not None:  # firing
            state[key] = alert.factor
        else:
            state.pop(key, None)
    return state


def target_factor(firing_factors: Iterable[float]) -> float:
    """The lowest firing factor, or UNTHROTTLED when none fires."""
    return min(firing_factors, default=UNTHROTTLED)
