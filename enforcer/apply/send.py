"""Send: validate the plan, then AlterClientQuotas with what Kafka's copy of the originals lacks
ahead of the changes that depend on it; each request journaled as in doubt until answered."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from enforcer.apply.cluster_io import ClusterIO
from enforcer.apply.plan import Plan
from enforcer.apply.result import ApplyError
from enforcer.apply.verify import described_until_landed
from enforcer.quota_client import QuotaClientError, QuotaRejected
from enforcer.quota_plan import Change


@dataclass(frozen=True, slots=True)
class Sent:
    """What the send phase sent of a plan's changes, and why Kafka rejected the rest."""

    changes: list[Change]
    rejected: list[str]


def send(io: ClusterIO, planned: Plan, copy_changes: list[Change]) -> Sent:
    """What Kafka's copy lacks first, in the same request(s) as the plan's changes that depend
    on it (`ClusterIO.alter`). When a request fails, what did land is journaled first."""
    if not planned.todo:
        io.alter(copy_changes)
        return Sent([], [])
    sendable, rejected = _validated(io, planned.todo)
    try:
        io.alter(copy_changes + sendable)
    except QuotaClientError:
        with contextlib.suppress(ApplyError, QuotaClientError):
            described_until_landed(io, planned, sendable)  # journals what did land
        raise
    return Sent(sendable, rejected)


def _validated(io: ClusterIO, todo: list[Change]) -> tuple[list[Change], list[str]]:
    """Validate the plan; entities Kafka rejects are left out so the rest still protects."""
    try:
        io.client.alter(todo, validate_only=True)
    except QuotaRejected as exc:
        if not exc.entities:
            raise
        bad = set(exc.entities)
        return [c for c in todo if c.entity not in bad], exc.errors
    return todo, []
