"""Apply a target factor to one cluster, one apply at a time, in phases that each journal
before they act (`Applier._apply`):

- plan: one DescribeClientQuotas (taking in first what a lost journal left in Kafka's copy of
  the originals, originals_recovery.py) and what to set; writes nothing;
- intend: journal the originals found (a new episode when none is active), the operators'
  changes and the values about to be set (pending);
- send: validate, then Kafka's copy ahead of the changes that depend on it, each request
  journaled as in doubt until it is answered;
- verify: describe until the values show (what did land is journaled when not all did);
- confirm: journal the values that landed, and the factor as applied once nothing is in doubt;
- finish (a restore): remove Kafka's copy, its marker first, then journal the episode finished.

A crash between two phases leaves Kafka at the previous or the pending values, both known from
the journal as the enforcer's own. A restore is the same protocol at UNTHROTTLED.

The plan always starts from the originals in the journal, so repeating, duplicating or resuming
an apply after a crash converges on the same values and never compounds a factor. The originals
are also copied into Kafka (kafka_originals.py) before the first change that depends on them, so
a lost journal is recovered from Kafka instead of taking throttled values for originals.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple, TypeVar

from enforcer import kafka_originals, originals_recovery
from enforcer.cluster_journal import ClusterJournals
from enforcer.journal import Episode, JournalError, PairRecord
from enforcer.kafka_originals import KafkaOriginals, OriginalsUnknown
from enforcer.metrics import EnforcerMetrics
from enforcer.observed_rates import ObservedRates
from enforcer.quota_client import QuotaClient, QuotaClientError, QuotaRejected
from enforcer.quota_plan import (
    UNLIMITED,
    Change,
    Pair,
    QuotaPolicy,
    Snapshot,
    changes,
    current_value,
    plan,
    same_value,
    tracked_originals,
)
from enforcer.unanswered_alters import SETTLE_S, UnansweredAlters
from kvq.kafka.quota_entity import QuotaEntity
from kvq.model.throttle_factor_policy import UNTHROTTLED

log = logging.getLogger("kvq.enforcer")
T = TypeVar("T")


class ApplyError(RuntimeError):
    """Kafka failed or did not end up in the planned state; the apply should be retried."""


class QuotaCallbackActive(ApplyError):
    """Brokers hand quota decisions to a plugin: the client quotas set have no effect."""


@dataclass(frozen=True, slots=True)
class ApplyResult:
    cluster: str
    factor: float
    changes: tuple[Change, ...] = ()
    drift: dict[Pair, float | None] = field(default_factory=dict)
    dry_run: bool = False
    idle: bool = False
    """Nothing was throttled and nothing needs to be: Kafka was not asked."""
    reverted: int = 0
    """Throttled values someone reset to exactly their original (a reconciler): throttled again."""
    drifted: int = 0
    """Pairs of the episode an operator changed while throttled (kept as they are)."""
    settling: bool = False
    """Applied and verified, but a request that got no answer may still land: verified again
    later before the factor counts as applied (and a restore as finished)."""


class View(NamedTuple):
    """One DescribeClientQuotas answer an apply acts on."""

    described_at: float
    """Monotonic time it was asked for."""
    snapshot: Snapshot
    """The quotas (Kafka's copy of the originals left out)."""
    copy: KafkaOriginals


@dataclass(frozen=True, slots=True)
class Plan:
    """What one apply is to do, decided from one view before anything is written."""

    factor: float
    view: View
    discovered: dict[Pair, float | None]
    """Originals of pairs to throttle that the journal does not hold yet."""
    drift: dict[Pair, float | None]
    """Values an operator changed while throttled, found now (kept from now on)."""
    reverted: list[Pair]
    """Throttled values a reconciler reset to their original (throttled again)."""
    drifted: int
    """Pairs of the episode kept at an operator's value (found now or before)."""
    desired: dict[Pair, float | None]
    todo: list[Change]
    """What Kafka does not hold yet of `desired`."""
    references: dict[Pair, float] = field(default_factory=dict)
    """Observed rates captured for a new episode (journaled with its originals)."""

    @property
    def restoring(self) -> bool:
        return self.factor >= UNTHROTTLED


@dataclass(frozen=True, slots=True)
class Sent:
    """What the send phase sent of a plan's changes, and why Kafka rejected the rest."""

    changes: list[Change]
    rejected: list[str]


@dataclass(frozen=True, slots=True)
class StartingPoint:
    """Where a cluster's next apply starts from: what its caller needs to choose the factor to
    apply (`Applier.starting_point`, then `Applier.enforce`)."""

    adopted: float | None
    """The factor named by the marker of a throttle just adopted from Kafka's copy of the
    originals (the journal did not know it), else None."""
    applied: float
    """The factor applied now."""


@dataclass(frozen=True, slots=True)
class ClusterCondition:
    """What holds one cluster's work up."""

    dry_run: bool
    last_error: str | None
    originals_unknown: str | None
    """Why the originals cannot be known (the enforcer must not report success)."""
    quota_callback: str | None
    """Why Kafka ignores client quotas on this cluster (client.quota.callback.class set)."""
    settle_deadline: float | None
    """Monotonic time after which no unanswered request can land (None: none in doubt)."""
    work_left: bool
    """A failed apply, an unread copy, or a request still in doubt: reconcile again."""


@dataclass(frozen=True, slots=True)
class ClusterStatus:
    """One cluster between two applies."""

    condition: ClusterCondition
    episode: Episode | None
    """The current (active) or last (restored) throttle episode, as journaled."""

    @property
    def applied_factor(self) -> float:
        return applied_factor(self.episode)

    @property
    def unfinished(self) -> bool:
        """A throttle is on or work is left: the reconcile loop has something to do."""
        return _active(self.episode) is not None or self.condition.work_left


class Applier:
    """Brings one cluster's quotas to a factor, through the phases of the apply/restore
    protocol (`_apply`); applies are serialised by the cluster journal's lock."""

    def __init__(
        self,
        cluster: str,
        policy: QuotaPolicy,
        client: QuotaClient,
        journal: ClusterJournals,
        metrics: EnforcerMetrics,
        dry_run: bool = False,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        verify_attempts: int = 5,
        verify_delay_s: float = 0.2,
        settle_s: float = SETTLE_S,
        observed_rates: ObservedRates | None = None,
    ) -> None:
        self._sleep = sleep
        self.observed_rates = observed_rates
        """With kvq.enforcer.throttle.reference=observed-rate: where a new episode's reference
        rates come from (observed_rates.py); None scales the originals."""
        self.verify_attempts = verify_attempts
        self.verify_delay_s = verify_delay_s
        self.cluster = cluster
        self.policy = policy
        self.client = client
        self.journal = journal.for_cluster(cluster)
        """This cluster's episode and requests in doubt (the seam of a second replica)."""
        self.metrics = metrics
        self.dry_run = dry_run
        self._monotonic = monotonic
        self.last_error: str | None = None
        self.quota_callback: str | None = None
        """Why Kafka ignores client quotas on this cluster (client.quota.callback.class set)."""
        self.originals_unknown: str | None = None
        """Why the originals cannot be known (the enforcer must not report success)."""
        self._copy_checked = False
        """Kafka's copy of the originals was read since start (a lost journal is noticed)."""
        self.unanswered = UnansweredAlters(settle_s, monotonic, self.journal)
        self._episode: Episode | None = None
        self._episode_loaded = False
        self._looked: View | None = None
        self._seen_entities: frozenset[QuotaEntity] = frozenset()
        """The quota entities (Kafka's copy of the originals left out) of the last plan's view."""
        """What the last check of the throttle read, when it found a change (`_recent_look`)."""

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
        """A look between applies while a throttle is in force: one DescribeClientQuotas, and
        whether an apply at the applied factor would change something (a value a reconciler
        reset or an operator changed, an entity to throttle that appeared, a value missing).
        Writes nothing. False without a throttle applied, with work already left for the
        reconcile loop, in a dry run, or when Kafka cannot be asked (the loop finds out)."""
        with self.journal.exclusive():
            active = _active(self._episode_now())
            if active is None or active.applied is None or self.dry_run or self.needs_reconcile:
                return False
            described_at = self._monotonic()
            self.metrics.throttle_checks.labels(self.cluster).inc()
            try:
                full = self.client.describe()
            except QuotaClientError as exc:
                log.debug("cluster %s: cannot look at the throttle: %s", self.cluster, exc)
                return False
            if self._as_last_seen(active, full):
                return False
            snapshot, copy = kafka_originals.split(full)
            held = copy.episodes.get(active.episode_id, {})
            view = View(described_at, snapshot, copy)
            planned = self._plan(active.pairs, held, view, active.applied)
            changed = bool(planned.todo or planned.drift or planned.reverted or planned.discovered)
            self._looked = view if changed else None
            self._seen_entities = frozenset(snapshot)
            return changed

    def _as_last_seen(self, active: Episode, full: Snapshot) -> bool:
        """Kafka holds every value of the throttle as the journal expects it, and no quota entity
        that the last plan did not see: nothing a plan would change (the common case of a
        check, decided without parsing Kafka's copy of the originals or planning)."""
        for pair, record in active.pairs.items():
            if not record.drifted and not record.holds_expected(current_value(full, pair)):
                return False
        seen = self._seen_entities
        return all(entity in seen or entity.is_originals_record for entity in full)

    def settle_due_in(self) -> float | None:
        """Seconds until requests in doubt can no longer land (None: none in doubt)."""
        return self.unanswered.due_in()

    def _apply_counted(self, factor: float) -> ApplyResult:
        started = self._monotonic()
        try:
            result = self._guarded(f"apply of factor {factor}", lambda: self._apply(factor))
        finally:
            self._episode_loaded = False
            took = self._monotonic() - started
            self.metrics.apply_seconds.labels(self.cluster).observe(took)
        self._log_summary(result, took)
        self.last_error = None
        self.originals_unknown = None
        if not result.idle:
            self.quota_callback = None
            self.metrics.quota_callback.labels(self.cluster).set(0)
        self.metrics.originals_unknown.labels(self.cluster).set(0)
        self.metrics.applies.labels(self.cluster).inc()
        if not result.dry_run:
            self.metrics.quota_changes.labels(self.cluster).inc(len(result.changes))
            _report_stand_ins(self.cluster, result.changes, self.metrics)
            if not result.settling:
                self.metrics.applied_factor.labels(self.cluster).set(factor)
        return result

    def _log_summary(self, result: ApplyResult, took: float) -> None:
        """One line per apply (each value is logged at debug): at info when it changed
        something, at debug when it only confirmed what Kafka holds (a throttle held in
        place)."""
        if result.idle:
            return
        changed = len(result.changes)
        log.log(
            logging.INFO if changed or result.reverted or result.drift else logging.DEBUG,
            "cluster %s: factor %s %s: %d value(s) %s in %.2f s%s",
            self.cluster,
            result.factor,
            "validated (dry run)" if result.dry_run else "applied",
            changed,
            "would change" if result.dry_run else "changed",
            took,
            ", verifying again once unanswered requests settle" if result.settling else "",
        )

    def _read_copy(self) -> float | None:
        """Read Kafka's copy of the originals (after start, before a target is chosen) and adopt
        a throttle the journal does not know. Returns the factor its marker says was being
        applied when one was adopted, else None. Raises ApplyError like `enforce`."""
        try:
            return self._guarded("reading Kafka's copy of the originals", self._adopt_from_copy)
        finally:
            self._episode_loaded = False

    def _adopt_from_copy(self) -> float | None:
        active = _active(self._episode_now())
        view = self._caught_up_view()
        kafka_id = originals_recovery.unknown_throttle(active, view.copy)
        factor = None
        if kafka_id is not None and not self.dry_run:
            factor = view.copy.factor(kafka_id)
            self._recover(active, view, factor)
        self._copy_checked = True
        return factor

    def _caught_up_view(self) -> View:
        """A DescribeClientQuotas answer that shows no episode the journal knows as finished.

        A broker's metadata may lag behind the controller's: its view can still show the copy of
        an episode already restored (whose marker was removed before the journal finished it),
        with that episode's throttled values. That is no throttle whose journal was lost, and
        none of its values may become originals: describe again a few times, then fail the apply
        (retried later). The finished episode's entities are removed again on the way, in case
        it is a removal Kafka lost rather than a lagging view."""
        active = _active(self._episode_now())
        active_id = active.episode_id if active is not None else None
        finished: frozenset[str] | None = None  # read from the journal only when needed
        shown: list[str] = []
        for attempt in range(self.verify_attempts):
            looked = self._recent_look() if attempt == 0 else None
            if looked is not None:
                described_at, snapshot, copy = looked
            else:
                described_at = self._monotonic()
                snapshot, copy = kafka_originals.split(self.client.describe())
            others = set(copy.marked) - {active_id}
            if others and finished is None and not self.dry_run:
                finished = self.journal.finished_ids()
            shown = sorted(others & (finished or frozenset()))
            if not shown:
                return View(described_at, snapshot, copy)
            if attempt + 1 < self.verify_attempts:
                self._sleep(self.verify_delay_s)
        self._alter(kafka_originals.removals(e for i in shown for e in copy.entities[i]))
        raise ApplyError(
            "the brokers' view of the quotas lags behind: it still shows Kafka's copy of the "
            f"originals of episode(s) {', '.join(shown)}, already restored (removed again in "
            "case the removal was lost); not acting on that view, retrying later"
        )

    def _recent_look(self) -> View | None:
        """The view a check that found the throttle changed just read (taken once, and only
        within LOOK_REUSE_S): the apply that follows acts on it instead of describing again, a
        round trip less before a reset is throttled again (a long one at 20,000 pairs)."""
        looked, self._looked = self._looked, None
        if looked is None or self._monotonic() - looked.described_at > LOOK_REUSE_S:
            return None
        return looked

    def _guarded(self, what: str, action: Callable[[], T]) -> T:
        """Run `action`; every failure is counted, logged, kept as `last_error` and raised as
        ApplyError."""
        try:
            return action()
        except OriginalsUnknown as exc:
            self._failed(str(exc))
            self.originals_unknown = str(exc)
            self.metrics.originals_unknown.labels(self.cluster).set(1)
            log.critical(
                "cluster %s: CANNOT KNOW THE ORIGINAL QUOTAS, refusing to act: %s",
                self.cluster,
                exc,
            )
            raise ApplyError(f"originals unknown: {exc}") from None
        except (QuotaClientError, JournalError) as exc:
            self._failed(str(exc))
            log.error("cluster %s: %s failed: %s", self.cluster, what, exc)
            raise ApplyError(str(exc)) from None
        except QuotaCallbackActive as exc:
            self._failed(str(exc))
            self.quota_callback = str(exc)
            self.metrics.quota_callback.labels(self.cluster).set(1)
            log.critical("cluster %s: %s", self.cluster, exc)
            raise
        except ApplyError as exc:
            self._failed(str(exc))
            log.error("cluster %s: %s", self.cluster, exc)
            raise

    def _failed(self, message: str) -> None:
        self.metrics.apply_failures.labels(self.cluster).inc()
        self.last_error = message

    def _alter(self, todo: list[Change]) -> None:
        """AlterClientQuotas, journaled before it is sent: a request without an answer may still
        land (also after a restart), so it is remembered until it is answered or settled."""
        if not todo:
            return
        request = self.unanswered.sending(todo)  # durable before it is sent
        try:
            self.client.alter(todo)
        except QuotaRejected:
            self.unanswered.answered(request)
            raise
        except QuotaClientError:
            self.unanswered.record(todo)
            raise
        self.unanswered.answered(request)

    def _apply(self, factor: float) -> ApplyResult:
        active = _active(self._episode_now())
        if active is None and factor >= UNTHROTTLED and self._nothing_to_read():
            return ApplyResult(self.cluster, factor, idle=True)
        view = self._caught_up_view()
        if not self.dry_run:
            active = _active(self._recover(active, view, factor))
        self._copy_checked = True
        if active is None and factor >= UNTHROTTLED:
            if not self.dry_run:
                self._remove_copy(view.copy, keep=None)
            return ApplyResult(self.cluster, factor, idle=self.unanswered.final(view.described_at))
        records = active.pairs if active else {}
        held = view.copy.episodes.get(active.episode_id, {}) if active else {}
        planned = self._plan(records, held, view, factor)
        self._seen_entities = frozenset(view.snapshot)
        if self.dry_run:
            return self._dry_run(planned)
        return self._act(self._open(active, planned), planned)

    def _act(self, episode: Episode, planned: Plan) -> ApplyResult:
        """The phases that act, each journaling before it acts: a crash between any two of them
        leaves a journal the next apply finishes from (Kafka holds the values before or after)."""
        copy_changes = self._intend(episode, planned)
        sent = self._send(planned, copy_changes)
        described_at, after = self._verify(planned, sent)
        settled = self.unanswered.final(described_at)
        self._confirm(episode, planned, after, complete=settled and not sent.rejected)
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
            self._finish(planned, copy_changes)
        if not settled:
            log.warning(
                "cluster %s: factor %s applied and verified; an unanswered AlterClientQuotas may "
                "still land, verifying again in %.0f s",
                self.cluster,
                planned.factor,
                self.settle_due_in() or 0.0,
            )
        self._check_quota_callback()
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

    def _plan(
        self,
        records: Mapping[Pair, PairRecord],
        held: Mapping[Pair, float | None],
        view: View,
        factor: float,
    ) -> Plan:
        """Plan: what the apply is to do, from the journaled pairs of the active episode
        (`records`, none without one), the records of them Kafka's copy holds (`held`) and one
        view of the quotas. Writes nothing: a crash here leaves no trace."""
        originals = {pair: record.original for pair, record in records.items()}
        discovered = {}
        if factor < UNTHROTTLED:
            discovered = {
                pair: value
                for pair, value in tracked_originals(self.policy, view.snapshot, originals).items()
                if pair not in originals
            }
        drift, reverted = self._changed_by_others(records, held, view.snapshot)
        if factor >= UNTHROTTLED:
            reverted = []  # back at the original is what a restore wants
        frozen = {pair for pair, record in records.items() if record.drifted} | set(drift)
        captured = self._captured_references(records, discovered, factor)
        references = {p: r.reference for p, r in records.items() if r.reference is not None}
        references.update(captured)
        desired = plan(self.policy, {**originals, **discovered}, factor, frozen, references)
        trusted = _trusted_view(view.snapshot, desired, records)
        todo = changes(desired, trusted, {**originals, **discovered})
        drifted = len(drift) + sum(1 for record in records.values() if record.drifted)
        return Plan(factor, view, discovered, drift, reverted, drifted, desired, todo, captured)

    def _captured_references(
        self,
        records: Mapping[Pair, PairRecord],
        discovered: Mapping[Pair, float | None],
        factor: float,
    ) -> dict[Pair, float]:
        """The observed rates a new episode starts from (observed-rate references): asked only
        when no episode is active, so rates seen while throttled never become references; an
        episode that ended within the lookback passes its references on as a lower bound (the
        rates just after it are what it let through)."""
        if self.observed_rates is None or records or factor >= UNTHROTTLED:
            return {}
        previous = self.journal.recent_references(self.observed_rates.lookback)
        return self.observed_rates.references(self.cluster, self.policy, discovered, previous)

    def _dry_run(self, planned: Plan) -> ApplyResult:
        """Instead of acting: Kafka validates the plan (validate_only) and it is logged."""
        self.client.alter(planned.todo, validate_only=True)
        if log.isEnabledFor(logging.DEBUG):  # as an apply: its summary at info, the values here
            for change in planned.todo:
                log.debug("cluster %s: dry run, would set %s", self.cluster, change.describe())
        self._check_quota_callback()
        return ApplyResult(
            self.cluster, planned.factor, tuple(planned.todo), planned.drift, dry_run=True
        )

    def _open(self, active: Episode | None, planned: Plan) -> Episode:
        """Intend, first: journal the originals the plan found that the journal lacks (a new
        episode when none is active) before anything that depends on them is sent. Returns the
        episode the rest of the apply acts on."""
        if active is not None and not planned.discovered:
            return active
        episode_id = active.episode_id if active is not None else None
        references = planned.references if active is None else None
        episode = self.journal.begin(
            planned.discovered, planned.factor, episode_id, references=references
        )
        self._episode = episode
        return episode

    def _intend(self, episode: Episode, planned: Plan) -> list[Change]:
        """Intend, then: journal the operators' changes found (kept from now on) and the values
        about to be set (pending: a crash after sending them knows them as ours). Returns what
        Kafka's copy of the originals lacks, to be sent first."""
        copy_changes = self._copy_changes(episode, planned.view.copy, planned.factor)
        self._report_undone(planned.drift, planned.reverted)
        if planned.drift:
            self.journal.mark_drift(planned.drift)
        if planned.todo:
            pending = {(c.entity, c.key): c.value for c in planned.todo}
            self.journal.set_pending(pending, planned.factor)
        return copy_changes

    def _send(self, planned: Plan, copy_changes: list[Change]) -> Sent:
        """Send: what Kafka's copy lacks first, in the same request(s) as the plan's changes that
        depend on it. Each request is journaled as in doubt until answered (`_alter`)."""
        if not planned.todo:
            self._alter(copy_changes)
            return Sent([], [])
        sendable, rejected = self._validated(planned.todo)
        try:
            self._alter(copy_changes + sendable)
        except QuotaClientError:
            with contextlib.suppress(ApplyError, QuotaClientError):
                self._described_until_landed(planned, sendable)  # journals what did land
            raise
        return Sent(sendable, rejected)

    def _verify(self, planned: Plan, sent: Sent) -> tuple[float, Snapshot]:
        """Verify: (monotonic time, quotas) of a DescribeClientQuotas showing what was sent;
        the plan's own view when nothing was."""
        if not planned.todo:
            return planned.view.described_at, planned.view.snapshot
        described_at = self._monotonic()
        return described_at, self._described_until_landed(planned, sent.changes)

    def _confirm(self, episode: Episode, planned: Plan, after: Snapshot, complete: bool) -> None:
        """Confirm: journal the values verified in Kafka, and the factor as applied when all of
        the plan landed and no request in doubt can still change that. A repeated alert that
        changes nothing writes nothing."""
        landed = _landed(planned.desired, after)
        factor = planned.factor if complete else None
        if planned.todo or not _journal_already_says(episode, landed, factor):
            self.journal.confirm(landed, factor)

    def _finish(self, planned: Plan, copy_changes: list[Change]) -> None:
        """Finish a restore: remove Kafka's copy of the originals (its marker first, so records
        left by a crash are never trusted), then journal the episode as finished."""
        written = {c.entity for c in copy_changes if c.value is not None}
        leftovers = set(planned.view.copy.leftovers(keep=None))
        self._alter(kafka_originals.removals(leftovers | written))
        self.journal.finish()

    def _changed_by_others(
        self,
        records: Mapping[Pair, PairRecord],
        held: Mapping[Pair, float | None],
        snapshot: Snapshot,
    ) -> tuple[dict[Pair, float | None], list[Pair]]:
        """Tracked values someone else changed: (an operator's new values, pairs a reconciler
        reset to their original).

        Brokers answer from metadata that may lag the controller's by different amounts, so a
        view may show any value this episode wrote before (the 0.5 throttle after 0.25 was
        applied): that is ours, not settled yet, and simply written again by the plan. A change
        counts only in a view that holds this pair's record in Kafka's copy of the originals
        (`held`), which went out with (or before) the pair's first throttled value: a view
        without it is from before the throttle (a lagging broker) and shows what the throttle
        replaced (the original, a value an operator set before it, an earlier episode's
        throttle), neither a reconciler's reset nor an operator's change made while
        throttled."""
        drift: dict[Pair, float | None] = {}
        reverted: list[Pair] = []
        for pair, record in records.items():
            value = current_value(snapshot, pair)
            if (
                pair not in held
                or record.drifted
                or record.holds_expected(value)
                or record.wrote(value)
                or self.unanswered.may_have_set(pair, value)
            ):
                continue
            if not same_value(value, record.original):
                drift[pair] = value
            else:
                reverted.append(pair)
        return drift, reverted

    def _check_quota_callback(self) -> None:
        """Refuse to report success when brokers ignore client quotas (DescribeConfigs)."""
        found = self.client.quota_callbacks()
        if found:
            classes = sorted(set(found.values()))
            raise QuotaCallbackActive(
                f"broker(s) {', '.join(map(str, sorted(found)))} set client.quota.callback.class="
                f"{', '.join(classes)}: Kafka hands every quota decision to that plugin and "
                "ignores client quotas, so the quotas set here have no effect; turn the plugin "
                "off (Strimzi: spec.kafka.quotas.type other than strimzi) to let the enforcer "
                "protect the disks"
            )

    def _recover(self, active: Episode | None, view: View, factor: float) -> Episode | None:
        return originals_recovery.recover(
            self.journal, self.cluster, self.metrics, active, view.snapshot, view.copy, factor
        )

    def _copy_changes(self, episode: Episode, copy: KafkaOriginals, factor: float) -> list[Change]:
        """What Kafka's copy lacks (records, then the marker naming `factor`), and the removal of
        other episodes' leftovers: sent before, or with, any change of the plan."""
        originals = {pair: record.original for pair, record in episode.pairs.items()}
        missing = kafka_originals.missing_records(episode.episode_id, originals, copy, factor)
        leftovers = copy.leftovers(keep=episode.episode_id)
        return missing + kafka_originals.removals(leftovers)

    def _remove_copy(self, copy: KafkaOriginals, keep: str | None) -> None:
        leftovers = copy.leftovers(keep)
        self._alter(kafka_originals.removals(leftovers))

    def _report_undone(self, drift: dict[Pair, float | None], reverted: list[Pair]) -> None:
        """One warning per kind naming the first few pairs (a reconciler may reset thousands at
        once); each pair at debug."""
        if reverted:
            log.warning(
                "cluster %s: %d value(s) were reset to their original while throttled (a "
                "reconciler such as Strimzi's User or Cluster Operator?); throttling them again: "
                "%s",
                self.cluster,
                len(reverted),
                _first_few(f"{entity.label()} {key}" for entity, key in reverted),
            )
            self.metrics.reverted.labels(self.cluster).inc(len(reverted))
        if drift:
            log.warning(
                "cluster %s: %d value(s) were changed by someone else while throttled; keeping "
                "them and not restoring them: %s",
                self.cluster,
                len(drift),
                _first_few(
                    f"{entity.label()} {key} = {'unset' if value is None else value}"
                    for (entity, key), value in drift.items()
                ),
            )
            self.metrics.drift_changes.labels(self.cluster).inc(len(drift))
        if log.isEnabledFor(logging.DEBUG):
            for entity, key in reverted:
                log.debug(
                    "cluster %s: reset to its original: %s %s", self.cluster, entity.label(), key
                )
            for (entity, key), value in drift.items():
                log.debug(
                    "cluster %s: changed by someone else: %s %s = %s",
                    self.cluster,
                    entity.label(),
                    key,
                    "unset" if value is None else value,
                )

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

    def _described_until_landed(self, planned: Plan, sent: list[Change]) -> Snapshot:
        """Describe again (a few times: brokers learn quota changes from the metadata log a
        moment later) until every broker shows `sent`; otherwise journal what landed and raise
        ApplyError."""
        for attempt in range(self.verify_attempts):
            after = self.client.describe_agreed()
            missing = [
                c for c in sent if not same_value(current_value(after, (c.entity, c.key)), c.value)
            ]
            if not missing:
                return after
            if attempt + 1 < self.verify_attempts:
                self._sleep(self.verify_delay_s)
        self.journal.confirm(_landed(planned.desired, after), None)
        raise ApplyError(
            f"after AlterClientQuotas, {len(missing)} value(s) differ from the plan "
            f"at factor {planned.factor}: " + "; ".join(c.describe() for c in missing[:5])
        )


LOOK_REUSE_S = 1.0
"""How old a check's view may be for the apply it triggers to act on it (it follows at once)."""

FEW = 5
"""Pairs a summary line names before it says how many more there are."""


def _first_few(labels: Iterable[str]) -> str:
    """The first FEW of `labels`, then how many more there are."""
    shown: list[str] = []
    more = 0
    for label in labels:
        if len(shown) < FEW:
            shown.append(label)
        else:
            more += 1
    return "; ".join(shown) + (f" and {more} more" if more else "")


_UNSEEN = -1.0
"""Stands for a value not trusted as seen: Kafka holds no quota <= 0 and no plan sets one."""


def _active(episode: Episode | None) -> Episode | None:
    return episode if episode is not None and episode.active else None


def applied_factor(episode: Episode | None) -> float:
    """The factor applied completely: UNTHROTTLED without an active episode, or before its
    first factor landed."""
    active = _active(episode)
    if active is None or active.applied is None:
        return UNTHROTTLED
    return active.applied


def _trusted_view(
    snapshot: Snapshot, desired: dict[Pair, float | None], records: Mapping[Pair, PairRecord]
) -> Snapshot:
    """The snapshot, except where it shows a desired value the journal does not know to be in
    Kafka (pending, or last confirmed at another value): a broker answers DescribeClientQuotas
    from metadata that may lag the controller's, so it may show a value already replaced (the
    original, during a restore right after a throttle). Those pairs are written again (Kafka
    ignores a value it holds already) and verified."""
    view = {entity: dict(values) for entity, values in snapshot.items()}
    for pair, value in desired.items():
        record = records.get(pair)
        if record is None or not same_value(current_value(snapshot, pair), value):
            continue
        known = same_value(record.current_ours, value) and (
            not record.pending_known or same_value(record.pending, value)
        )
        if not known:
            view.setdefault(pair[0], {})[pair[1]] = _UNSEEN
    return view


def _landed(desired: dict[Pair, float | None], snapshot: Snapshot) -> dict[Pair, float | None]:
    """The desired values `snapshot` shows."""
    return {
        pair: value
        for pair, value in desired.items()
        if same_value(current_value(snapshot, pair), value)
    }


def _journal_already_says(
    episode: Episode, landed: dict[Pair, float | None], factor: float | None
) -> bool:
    """The journal already says exactly this (a repeated alert writes nothing)."""
    if factor is not None and episode.applied != factor:
        return False
    for pair, value in landed.items():
        record = episode.pairs.get(pair)
        if record is None or record.pending_known or not record.applied_known:
            return False
        if not same_value(record.applied, value):
            return False
    return True


def _report_stand_ins(cluster: str, done: Iterable[Change], metrics: EnforcerMetrics) -> None:
    """One warning per apply naming the values written as UNLIMITED in place of a non-finite
    original (Kafka 4.4+ refuses NaN and infinities; brokers enforce both as no limit), counted."""
    stand_ins = [c for c in done if c.stands_for is not None]
    if stand_ins:
        log.warning(
            "cluster %s: %d original(s) without effect that Kafka 4.4+ refuses to store (NaN, "
            "+inf) written as %s instead, which brokers enforce alike (no limit): %s",
            cluster,
            len(stand_ins),
            f"{UNLIMITED:.0f}",
            _first_few(f"{c.entity.label()} {c.key} (was {c.stands_for!r})" for c in stand_ins),
        )
        metrics.no_limit_stand_ins.labels(cluster).inc(len(stand_ins))
