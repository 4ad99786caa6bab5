"""Apply a target factor to one cluster: journal first, validate, alter, verify. One at a time.

The plan always starts from the originals in the journal, so repeating, duplicating or resuming
an apply after a crash converges on the same values and never compounds a factor.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from enforcer.journal import Journal
from enforcer.metrics import EnforcerMetrics
from enforcer.quota_client import QuotaClient, QuotaClientError, QuotaRejected
from enforcer.quota_plan import (
    Change,
    Pair,
    QuotaPolicy,
    Snapshot,
    changes,
    current_value,
    plan,
    tracked_originals,
)

log = logging.getLogger("kvq.enforcer")


class ApplyError(RuntimeError):
    """Kafka failed or did not end up in the planned state; the apply should be retried."""


@dataclass(frozen=True, slots=True)
class ApplyResult:
    cluster: str
    factor: float
    changes: tuple[Change, ...] = ()
    drift: dict[Pair, float | None] = field(default_factory=dict)
    dry_run: bool = False
    idle: bool = False
    """Nothing was throttled and nothing needs to be: Kafka was not asked."""


class Applier:
    """Brings one cluster's quotas to a factor; `apply` calls are serialised."""

    def __init__(
        self,
        cluster: str,
        policy: QuotaPolicy,
        client: QuotaClient,
        journal: Journal,
        metrics: EnforcerMetrics,
        dry_run: bool = False,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        verify_attempts: int = 5,
        verify_delay_s: float = 0.2,
    ) -> None:
        self._sleep = sleep
        self.verify_attempts = verify_attempts
        self.verify_delay_s = verify_delay_s
        self.cluster = cluster
        self.policy = policy
        self.client = client
        self.journal = journal
        self.metrics = metrics
        self.dry_run = dry_run
        self._monotonic = monotonic
        self.lock = threading.RLock()
        """Held for a whole apply; hold it to read a target and apply it atomically."""
        self.last_error: str | None = None

    def apply(self, factor: float) -> ApplyResult:
        """Apply `factor`; raises ApplyError when Kafka fails (nothing is lost: retry)."""
        with self.lock:
            started = self._monotonic()
            try:
                result = self._apply(factor)
            except QuotaClientError as exc:
                self.metrics.apply_failures.labels(self.cluster).inc()
                self.last_error = str(exc)
                log.error("cluster %s: apply of factor %s failed: %s", self.cluster, factor, exc)
                raise ApplyError(str(exc)) from None
            except ApplyError as exc:
                self.metrics.apply_failures.labels(self.cluster).inc()
                self.last_error = str(exc)
                log.error("cluster %s: %s", self.cluster, exc)
                raise
            finally:
                self.metrics.apply_seconds.labels(self.cluster).observe(self._monotonic() - started)
            self.last_error = None
            self.metrics.applies.labels(self.cluster).inc()
            if not result.dry_run:
                self.metrics.quota_changes.labels(self.cluster).inc(len(result.changes))
                self.metrics.applied_factor.labels(self.cluster).set(factor)
            return result

    def _apply(self, factor: float) -> ApplyResult:
        episode = self.journal.episode(self.cluster)
        active = episode is not None and episode.active
        if not active and factor >= 1.0:
            return ApplyResult(self.cluster, factor, idle=True)
        snapshot = self.client.describe()
        records = episode.pairs if active else {}
        originals = {pair: record.original for pair, record in records.items()}
        discovered = {}
        if factor < 1.0:
            discovered = {
                pair: value
                for pair, value in tracked_originals(self.policy, snapshot, originals).items()
                if pair not in originals
            }
        drift = {
            pair: current_value(snapshot, pair)
            for pair, record in records.items()
            if not record.drifted and current_value(snapshot, pair) not in record.expected()
        }
        frozen = {pair for pair, record in records.items() if record.drifted} | set(drift)
        desired = plan(self.policy, {**originals, **discovered}, factor, frozen)
        todo = changes(desired, snapshot)
        if self.dry_run:
            self.client.alter(todo, validate_only=True)
            for change in todo:
                log.info("cluster %s: dry run, would set %s", self.cluster, change.describe())
            return ApplyResult(self.cluster, factor, tuple(todo), drift, dry_run=True)

        if not active or discovered:
            self.journal.begin(self.cluster, discovered, factor)
        if drift:
            self.journal.mark_drift(self.cluster, drift)
            for (entity, key), value in drift.items():
                log.warning(
                    "cluster %s: %s %s was changed by someone else to %s while throttled; "
                    "keeping it and not restoring it",
                    self.cluster,
                    entity.label(),
                    key,
                    "unset" if value is None else value,
                )
        after = snapshot
        sendable, rejected = todo, []
        if todo:
            self.journal.set_pending(
                self.cluster, {(c.entity, c.key): c.value for c in todo}, factor
            )
            sendable, rejected = self._validated(todo)
            try:
                if sendable:
                    self.client.alter(sendable)
            finally:
                after = self._verify(desired, sendable, factor)
        self.journal.confirm(self.cluster, _matching(desired, after), None if rejected else factor)
        for change in sendable:
            log.info("cluster %s: factor %s: set %s", self.cluster, factor, change.describe())
        if rejected:
            raise ApplyError(
                f"Kafka rejected part of the plan at factor {factor} (the rest is applied): "
                + "; ".join(rejected)
            )
        if factor >= 1.0:
            self.journal.finish(self.cluster)
        return ApplyResult(self.cluster, factor, tuple(todo), drift)

    def _validated(self, todo: list[Change]) -> tuple[list[Change], list[str]]:
        """Validate the plan; entities Kafka rejects are left out so the rest still protects."""
        try:
            self.client.alter(todo, validate_only=True)
        except QuotaRejected as exc:
            if not exc.entities:
                raise
            bad = set(exc.entities)
            return [c for c in todo if c.entity not in bad], exc.errors
        return todo, []

    def _verify(self, desired: dict[Pair, float | None], todo: list[Change], factor: float):
        """Describe again (a few times: brokers learn quota changes from the metadata log a
        moment later); record what landed; raise ApplyError for what did not."""
        for attempt in range(self.verify_attempts):
            after = self.client.describe()
            missing = [c for c in todo if current_value(after, (c.entity, c.key)) != c.value]
            if not missing:
                return after
            if attempt + 1 < self.verify_attempts:
                self._sleep(self.verify_delay_s)
        if missing:
            self.journal.confirm(self.cluster, _matching(desired, after), None)
            raise ApplyError(
                f"after AlterClientQuotas, {len(missing)} value(s) differ from the plan "
                f"at factor {factor}: " + "; ".join(c.describe() for c in missing[:5])
            )
        return after


def _matching(desired: dict[Pair, float | None], snapshot: Snapshot) -> dict[Pair, float | None]:
    return {
        pair: value for pair, value in desired.items() if current_value(snapshot, pair) == value
    }
