"""The Enforcer: alerts in, per-cluster targets, applies, reconciliation, status (no HTTP: that is
webhook_app.py). Each cluster's work is done by its applier, through `ClusterApplier`."""

from __future__ import annotations

import itertools
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from enforcer.alert_episodes import DEFAULT_WINDOW, AlertEpisodes
from enforcer.apply.result import ApplyError, ApplyResult
from enforcer.apply.status import ClusterCondition, ClusterStatus, StartingPoint
from enforcer.failsafe import FailSafe
from enforcer.journal import Journal
from enforcer.lost_resolutions import LostResolutions
from enforcer.metrics import EnforcerMetrics
from enforcer.originals_recovery import RecoveredThrottles
from enforcer.prometheus_check import PrometheusFactor, factor_to_apply
from enforcer.quota_plan import UNLIMITED, same_value
from enforcer.target_factor import (
    ThrottleAlert,
    extract,
    next_group_state,
    target_factor,
)
from enforcer.webhook_payload import WebhookPayload
from kvq.contract.cluster_identity import ClusterIdentity
from kvq.model.throttle_factor_policy import UNTHROTTLED

log = logging.getLogger("kvq.enforcer")

CHECK_SHARE = 0.1
"""The most of the reconcile thread's time the checks of throttles in force may take: a look
that takes long (a DescribeClientQuotas of 20,000 pairs) spaces the next one out."""


@dataclass(frozen=True, slots=True)
class WebhookOutcome:
    results: dict[str, ApplyResult]
    ignored: int
    stale: int = 0
    """Throttle alerts older than what the enforcer already heard (see alert_episodes.py)."""
    heartbeats: int = 0
    """Heartbeat alerts of managed clusters (failsafe.py)."""

    @property
    def outcome(self) -> str:
        if not self.results:
            return "heartbeat" if self.heartbeats else "ignored"
        if all(r.dry_run for r in self.results.values()):
            return "dry_run"
        return "applied"

    def to_json(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome,
            "ignored_alerts": self.ignored,
            "stale_alerts": self.stale,
            "clusters": {
                name: {
                    "factor": r.factor,
                    "changes": [c.describe() for c in r.changes],
                    "dry_run": r.dry_run,
                    "drift": len(r.drift),
                    "reverted": r.reverted,
                    "settling": r.settling,
                }
                for name, r in self.results.items()
            },
        }


@dataclass(slots=True)
class _LastApply:
    """One cluster's last successful apply, for callers that may reuse it (`Enforcer.enforce`)."""

    read_at: int
    """When it read the firing alerts (a number of `Enforcer._moments`)."""
    finished_at: int
    result: ApplyResult


@dataclass(slots=True)
class _ClusterTurn:
    """Enforcer-side state of one cluster: its applies are taken in turn (`lock`)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    alerts_changed_at: int = 0
    """When its firing alerts last changed (a number of `Enforcer._moments`)."""
    last: _LastApply | None = None


def check_delay(interval: float, looked: float) -> float:
    """Seconds from the end of one check of the throttles to the next: `interval`, or longer
    when looking took `looked` s, so that looks take at most CHECK_SHARE of the time (the
    applies a check triggers are not counted)."""
    return max(interval, looked * (1 - CHECK_SHARE) / CHECK_SHARE)


@dataclass
class CheckRound:
    """What one check of the throttles in force did."""

    applied: list[str] = field(default_factory=list)
    """Clusters whose throttle was applied again."""
    looking_s: float = 0.0
    """Seconds spent asking Kafka and comparing (without the applies)."""


class ClusterApplier(Protocol):
    """All the Enforcer asks of one cluster's applier (applier.Applier)."""

    def status(self) -> ClusterStatus:
        """The cluster between two applies (waits for one in progress)."""
        ...

    def condition(self) -> ClusterCondition:
        """What holds the cluster's work up (never waits)."""
        ...

    def starting_point(self) -> StartingPoint:
        """First half of one step of the cluster's work: what the factor to apply is chosen
        from (reads Kafka's copy of the originals once after start)."""
        ...

    def enforce(self, factor: float) -> ApplyResult:
        """Second half of one step of the cluster's work: apply `factor`, atomically."""
        ...

    def throttle_changed(self) -> bool:
        """One look at Kafka: would an apply at the applied factor change something?"""
        ...

    def close(self) -> None: ...


class Enforcer:
    """Routes throttle alerts to the appliers of the clusters they name."""

    def __init__(
        self,
        appliers: Mapping[str, ClusterApplier],
        journal: Journal,
        metrics: EnforcerMetrics,
        cluster_label: str,
        alert_name: str = "KafkaVolumeQuotaThrottle",
        prometheus: PrometheusFactor | None = None,
        alert_expiry: timedelta = timedelta(hours=12),
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        reconcile_interval: float = 30.0,
        stale_window: timedelta = DEFAULT_WINDOW,
        throttle_check_interval: float = 0.0,
        failsafe: FailSafe | None = None,
        heartbeat_name: str | None = None,
        lost_resolutions: LostResolutions | None = None,
    ) -> None:
        """`cluster_label`: the label naming the cluster on the alerts and the series
        (kvq.cluster.label). `throttle_check_interval`: how often (s) Kafka is asked between
        reconcile rounds whether it still holds a throttle in force (0: never)."""
        self.cluster_label = cluster_label
        self.alert_expiry = alert_expiry
        self.reconcile_interval = reconcile_interval
        self.throttle_check_interval = throttle_check_interval
        self.failsafe = failsafe
        """Reads the throttle factor itself while no heartbeat alert comes (failsafe.py)."""
        self.heartbeat_name = heartbeat_name
        self.lost_resolutions = lost_resolutions
        """Lifts a throttle whose resolution never came (lost_resolutions.py)."""
        self._clock = clock
        self.appliers = dict(appliers)
        self.journal = journal
        self.alerts = journal.alerts
        self.alert_episodes = AlertEpisodes(journal, stale_window, clock)
        self.metrics = metrics
        self.alert_name = alert_name
        self.prometheus = prometheus
        self._alerts_lock = threading.Lock()
        self.recovered = RecoveredThrottles(self.alerts, self.appliers)
        self.reconcile_rounds = 0
        self.reconcile_errors: dict[str, str] = {}
        """Per cluster, why the last reconcile round could not finish its work."""
        self._moments = itertools.count(1)
        """Orders alert changes, applies and requests for an apply (next() is atomic)."""
        self._turns = {cluster: _ClusterTurn() for cluster in self.appliers}
        self._timed_steps: dict[str, tuple[str, datetime]] = {}
        """Per cluster, the alert (fingerprint, startsAt) whose step was last timed."""
        for cluster, applier in self.appliers.items():  # what the journal knows, until an apply
            status = applier.status()
            metrics.target_factor.labels(cluster).set(self.target(cluster))
            metrics.applied_factor.labels(cluster).set(status.applied_factor)
            metrics.drift.labels(cluster).set(
                len(status.episode.drifted()) if status.episode else 0
            )

    def handle(self, payload: WebhookPayload) -> WebhookOutcome:
        """Record the group's firing alerts, then apply every affected cluster's target.

        Raises PayloadError (nothing recorded) or ApplyError (alerts recorded; retry applies).
        """
        found = extract(
            payload, self.alert_name, self.appliers, self.cluster_label, self.heartbeat_name
        )
        for cluster in found.heartbeats:
            if self.failsafe is not None:
                self.failsafe.heard(cluster)
        if not found.throttle and not self.alerts.group_state(payload.group_key):
            # heartbeats only (or nothing of ours): no alert state to keep
            return WebhookOutcome({}, found.ignored, heartbeats=len(found.heartbeats))
        truncated = payload.truncated_alerts > 0
        throttling = self._throttling_per_prometheus(found.throttle)
        with self._alerts_lock:
            stale = self.alert_episodes.stale(found.throttle, throttling)
            named = self.alerts.update_group(  # also: last seen = now
                payload.group_key,
                lambda previous: next_group_state(previous, found.throttle, truncated, stale),
            )
        if stale:
            log.warning(
                "group %s: ignored %d alert(s) of episodes already resolved or superseded "
                "(a late or retried notification): %s",
                payload.group_key,
                len(stale),
                ", ".join(f"{cluster}/{fingerprint}" for cluster, fingerprint in sorted(stale)),
            )
        affected = named | {a.cluster for a in found.throttle}
        self.recovered.heard_from(affected)
        self._alerts_changed(affected)
        asked = next(self._moments)
        if payload.truncated_alerts:
            log.warning(
                "group %s: Alertmanager left out %d alert(s); unlisted firing alerts are kept",
                payload.group_key,
                payload.truncated_alerts,
            )
        results, errors = {}, []
        asking = tuple(a for a in found.throttle if a.key not in stale)
        for cluster in sorted(affected):
            try:
                result, reused = self._enforce(cluster, asked)
            except ApplyError as exc:
                errors.append(f"cluster {cluster}: {exc}")
                continue
            results[cluster] = result
            if not reused:
                self._observe_alert_to_enforce(result, asking)
        if errors:
            raise ApplyError("; ".join(errors))
        return WebhookOutcome(results, found.ignored, len(stale), len(found.heartbeats))

    def _observe_alert_to_enforce(
        self, result: ApplyResult, alerts: tuple[ThrottleAlert, ...]
    ) -> None:
        """When this apply changed Kafka's quotas to the factor a firing alert of the webhook
        asks for, the first time it does for that alert (its step): the seconds from the
        alert's startsAt (the latest, if several ask for it) to now, its quotas written and
        verified. A later factor of the same alert (its annotation moved within the two digits
        of its `factor_step` label) was asked for after its startsAt, and is not timed from it.
        Prometheus' clock against the enforcer's (one clock on a host, NTP apart in a
        cluster)."""
        if result.dry_run or not result.changes:
            return
        asking = [a for a in alerts if a.cluster == result.cluster and a.factor == result.factor]
        if not asking:
            return
        step = max(asking, key=lambda a: a.starts_at)
        timed = (step.fingerprint, step.starts_at)
        if self._timed_steps.get(result.cluster) == timed:
            return
        self._timed_steps[result.cluster] = timed
        took = (self._clock() - step.starts_at).total_seconds()
        self.metrics.alert_to_enforce_seconds.labels(result.cluster).observe(max(took, 0.0))

    def _throttling_per_prometheus(self, alerts: tuple[ThrottleAlert, ...]) -> set[str]:
        """Clusters of firing `alerts` about to be ignored as stale for which Prometheus says the
        throttle is on now: the episode is not over (Alertmanager resolved an alert Prometheus
        could not send it, then got it again with its old startsAt). Where Prometheus cannot
        answer, the stale judgement stands."""
        if self.prometheus is None:
            return set()
        throttling = set()
        for cluster in sorted(self.alert_episodes.stale_firings(alerts)):
            answer = self.prometheus.throttling(self.identity(cluster), self.alert_name)
            if answer is None:
                log.warning(
                    "cluster %s: cannot confirm with Prometheus that a firing alert's episode "
                    "is over; ignoring it as stale",
                    cluster,
                )
            elif answer:
                log.warning(
                    "cluster %s: a firing alert of an episode already resolved, but Prometheus "
                    "says the throttle is on: applying it",
                    cluster,
                )
                throttling.add(cluster)
        return throttling

    def identity(self, cluster: str) -> ClusterIdentity:
        """The managed cluster named `cluster` as its alerts and series name it."""
        return ClusterIdentity(cluster, self.cluster_label)

    def target(self, cluster: str) -> float:
        """The lowest firing factor, or 1 while the factor read since stands in for the alerts
        (`LostResolutions.restored_early`)."""
        if self.lost_resolutions is not None and self.lost_resolutions.restored_early(cluster):
            return UNTHROTTLED
        return target_factor(self.alerts.firing_factors(cluster))

    def enforce(self, cluster: str, asked: int | None = None) -> ApplyResult:
        """Apply the cluster's current target (checked with Prometheus when lowering it).

        One read of the firing alerts and (unless cached since the last apply) of the episode.
        `asked`: when the caller asked (a number of `_moments`, taken after it recorded its
        alerts): an apply that read the alerts as they are now and finished after that is
        reused instead of being done again (a webhook and the reconcile loop meeting on a
        cluster; each apply of 20,000 pairs takes seconds). None: always apply.
        """
        return self._enforce(cluster, asked)[0]

    def _enforce(self, cluster: str, asked: int | None) -> tuple[ApplyResult, bool]:
        """`enforce`; and whether the result is that of an apply made for someone else."""
        turn = self._turns[cluster]
        with turn.lock:
            reused = self._reusable(turn, asked)
            if reused is not None:
                return reused, True
            turn.last = None
            applier = self.appliers[cluster]
            start = applier.starting_point()
            # this cluster's turn is taken: a concurrent webhook's newer target is read after
            # this apply
            read_at = next(self._moments)
            result = applier.enforce(self._factor_to_apply(cluster, start))
            turn.last = _LastApply(read_at, next(self._moments), result)
        self.metrics.drift.labels(cluster).set(result.drifted)
        return result, False

    def _factor_to_apply(self, cluster: str, start: StartingPoint) -> float:
        """The cluster's target, from its firing alerts read now: a throttle the applier just
        adopted from Kafka's copy is held first (journaled before the apply acts, so a crash
        during it keeps the hold), and a lower factor is confirmed with Prometheus."""
        self.recovered.hold(cluster, start.adopted)
        self.recovered.release_if_heard(cluster)
        identity, alerted = self.identity(cluster), self.target(cluster)
        target = factor_to_apply(identity, alerted, start.applied, self.prometheus)
        self.metrics.target_factor.labels(cluster).set(target)
        return target

    @staticmethod
    def _reusable(turn: _ClusterTurn, asked: int | None) -> ApplyResult | None:
        """The cluster's last apply, if it answers a request made at `asked`: it succeeded,
        finished after `asked`, read the alerts after they last changed (so with the target
        the caller wants) and has nothing left to verify."""
        last = turn.last
        if asked is None or last is None or last.result.settling or last.result.dry_run:
            return None
        if last.finished_at > asked and last.read_at > turn.alerts_changed_at:
            return last.result
        return None

    def _alerts_changed(self, clusters: Iterable[str]) -> None:
        """The firing alerts of `clusters` changed: no apply before now may be reused."""
        for cluster in clusters:
            if cluster in self._turns:
                self._turns[cluster].alerts_changed_at = next(self._moments)

    def reconcile(self) -> dict[str, str]:
        """Finish or undo unfinished work: apply the target of every cluster that needs it.

        Never raises: every error is logged, counted and returned per cluster ("*" for the
        journal's alert expiry), and the next round tries again.
        """
        errors: dict[str, str] = {}
        try:
            self._expire_alerts()
        except Exception as exc:  # noqa: BLE001 - the loop must survive anything
            log.exception("reconcile: cannot expire old alerts: %s", exc)
            errors["*"] = str(exc)
        asked = next(self._moments)
        for cluster, applier in self.appliers.items():
            try:
                if not self._needs_work(cluster, applier):
                    self.reconcile_errors.pop(cluster, None)
                    continue
                result, reused = self._enforce(cluster, asked)
                # a round that changed something is news; holding a throttle in place (every
                # interval while it lasts), or finding a webhook's apply did the work, is routine
                changed = (result.changes or result.reverted) and not reused
                log.log(
                    logging.INFO if changed else logging.DEBUG,
                    "cluster %s: reconciled at factor %s",
                    cluster,
                    result.factor,
                )
                self.reconcile_errors.pop(cluster, None)
            except ApplyError as exc:
                errors[cluster] = str(exc)
            except Exception as exc:  # noqa: BLE001 - the loop must survive anything
                log.exception("cluster %s: reconcile failed: %s", cluster, exc)
                errors[cluster] = f"{type(exc).__name__}: {exc}"
            if cluster in errors:
                self.reconcile_errors[cluster] = errors[cluster]
                self.metrics.reconcile_failures.labels(cluster).inc()
        if "*" in errors:
            self.reconcile_errors["*"] = errors["*"]
        else:
            self.reconcile_errors.pop("*", None)
        self.reconcile_rounds += 1
        return errors

    def _needs_work(self, cluster: str, applier: ClusterApplier) -> bool:
        status = applier.status()
        if status.condition.dry_run:
            return bool(status.condition.last_error)
        return status.unfinished or self.target(cluster) < UNTHROTTLED

    def _expire_alerts(self) -> None:
        self.alert_episodes.expire(self._clock() - self.alert_expiry)
        expired = self.alerts.expire(self._clock() - self.alert_expiry)
        self._alerts_changed({cluster for _group, cluster, _fingerprint, _seen in expired})
        for group, cluster, fingerprint, seen in expired:
            log.warning(
                "cluster %s: forgetting firing alert %s of group %s: Alertmanager has not sent "
                "it since %s (kvq.enforcer.alert.expiry); check that send_resolved is on and the "
                "route still reaches this enforcer",
                cluster,
                fingerprint,
                group,
                seen,
            )

    def settle_due(self, since: float) -> bool:
        """A request in doubt could no longer land after a moment since `since` (monotonic):
        time to verify again."""
        now = time.monotonic()
        deadlines = [a.condition().settle_deadline for a in self.appliers.values()]
        return any(d is not None and since < d <= now for d in deadlines)

    def check_throttles(self) -> CheckRound:
        """Between reconcile rounds: apply again, at once, the throttle of every cluster where
        Kafka no longer holds it as applied (a reconciler such as Strimzi's User Operator put
        originals back, an operator changed a value, an entity to throttle appeared). Never
        raises (the reconcile round reports failures)."""
        checked = CheckRound()
        for cluster, applier in self.appliers.items():
            try:
                if self.target(cluster) >= UNTHROTTLED:
                    continue
                started = time.monotonic()
                changed = applier.throttle_changed()
                checked.looking_s += time.monotonic() - started
                if changed:
                    checked.applied.append(cluster)
                    self._enforce(cluster, None)
            except ApplyError:
                pass  # logged and counted by the applier; the reconcile round retries
            except Exception as exc:  # noqa: BLE001 - the loop must survive anything
                log.exception("cluster %s: checking the throttle failed: %s", cluster, exc)
        return checked

    def reconcile_forever(self, stop: threading.Event, interval: float, tick: float = 0.5) -> None:
        """The reconcile loop until `stop` is set: one round now, then every `interval` s, and as
        soon as a request in doubt settles (checked every `tick` s); between rounds, a check of
        the throttles in force every `throttle_check_interval` s (`check_throttles`), spaced so
        that it takes at most CHECK_SHARE of the time when a look is slow (20,000 pairs)."""
        next_round = last_round = next_check = 0.0
        checking = self.throttle_check_interval > 0
        while not stop.is_set():
            self.step_failsafe()
            self.step_lost_resolutions()
            now = time.monotonic()
            if now >= next_round or self.settle_due(last_round):
                last_round = now
                self._reconcile_round(interval)
                next_round = time.monotonic() + interval
                next_check = time.monotonic() + self.throttle_check_interval
            elif checking and now >= next_check:
                checked = self.check_throttles()
                delay = check_delay(self.throttle_check_interval, checked.looking_s)
                if checked.applied:  # a reconciler resets entity by entity: look again at once
                    delay = 0.0
                next_check = time.monotonic() + delay
            wake = min(next_round, next_check) if checking else next_round
            stop.wait(min(tick, max(wake - time.monotonic(), 0.0)))

    def step_failsafe(self) -> None:
        """Advance the fail-safe; apply the target of every cluster whose fail-safe factor
        changed. Never raises (the reconcile round retries what fails)."""
        if self.failsafe is not None:
            self._step_alert_source("fail-safe", self.failsafe.step)

    def step_lost_resolutions(self) -> None:
        """Forget the firing alerts whose resolution never came; restore where that lifts the
        throttle. Never raises."""
        if self.lost_resolutions is not None:
            self._step_alert_source("lost-resolution check", self.lost_resolutions.step)

    def _step_alert_source(self, name: str, step: Callable[[], set[str]]) -> None:
        """Run `step`, which changes the firing alerts it holds or knows of and returns the
        clusters it changed them for, and apply those clusters' targets."""
        try:
            changed = step()  # outside _alerts_lock: it may wait for Prometheus or an exporter
        except Exception as exc:  # noqa: BLE001 - the loop must survive anything
            log.exception("%s step failed: %s", name, exc)
            return
        self._alerts_changed(changed)
        for cluster in sorted(changed):
            try:
                self._enforce(cluster, None)
            except ApplyError:
                pass  # logged and counted by the applier; the reconcile round retries
            except Exception as exc:  # noqa: BLE001
                log.exception("cluster %s: %s apply failed: %s", cluster, name, exc)

    def _reconcile_round(self, interval: float) -> None:
        try:
            for cluster, error in self.reconcile().items():
                log.warning(
                    "cluster %s: not reconciled yet (retry in %ss): %s", cluster, interval, error
                )
        except Exception:  # noqa: BLE001 - never let the loop die
            log.exception("reconcile round failed; retrying in %ss", interval)

    def close(self) -> None:
        """Close every cluster's Kafka connection, then the journal."""
        for applier in self.appliers.values():
            applier.close()
        self.journal.close()

    def health(self) -> dict[str, Any]:
        """`ok`; `degraded` while unfinished work cannot progress (Kafka or the journal fails);
        `failing` when the originals cannot be known or Kafka ignores client quotas."""
        problems, failing = [], False
        for cluster, applier in sorted(self.appliers.items()):
            condition = applier.condition()
            if condition.originals_unknown:
                failing = True
                problems.append(
                    f"cluster {cluster}: originals unknown: {condition.originals_unknown}"[:500]
                )
            if condition.quota_callback:
                failing = True
                problems.append(f"cluster {cluster}: {condition.quota_callback}")
            error = self.reconcile_errors.get(cluster)
            if error and not condition.originals_unknown:
                problems.append(f"cluster {cluster}: cannot make progress: {error}")
        if "*" in self.reconcile_errors:
            problems.append(f"journal: {self.reconcile_errors['*']}")
        if self.failsafe is not None:
            problems.extend(self.failsafe.problems())
        status = "failing" if failing else "degraded" if problems else "ok"
        return {
            "status": status,
            "clusters": sorted(self.appliers),
            "problems": problems,
            "reconcile_rounds": self.reconcile_rounds,
        }

    def status(self) -> dict[str, Any]:
        return {"clusters": {name: self._cluster_status(name) for name in self.appliers}}

    def _cluster_status(self, cluster: str) -> dict[str, Any]:
        status = self.appliers[cluster].status()
        episode = status.episode
        firing = self.alerts.firing_factors(cluster)
        out: dict[str, Any] = {
            "target_factor": self.target(cluster),
            "applied_factor": status.applied_factor,
            "firing_alerts": len(firing),
            "dry_run": status.condition.dry_run,
            "last_error": status.condition.last_error,
            "settling": status.condition.settle_deadline is not None,
            "held_from_kafka": self.recovered.held(cluster),
            "failsafe": self.failsafe.status(cluster) if self.failsafe is not None else None,
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
            if same_value(current, record.original) and not record.drifted:
                continue
            rows.append(
                {
                    "entity": entity.to_dict(),
                    "label": entity.label(),
                    "key": key,
                    "original": _json_number(record.original),
                    "current": _json_number(current),
                    "unlimited_override": current == UNLIMITED,
                    "drift": record.drifted,
                    "reference": _json_number(record.reference),
                }
            )
        out["entities"] = rows
        out["drift"] = sum(1 for r in rows if r["drift"])
        return out


def _json_number(value: float | None) -> float | str | None:
    """JSON has no NaN or infinity: those are rendered as text ("NaN", "Infinity")."""
    if value is None or math.isfinite(value):
        return value
    return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
