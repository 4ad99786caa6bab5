"""Confirm a throttle factor with Prometheus before throttling further (optional).

An alert's annotation is as old as the rule evaluation that produced it; an instant query of
`kafka_volume_quota_throttle_factor` is evaluated now. When the enforcer is about to lower a
cluster's factor it asks Prometheus and uses that fresher value; if Prometheus cannot answer, the
alert's factor stands (protecting the disk wins).
"""

from __future__ import annotations

import logging
import math

import requests

from kvq.settings.redaction import mask_url_credentials

METRIC = "kafka_volume_quota_throttle_factor"
log = logging.getLogger("kvq.enforcer")


class PrometheusFactor:
    """Instant queries of the lowest throttle factor of a cluster."""

    def __init__(
        self, url: str, timeout_s: float = 5.0, session: requests.Session | None = None
    ) -> None:
        self.url = url.rstrip("/")
        self.shown_url = mask_url_credentials(self.url)
        """What the log may say of `url`: its credentials masked."""
        self.timeout_s = timeout_s
        self.session = session or requests.Session()

    @staticmethod
    def query_for(cluster: str) -> str:
        escaped = cluster.replace("\\", "\\\\").replace('"', '\\"')
        return f'min({METRIC}{{cluster="{escaped}"}})'

    def current(self, cluster: str) -> float | None:
        """The factor Prometheus sees now, or None (no series, error, bad answer)."""
        try:
            response = self.session.get(
                f"{self.url}/api/v1/query",
                params={"query": self.query_for(cluster)},
                timeout=self.timeout_s,
            )
            body = response.json()
        except (requests.RequestException, ValueError) as exc:
            log.warning("cluster %s: Prometheus at %s not usable: %s", cluster, self.shown_url, exc)
            return None
        if response.status_code != 200 or body.get("status") != "success":
            log.warning(
                "cluster %s: Prometheus answered %s: %s",
                cluster,
                response.status_code,
                body.get("error", body),
            )
            return None
        result = (body.get("data") or {}).get("result") or []
        try:
            value = float(result[0]["value"][1])
        except (IndexError, KeyError, TypeError, ValueError):
            log.warning("cluster %s: Prometheus has no %s series", cluster, METRIC)
            return None
        if not math.isfinite(value) or not 0.0 <= value <= 1.0:
            log.warning("cluster %s: Prometheus factor %r is out of 0..1; ignored", cluster, value)
            return None
        return value


def confirmed(
    cluster: str, alert_factor: float, applied: float, prometheus: PrometheusFactor | None
) -> float:
    """The factor to apply: Prometheus' current value when lowering the factor, if it has one."""
    if prometheus is None or alert_factor >= applied:
        return alert_factor
    value = prometheus.current(cluster)
    if value is None:
        return alert_factor
    if value != alert_factor:
        log.info(
            "cluster %s: alert says factor %s, Prometheus now says %s; using %s",
            cluster,
            alert_factor,
            value,
            value,
        )
    return value
