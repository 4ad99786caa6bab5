"""Confirm a throttle factor with Prometheus before throttling further (optional).

An alert's annotation is as old as the rule evaluation that produced it; an instant query of
`kafka_volume_quota_throttle_factor` is evaluated now. When the enforcer is about to lower a
cluster's factor it asks Prometheus and uses that fresher value; if Prometheus cannot answer, the
alert's factor stands (protecting the disk wins).
"""

from __future__ import annotations

import logging
import math
from datetime import datetime

import requests

from kvq.contract.cluster_identity import ClusterIdentity
from kvq.settings.redaction import mask_url_credentials

METRIC = "kafka_volume_quota_throttle_factor"
log = logging.getLogger("kvq.enforcer")


class PrometheusFactor:
    """Instant queries of the lowest throttle factor of a cluster (named as its series and alerts
    name it: `ClusterIdentity`)."""

    name = "Prometheus"

    def __init__(
        self,
        url: str,
        timeout_s: float = 5.0,
        session: requests.Session | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.shown_url = mask_url_credentials(self.url)
        """What the log may say of `url`: its credentials masked."""
        self.timeout_s = timeout_s
        self.session = session or requests.Session()

    @staticmethod
    def query_for(cluster: ClusterIdentity) -> str:
        return f"min({METRIC}{{{_matcher(cluster)}}})"

    @staticmethod
    def throttling_query(cluster: ClusterIdentity, alert_name: str) -> str:
        """Non-empty while the throttle alert fires for `cluster` or its factor is below 1."""
        alert = f"alertname={_promql_string(alert_name)},{_matcher(cluster)}"
        return (
            f'count(ALERTS{{{alert},alertstate="firing"}}) '
            f"or {PrometheusFactor.query_for(cluster)} < 1"
        )

    def current(self, cluster: ClusterIdentity) -> float | None:
        """The factor Prometheus sees now, or None (no series, error, bad answer)."""
        result = self._instant(cluster.name, self.query_for(cluster))
        if result is None:
            return None
        try:
            value = float(result[0]["value"][1])
        except (IndexError, KeyError, TypeError, ValueError):
            log.warning("cluster %s: Prometheus has no %s series", cluster.name, METRIC)
            return None
        if not math.isfinite(value) or not 0.0 <= value <= 1.0:
            log.warning(
                "cluster %s: Prometheus factor %r is out of 0..1; ignored", cluster.name, value
            )
            return None
        return value

    def throttling(self, cluster: ClusterIdentity, alert_name: str) -> bool | None:
        """Whether Prometheus has `alert_name` firing for `cluster` now, or the cluster's factor
        below 1; None when Prometheus cannot answer."""
        result = self._instant(cluster.name, self.throttling_query(cluster, alert_name))
        return None if result is None else len(result) > 0

    def instant(self, cluster: str, query: str, at: datetime | None = None) -> list | None:
        """The result vector of an instant query (evaluated `at`, default now); None (logged)
        when Prometheus cannot answer."""
        return self._instant(cluster, query, at)

    def _instant(self, cluster: str, query: str, at: datetime | None = None) -> list | None:
        """The result vector of an instant query; None (logged) when there is none."""
        params = {"query": query}
        if at is not None:
            params["time"] = f"{at.timestamp():.3f}"
        try:
            response = self.session.get(
                f"{self.url}/api/v1/query", params=params, timeout=self.timeout_s
            )
            body = response.json()
        except (requests.RequestException, ValueError) as exc:
            log.warning("cluster %s: Prometheus at %s not usable: %s", cluster, self.shown_url, exc)
            return None
        if not isinstance(body, dict):
            body = {"error": f"not a JSON object: {str(body)[:60]}"}
        if response.status_code != 200 or body.get("status") != "success":
            log.warning(
                "cluster %s: Prometheus answered %s: %s",
                cluster,
                response.status_code,
                body.get("error", body),
            )
            return None
        result = (body.get("data") or {}).get("result")
        if not isinstance(result, list):
            log.warning("cluster %s: Prometheus answered no vector: %.60s", cluster, body)
            return None
        return result


def _promql_string(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def _matcher(cluster: ClusterIdentity) -> str:
    """The PromQL matcher of the cluster's series and alerts: `label="name"`."""
    return f"{cluster.label}={_promql_string(cluster.name)}"


def factor_to_apply(
    cluster: ClusterIdentity,
    alert_factor: float,
    applied: float,
    prometheus: PrometheusFactor | None,
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
            cluster.name,
            alert_factor,
            value,
            value,
        )
    return value
