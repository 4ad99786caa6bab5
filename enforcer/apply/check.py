"""The look between applies while a throttle is in force: would an apply at the applied factor
change something? The view it read is handed to the apply it triggers (`recent_look`)."""

from __future__ import annotations

import logging

from enforcer import kafka_originals
from enforcer.apply.cluster_io import ClusterIO
from enforcer.apply.plan import Planner
from enforcer.apply.view import View
from enforcer.journal import Episode
from enforcer.quota_client import QuotaClientError
from enforcer.quota_plan import Snapshot, current_value
from kvq.kafka.quota_entity import QuotaEntity

log = logging.getLogger("kvq.enforcer")

LOOK_REUSE_S = 1.0
"""How old a check's view may be for the apply it triggers to act on it (it follows at once)."""


class ThrottleCheck:
    """Checks of one cluster's throttle in force, and what the last one read."""

    def __init__(self, io: ClusterIO, planner: Planner) -> None:
        self._io = io
        self._planner = planner
        self._looked: View | None = None
        """What the last check read, when it found a change (`recent_look`)."""
        self._seen_entities: frozenset[QuotaEntity] = frozenset()
        """The quota entities (Kafka's copy of the originals left out) of the last plan's view."""

    def planned_from(self, view: View) -> None:
        """An apply planned from `view`: a check needs no plan while Kafka holds no entity it
        did not show."""
        self._seen_entities = frozenset(view.snapshot)

    def changed(self, active: Episode, applied: float) -> bool:
        """One DescribeClientQuotas, and whether an apply at the `applied` factor of the
        `active` episode would change something (a value a reconciler reset or an operator
        changed, an entity to throttle that appeared, a value missing). Writes nothing; False
        when Kafka cannot be asked (the reconcile loop finds out)."""
        io = self._io
        described_at = io.monotonic()
        io.metrics.throttle_checks.labels(io.name).inc()
        try:
            full = io.client.describe()
        except QuotaClientError as exc:
            log.debug("cluster %s: cannot look at the throttle: %s", io.name, exc)
            return False
        if self._as_last_seen(active, full):
            return False
        snapshot, copy = kafka_originals.split(full)
        held = copy.episodes.get(active.episode_id, {})
        view = View(described_at, snapshot, copy)
        changed = self._planner.plan(active, held, view, applied).changes_something
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

    def recent_look(self) -> View | None:
        """The view a check that found the throttle changed just read (taken once, and only
        within LOOK_REUSE_S): the apply that follows acts on it instead of describing again, a
        round trip less before a reset is throttled again (a long one at 20,000 pairs)."""
        looked, self._looked = self._looked, None
        if looked is None or self._io.monotonic() - looked.described_at > LOOK_REUSE_S:
            return None
        return looked
