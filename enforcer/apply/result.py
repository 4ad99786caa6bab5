"""What an apply tells its caller: its result, or why it failed."""

from __future__ import annotations

from dataclasses import dataclass, field

from enforcer.quota_plan import Change, Pair


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
