"""The enforcer without HTTP: alerts in, per-cluster targets, applies, reconciliation, status."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from enforcer.applier import Applier, ApplyError, ApplyResult
from enforcer.journal import Journal
from enforcer.metrics import EnforcerMetrics
from enforcer.prometheus_check import PrometheusFactor, confirmed
from enforcer.quota_plan import UNLIMITED
from enforcer.target_factor import extract, next_group_state, target_factor
from enforcer.webhook_payload import WebhookPayload

log = logging.getLogger("kvq.enforcer")


@dataclass(frozen=True, slots=True)
class WebhookOutcome:
    results: dict[str, ApplyResult]
    ignored: int

    @property
    def outcome(self) -> str:
        if not self.results:
            return "ignored"
        if all(r.dry_run for r in self.results.values()):
            return "dry_run"
        return "applied"

    def to_json(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome,
            "ignored_alerts": self.ignored,
            "clusters": {
                name: {
                    "factor": r.factor,
                    "changes": [c.describe() for c in r.changes],
                    "dry_run": r.dry_run,
                    "drift": len(r.drift),
                }
                for name, r in self.results.items()
            },
        }


class Enforcer:
    """Routes throttle alerts to the appliers of the clusters they name."""

    def __init__(
        self,
        appliers: Mapping[str, Applier],
        journal: Journal,
        metrics: EnforcerMetrics,
        alert_name: str = "KafkaVolumeQuotaThrottle",
        prometheus: PrometheusFactor | None = None,
        alert_expiry: timedelta = timedelta(hours=12),
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.alert_expiry = alert_expiry
        self._clock = clock
        self.appliers = dict(appliers)
        self.journal = journal
        self.metrics = metrics
        self.alert_name = alert_name
        self.prometheus = prometheus
        self._alerts_lock = threading.Lock()
        for cluster in self.appliers:  # what the journal knows, until the first apply
            episode = journal.episode(cluster)
            metrics.target_factor.labels(cluster).set(self.target(cluster))
            metrics.applied_factor.labels(cluster).set(self.applied(cluster))
            metrics.drift.labels(cluster).set(len(episode.drifted()) if episode else 0)

    def handle(self, payload: WebhookPayload) -> WebhookOutcome:
        """Record the group's firing alerts, then apply every affected cluster's target.

        Raises PayloadError (nothing recorded) or ApplyError (alerts recorded; retry applies).
        """
        found = extract(payload, self.alert_name, self.appliers)
        with self._alerts_lock:
            previous = self.journal.group_state(payload.group_key)
            state = next_group_state(previous, found.throttle, payload.truncated_alerts > 0)
            if state or previous:
                self.journal.replace_group(payload.group_key, state)  # also: last seen = now
        affected = (
            {a.cluster for a in found.throttle} | {c for c, _ in previous} | {c for c, _ in state}
        )
        if payload.truncated_alerts:
            log.warning(
                "group %s: Alertmanager left out %d alert(s); unlisted firing alerts are kept",
                payload.group_key,
                payload.truncated_alerts,
            )
        results, errors = {}, []
        for cluster in sorted(affected):
            try:
                results[cluster] = self.enforce(cluster)
            except ApplyError as exc:
                errors.append(f"cluster {cluster}: {exc}")
        if errors:
            raise ApplyError("; ".join(errors))
        return WebhookOutcome(results, found.ignored)

    def target(self, cluster: str) -> float:
        return target_factor(self.journal.firing_factors(cluster))

    def applied(self, cluster: str) -> float:
        episode = self.journal.episode(cluster)
        if episode is None or not episode.active:
            return 1.0
        return 1.0 if episode.applied is None else episode.applied

    def enforce(self, cluster: str) -> ApplyResult:
        """Apply the cluster's current target (confirmed with Prometheus when lowering it)."""
        applier = self.appliers[cluster]
        with applier.lock:  # a concurrent webhook's newer target is read after this apply
            target = self.target(cluster)
            target = confirmed(cluster, target, self.applied(cluster), self.prometheus)
            self.metrics.target_factor.labels(cluster).set(target)
            result = applier.apply(target)
        episode = self.journal.episode(cluster)
        drift = len(episode.drifted()) if episode else 0
        self.metrics.drift.labels(cluster).set(drift)
        return result

    def reconcile(self) -> dict[str, str]:
        """Finish or undo unfinished work: apply the target of every cluster that needs it.

        Returns the errors per cluster (empty when all is in order).
        """
        for group, cluster, fingerprint, seen in self.journal.expire_alerts(
            self._clock() - self.alert_expiry
        ):
            log.warning(
                "cluster %s: forgetting firing alert %s of group %s: Alertmanager has not sent "
                "it since %s (kvq.enforcer.alert.expiry); check that send_resolved is on and the "
                "route still reaches this enforcer",
                cluster,
                fingerprint,
                group,
                seen,
            )
        errors = {}
        for cluster, applier in self.appliers.items():
            episode = self.journal.episode(cluster)
            unfinished = episode is not None and episode.active
            if applier.dry_run and not applier.last_error:
                continue
            if unfinished or self.target(cluster) < 1.0 or applier.last_error:
                try:
                    result = self.enforce(cluster)
                    log.info("cluster %s: reconciled at factor %s", cluster, result.factor)
                except ApplyError as exc:
                    errors[cluster] = str(exc)
        return errors

    def status(self) -> dict[str, Any]:
        return {"clusters": {name: self._cluster_status(name) for name in self.appliers}}

    def _cluster_status(self, cluster: str) -> dict[str, Any]:
        applier = self.appliers[cluster]
        episode = self.journal.episode(cluster)
        out: dict[str, Any] = {
            "target_factor": self.target(cluster),
            "applied_factor": self.applied(cluster),
            "firing_alerts": len(self.journal.firing_factors(cluster)),
            "dry_run": applier.dry_run,
            "last_error": applier.last_error,
            "episode": None,
            "entities": [],
            "drift": 0,
        }
        if episode is None:
            return out
        out["episode"] = {
            "state": episode.state,
            "started_at": episode.started_at,
            "updated_at": episode.updated_at,
            "target": episode.target,
            "applied": episode.applied,
        }
        rows = []
        for (entity, key), record in sorted(
            episode.pairs.items(), key=lambda item: (item[0][0].precedence, item[0][0].label())
        ):
            current = record.drift if record.drifted else record.current_ours
            if current == record.original and not record.drifted:
                continue
            rows.append(
                {
                    "entity": entity.to_dict(),
                    "label": entity.label(),
                    "key": key,
                    "original": record.original,
                    "current": current,
                    "unlimited_override": current == UNLIMITED,
                    "drift": record.drifted,
                }
            )
        out["entities"] = rows
        out["drift"] = sum(1 for r in rows if r["drift"])
        return out
