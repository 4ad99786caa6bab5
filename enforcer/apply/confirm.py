"""Confirm: journal the values verified in Kafka, and the factor as applied once all of the plan
landed and no request in doubt can still change that."""

from __future__ import annotations

from enforcer.apply.plan import Plan
from enforcer.apply.verify import landed
from enforcer.journal import ClusterJournal, Episode
from enforcer.quota_plan import Pair, Snapshot, same_value


def confirm(
    journal: ClusterJournal, episode: Episode, planned: Plan, after: Snapshot, complete: bool
) -> None:
    """Journal what of `planned` the view `after` shows, and its factor when `complete`. A
    repeated alert that changes nothing writes nothing."""
    shown = landed(planned.desired, after)
    factor = planned.factor if complete else None
    if planned.todo or not _journal_already_says(episode, shown, factor):
        journal.confirm(shown, factor)


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
