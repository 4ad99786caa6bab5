"""Plan: what one apply is to do, decided from the journal's originals and one view of the
quotas before anything is written (a crash here leaves no trace)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from enforcer.apply.cluster_io import ClusterIO
from enforcer.apply.late_references import LateReferences
from enforcer.apply.view import View
from enforcer.journal import Episode, PairRecord
from enforcer.log_lists import first_few
from enforcer.observed_rates import ObservedRates
from enforcer.quota_plan import (
    Change,
    Pair,
    QuotaPolicy,
    Requests,
    Snapshot,
    changes,
    current_value,
    held_references,
    plan,
    same_value,
    tracked_originals,
)
from enforcer.request_sizes import RequestSizes
from kvq.model.throttle_factor_policy import UNTHROTTLED

log = logging.getLogger("kvq.enforcer")


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
    late_references: dict[Pair, float] = field(default_factory=dict)
    """Observed rates found for an active episode begun without any (late_references.py),
    journaled before anything is sent."""
    request_sizes: dict[Pair, float] = field(default_factory=dict)
    """Request sizes the journal is to keep and does not hold yet (`RequestSizes.kept`): the
    next episode, or this one after a restart, starts from them."""

    @property
    def restoring(self) -> bool:
        return self.factor >= UNTHROTTLED

    @property
    def changes_something(self) -> bool:
        """An apply of this plan would change something in Kafka or the journal."""
        return bool(
            self.todo
            or self.drift
            or self.reverted
            or self.discovered
            or self.late_references
            or self.request_sizes
        )


@dataclass(frozen=True, slots=True)
class Planner:
    """Plans one cluster's applies with its policy."""

    io: ClusterIO
    policy: QuotaPolicy
    observed_rates: ObservedRates | None = None
    """With kvq.enforcer.throttle.reference=observed-rate: where a new episode's reference
    rates come from (observed_rates.py); None scales the originals."""
    late: LateReferences | None = None
    """With observed rates: asks again for the references of an episode begun without any."""
    request_sizes: RequestSizes | None = None
    """With observed rates: each throttled entity's request size, from its throttle times."""

    def plan(
        self,
        on: Episode | None,
        held: Mapping[Pair, float | None],
        view: View,
        factor: float,
    ) -> Plan:
        """What the apply is to do, from the active episode (`on`: its journaled pairs; None
        without one), the records of them Kafka's copy holds (`held`) and one view of the
        quotas. Writes nothing."""
        records = on.pairs if on is not None else {}
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
        late = self._late_references(on, factor)
        references = {p: r.reference for p, r in records.items() if r.reference is not None}
        references.update(captured)
        references.update(late)
        window = self.io.quota_window
        policy = replace(
            self.policy,
            quota_window_seconds=window.seconds,
            quota_sample_seconds=window.sample_seconds,
            throttle_average_seconds=window.average_seconds,
        )
        requests = self._requests(on, policy, factor)
        desired = plan(policy, {**originals, **discovered}, factor, frozen, references, requests)
        # Users the plan separates from the default user's quota (quota_plan.separated_user):
        # journaled with no original before their quota is sent, like any pair found now.
        discovered.update({p: None for p in desired if p not in originals and p not in discovered})
        if self.request_sizes is not None and factor < UNTHROTTLED:
            held = held_references(policy, {**originals, **discovered}, references)
            self.request_sizes.held(desired, held)
        trusted = _trusted_view(view.snapshot, desired, records)
        todo = changes(desired, trusted, {**originals, **discovered})
        drifted = len(drift) + sum(1 for record in records.values() if record.drifted)
        sizes = {}
        if self.request_sizes is not None:
            escaping = len(self.request_sizes.escaping)
            self.io.metrics.escaping.labels(self.io.name).set(escaping)
            if requests is not None:
                sizes = self.request_sizes.unjournaled
        return Plan(
            factor, view, discovered, drift, reverted, drifted, desired, todo, captured, late, sizes
        )

    def _requests(self, on: Episode | None, policy: QuotaPolicy, factor: float) -> Requests | None:
        """What is known of the requests of the active episode's entities: a restore forgets
        them, a new episode starts from the journal's (`_recall_sizes`)."""
        if self.request_sizes is None:
            return None
        if on is None or factor >= UNTHROTTLED:
            self.request_sizes.forget()
        if factor >= UNTHROTTLED:
            return None
        if not self.request_sizes.recalled:
            self._recall_sizes(on)
        return self.request_sizes.requests(self.io.name, policy, policy.quota_window_seconds)

    def _recall_sizes(self, on: Episode | None) -> None:
        """Start the episode's estimates from the journal's: the episodes' before for a new
        one (`on` None), its own too for a running one (the enforcer restarted). Said once,
        naming a few."""
        assert self.request_sizes is not None
        sizes = self.io.journal.request_sizes()
        self.request_sizes.recall(sizes)
        if sizes:
            log.info(
                "cluster %s: the episode starts from the request sizes %s estimated: %s",
                self.io.name,
                "the last episode" if on is None else "it",
                first_few(f"{entity.label()} {size:.0f} B" for (entity, _), size in sizes.items()),
            )

    def journaled_sizes(self, sizes: Mapping[Pair, float]) -> None:
        """A plan's request sizes (`Plan.request_sizes`) are in the journal now."""
        if self.request_sizes is not None:
            self.request_sizes.journaled(sizes)

    def _late_references(self, on: Episode | None, factor: float) -> dict[Pair, float]:
        """The references of an active episode begun without any, if found now."""
        if self.late is None or on is None or factor >= UNTHROTTLED:
            return {}
        return self.late.found(self.io.name, self.policy, on.pairs, on.episode_id, on.started_at)

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
        previous = self.io.journal.recent_references(self.observed_rates.lookback)
        if self.late is not None:
            self.late.asked_first()
        return self.observed_rates.references(self.io.name, self.policy, discovered, previous)

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
                or self.io.unanswered.may_have_set(pair, value)
            ):
                continue
            if not same_value(value, record.original):
                drift[pair] = value
            else:
                reverted.append(pair)
        return drift, reverted


_UNSEEN = -1.0
"""Stands for a value not trusted as seen: Kafka holds no quota <= 0 and no plan sets one."""


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
