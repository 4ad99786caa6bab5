"""The seam between the apply/restore protocol and where its state lives.

An apply or restore of one cluster (applier.py) reads and writes that cluster's throttle episode
and its requests in doubt, and must be the only one acting on the cluster while it does. Those
two needs are all it asks of the world besides Kafka, and `ClusterJournal` declares them: the
lock (`exclusive`) and the journal's operations, already bound to the cluster.

Today one process holds everything: `journal.LocalClusterJournal` is a thread lock in front of
the SQLite journal (`Journal.for_cluster`). A second enforcer replica would plug in here: an
implementation whose `exclusive` holds a lease every replica honours (per cluster) and whose
reads and writes go to state all replicas share, handed to each `Applier` instead of the local
one (see enforcer/README.md, *A second replica*). Nothing in the protocol's phases would change.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from contextlib import AbstractContextManager
from datetime import timedelta
from typing import Protocol

from enforcer.journal import Episode
from enforcer.quota_plan import Pair


class ClusterJournal(Protocol):
    """One cluster's durable throttle state and the lock that serialises acting on it. Every
    write is durable when it returns (the protocol journals before it acts)."""

    def exclusive(self) -> AbstractContextManager[object]:
        """Held for a whole apply (and a status read): nobody else acts on the cluster
        meanwhile. Need not be reentrant."""
        ...

    def unix_now(self) -> float: ...

    # The throttle episode (see journal.ThrottleEpisodes).
    def episode(self) -> Episode | None: ...

    def finished_ids(self) -> frozenset[str]: ...

    def recent_references(self, within: timedelta) -> dict[Pair, float]:
        """The references of the last episode if it finished less than `within` ago, else none
        (observed_rates.carried_over)."""
        ...

    def begin(
        self,
        originals: Mapping[Pair, float | None],
        target: float,
        episode_id: str | None = None,
        applied: Mapping[Pair, float | None] | None = None,
        references: Mapping[Pair, float] | None = None,
    ) -> Episode: ...

    def discard(self) -> None: ...

    def set_pending(self, pending: Mapping[Pair, float | None], target: float) -> None: ...

    def mark_drift(self, drift: Mapping[Pair, float | None]) -> None: ...

    def confirm(self, landed: Mapping[Pair, float | None], factor: float | None) -> None: ...

    def finish(self) -> None: ...

    # AlterClientQuotas requests without an answer (see journal.UnansweredRequests).
    def sending(self, values: Iterable[tuple[Pair, float | None]]) -> int: ...

    def answered(self, request: int) -> None: ...

    def in_doubt(self) -> list[tuple[float, Pair | None, float | None]]: ...

    def forget_unanswered(self) -> None: ...


class ClusterJournals(Protocol):
    """Where each cluster's `ClusterJournal` comes from (`journal.Journal` here)."""

    def for_cluster(self, cluster: str) -> ClusterJournal: ...
