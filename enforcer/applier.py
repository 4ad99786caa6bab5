"""Apply a target factor to one cluster, one apply at a time: the phases of the apply/restore
protocol (enforcer/apply/, one module each, described there) in order, under the cluster
journal's lock (`journal.ClusterJournal.exclusive`)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from enforcer import originals_recovery
from enforcer.apply.check import ThrottleCheck
from enforcer.apply.cluster_io import ClusterIO
from enforcer.apply.confirm import confirm
from enforcer.apply.dry_run import dry_run
from enforcer.apply.failures import Failures
from enforcer.apply.finish import finish, remove_copy
from enforcer.apply.intend import intend, open_episode
from enforcer.apply.late_references import LateReferences
from enforcer.apply.plan import Plan, Planner
from enforcer.apply.report import report
from enforcer.apply.result import ApplyError, ApplyResult
from enforcer.apply.send import send
from enforcer.apply.status import (
    ClusterCondition,
    ClusterStatus,
    StartingPoint,
    active,
    applied_factor,
)
from enforcer.apply.verify import check_quota_callback, verify
from enforcer.apply.view import View, caught_up_view
from enforcer.journal import Episode, Journal
from enforcer.metrics import EnforcerMetrics
from enforcer.observed_rates import ObservedRates
from enforcer.quota_client import QuotaClient, QuotaClientError
from enforcer.quota_plan import QuotaPolicy
from enforcer.request_sizes import RequestSizes
from enforcer.unanswered_alters import SETTLE_S, UnansweredAlters
from kvq.model.throttle_factor_policy import UNTHROTTLED

log = logging.getLogger("kvq.enforcer")


class Applier:
    """Brings one cluster's quotas to a factor, through the phases of the apply/restore
    protocol (`_apply`, `_act`); applies are serialised by the cluster journal's lock."""

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
        settle_s: float = SETTLE_S,
        observed_rates: ObservedRates | None = None,
        request_sizes: RequestSizes | None = None,
    ) -> None:
        """`observed_rates`: with kvq.enforcer.throttle.reference=observed-rate, where a new
        episode's reference rates come from (observed_rates.py); None scales the originals.
        `request_sizes`: with them, where each entity's request size comes from
        (request_sizes.py); None: no entity is raised for its requests."""
        self.cluster = cluster
        self.client = client
        self.journal = journal.for_cluster(cluster)
        """This cluster's episode and requests in doubt, and the lock of its applies."""
        self.metrics = metrics
        self.dry_run = dry_run
        self.unanswered = UnansweredAlters(settle_s, monotonic, self.journal)
        # Sizes read from throttle times, which the brokers' window may hide (QuotaWindow).
        raised = None if request_sizes is None else policy.raised_requests
        self.io = ClusterIO(
            cluster,
            client,
            self.journal,
            self.unanswered,
            metrics,
            monotonic,
            sleep,
            verify_attempts,
            verify_delay_s,
            None if raised is None else raised[1],
        )
        late = None if observed_rates is None else LateReferences(observed_rates, monotonic)
        self.planner = Planner(self.io, policy, observed_rates, late, request_sizes)
        self.check = ThrottleCheck(self.io, self.planner)
        self.failures = Failures(self.io)
        self._copy_checked = False
        """Kafka's copy of the originals was read since start (a lost journal is noticed)."""
        self._episode: Episode | None = None
        self._episode_loaded = False

    @property
    def last_error(self) -> str | None:
        return self.failures.last_error

    @property
    def quota_callback(self) -> str | None:
        """Why Kafka ignores client quotas on this cluster (client.quota.callback.class set)."""
        return self.failures.quota_callback

    @property
    def originals_unknown(self) -> str | None:
        """Why the originals cannot be known (the enforcer must not report success)."""
        return self.failures.originals_unknown

    def status(self) -> ClusterStatus:
        """The cluster between two applies (waits for one in progress)."""
        with self.journal.exclusive():
            return ClusterStatus(self.condition(), self._episode_now())

    def condition(self) -> ClusterCondition:
        """What holds the cluster's work up, read without waiting for an apply in progress (a
        health check must answer while Kafka times out)."""
        return ClusterCondition(
            self.dry_run,
            self.last_error,
            self.originals_unknown,
            self.quota_callback,
            self.unanswered.deadline,
            self.needs_reconcile,
        )

    def starting_point(self) -> StartingPoint:
        """The first half of one step of the cluster's work, nobody else acting on it meanwhile:
        read Kafka's copy of the originals if not read since start (adopting a throttle the
        journal does not know), and the factor applied now. The caller chooses the factor to
        apply from it, then calls `enforce`. Raises ApplyError when Kafka or the journal fails
        (retry later)."""
        with self.journal.exclusive():
            if not self._copy_checked:
                self._read_quota_window()
            adopted = None if self._copy_checked else self._read_copy()
            return StartingPoint(adopted, applied_factor(self._episode_now()))

    def enforce(self, factor: float) -> ApplyResult:
        """The second half of one step of the cluster's work, nobody else acting on it
        meanwhile: apply `factor` (chosen from `starting_point`). Raises ApplyError when Kafka
        or the journal fails (retry later)."""
        with self.journal.exclusive():
            return self._apply_counted(factor)

    def close(self) -> None:
        self.client.close()

    def _episode_now(self) -> Episode | None:
        """The cluster's episode as last read from or written to the journal (cached from one
        apply's end to the next one's first phase)."""
        if not self._episode_loaded:
            self._episode = self.journal.episode()
            self._episode_loaded = True
        return self._episode

    @property
    def needs_reconcile(self) -> bool:
        """Work is unfinished: a failed apply, an unread copy, or a request still in doubt."""
        return bool(
            self.last_error
            or self.originals_unknown
            or not self._copy_checked
            or self.unanswered.deadline is not None
        )

    def throttle_changed(self) -> bool:
        """A look between applies while a throttle is in force (apply/check.py): would an apply
        at the applied factor change something? Writes nothing. False without a throttle
        applied, with work already left for the reconcile loop, in a dry run, or when Kafka
        cannot be asked (the loop finds out)."""
        with self.journal.exclusive():
            on = active(self._episode_now())
            if on is None or on.applied is None or self.dry_run or self.needs_reconcile:
                return False
            return self.check.changed(on, on.applied)

    def settle_due_in(self) -> float | None:
        """Seconds until requests in doubt can no longer land (None: none in doubt)."""
        return self.unanswered.due_in()

    def _apply_counted(self, factor: float) -> ApplyResult:
        started = self.io.monotonic()
        try:
            result = self.failures.guarded(f"apply of factor {factor}", lambda: self._apply(factor))
        finally:
            self._episode_loaded = False
            took = self.io.monotonic() - started
            self.metrics.apply_seconds.labels(self.cluster).observe(took)
        report(self.io, result, took)
        self.failures.succeeded(result)
        return result

    def _read_quota_window(self) -> None:
        """The brokers' quota window, before the first plan since start (each check of the
        quota callback after an apply reads it again); Kafka's default stands while they
        cannot be asked (reading the copy next says why)."""
        try:
            self.io.quota_window.learned(self.client.quota_settings())
        except QuotaClientError as exc:
            log.debug("cluster %s: the brokers' quota window not read: %s", self.cluster, exc)

    def _read_copy(self) -> float | None:
        """Read Kafka's copy of the originals (after start, before a target is chosen) and adopt
        a throttle the journal does not know. Returns the factor its marker says was being
        applied when one was adopted, else None. Raises ApplyError like `enforce`."""
        try:
            return self.failures.guarded(
                "reading Kafka's copy of the originals", self._adopt_from_copy
            )
        finally:
            self._episode_loaded = False

    def _adopt_from_copy(self) -> float | None:
        on = active(self._episode_now())
        view = self._view(on)
        kafka_id = originals_recovery.unknown_throttle(on, view.copy)
        factor = None
        if kafka_id is not None and not self.dry_run:
            factor = view.copy.factor(kafka_id)
            self._recover(on, view, factor)
        self._copy_checked = True
        return factor

    def _view(self, on: Episode | None) -> View:
        """The view this apply acts on (apply/view.py): what a check just read, if recent."""
        return caught_up_view(self.io, on, self.dry_run, self.check.recent_look())

    def _recover(self, on: Episode | None, view: View, factor: float) -> Episode | None:
        return originals_recovery.recover(
            self.journal, self.cluster, self.metrics, on, view.snapshot, view.copy, factor
        )

    def _apply(self, factor: float) -> ApplyResult:
        """The view, then the plan (taking in first what a lost journal left in Kafka's copy):
        acted on, or validated only in a dry run."""
        on = active(self._episode_now())
        if on is None and factor >= UNTHROTTLED and self._nothing_to_read():
            return ApplyResult(self.cluster, factor, idle=True)
        view = self._view(on)
        if not self.dry_run:
            on = active(self._recover(on, view, factor))
        self._copy_checked = True
        if on is None and factor >= UNTHROTTLED:
            if not self.dry_run:
                remove_copy(self.io, view.copy, keep=None)
            return ApplyResult(self.cluster, factor, idle=self.unanswered.final(view.described_at))
        held = view.copy.episodes.get(on.episode_id, {}) if on else {}
        planned = self.planner.plan(on, held, view, factor)
        self.check.planned_from(view)
        if self.dry_run:
            return dry_run(self.io, planned)
        return self._act(open_episode(self.io, on, planned), planned)

    def _act(self, episode: Episode, planned: Plan) -> ApplyResult:
        """The phases that act, each journaling before it acts: a crash between any two of them
        leaves a journal the next apply finishes from (Kafka holds the values before or after)."""
        copy_changes = intend(self.io, episode, planned)
        self.planner.journaled_sizes(planned.request_sizes)
        sent = send(self.io, planned, copy_changes)
        originals = episode.originals()
        described_at, after = verify(self.io, planned, sent.changes, originals)
        settled = self.unanswered.final(described_at)
        confirm(self.journal, episode, planned, after, complete=settled and not sent.rejected)
        if log.isEnabledFor(logging.DEBUG):  # 20,000 lines for a large cluster: at debug only
            for change in sent.changes:
                log.debug(
                    "cluster %s: factor %s: set %s", self.cluster, planned.factor, change.describe()
                )
        if sent.rejected:
            raise ApplyError(
                f"Kafka rejected part of the plan at factor {planned.factor} (the rest is "
                "applied): " + "; ".join(sent.rejected)
            )
        if planned.restoring and settled:
            finish(self.io, planned, copy_changes)
        if not settled:
            log.warning(
                "cluster %s: factor %s applied and verified; an unanswered AlterClientQuotas may "
                "still land, verifying again in %.0f s",
                self.cluster,
                planned.factor,
                self.settle_due_in() or 0.0,
            )
        check_quota_callback(self.io)
        return ApplyResult(
            self.cluster,
            planned.factor,
            tuple(planned.todo),
            planned.drift,
            reverted=len(planned.reverted),
            drifted=planned.drifted,
            settling=not settled,
        )

    def _nothing_to_read(self) -> bool:
        """Kafka's copy was read since start and no request in doubt may still land: with no
        active episode, unthrottled needs no look at Kafka."""
        return self._copy_checked and self.unanswered.deadline is None
