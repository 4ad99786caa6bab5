"""One cluster between two applies, as the Enforcer reads it."""

from __future__ import annotations

from dataclasses import dataclass

from enforcer.journal import Episode
from kvq.model.throttle_factor_policy import UNTHROTTLED


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
        return active(self.episode) is not None or self.condition.work_left


def active(episode: Episode | None) -> Episode | None:
    """`episode` if it is active (a throttle on), else None."""
    return episode if episode is not None and episode.active else None


def applied_factor(episode: Episode | None) -> float:
    """The factor applied completely: UNTHROTTLED without an active episode, or before its
    first factor landed."""
    on = active(episode)
    if on is None or on.applied is None:
        return UNTHROTTLED
    return on.applied
