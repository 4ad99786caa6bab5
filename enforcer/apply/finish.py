"""Finish a restore: remove Kafka's copy of the originals (its marker first, so records left by
a crash are never trusted), then journal the episode as finished."""

from __future__ import annotations

from enforcer import kafka_originals
from enforcer.apply.cluster_io import ClusterIO
from enforcer.apply.plan import Plan
from enforcer.kafka_originals import KafkaOriginals
from enforcer.quota_plan import Change


def finish(io: ClusterIO, planned: Plan, copy_changes: list[Change]) -> None:
    """The restore `planned` landed and settled: its copy goes, then the episode ends."""
    written = {c.entity for c in copy_changes if c.value is not None}
    leftovers = set(planned.view.copy.leftovers(keep=None))
    io.alter(kafka_originals.removals(leftovers | written))
    io.journal.finish()


def remove_copy(io: ClusterIO, copy: KafkaOriginals, keep: str | None) -> None:
    """Remove what Kafka's copy holds of episodes other than `keep` (None: all of it)."""
    io.alter(kafka_originals.removals(copy.leftovers(keep)))
