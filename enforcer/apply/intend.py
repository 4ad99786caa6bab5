"""Intend: journal what the apply found and is about to do before anything that depends on it
is sent (`open_episode`, then `intend`)."""

from __future__ import annotations

import logging

from enforcer import kafka_originals
from enforcer.apply.cluster_io import ClusterIO
from enforcer.apply.plan import Plan
from enforcer.journal import Episode
from enforcer.kafka_originals import KafkaOriginals
from enforcer.log_lists import first_few
from enforcer.quota_plan import Change, Pair

log = logging.getLogger("kvq.enforcer")


def open_episode(io: ClusterIO, active: Episode | None, planned: Plan) -> Episode:
    """Intend, first: journal the originals the plan found that the journal lacks (a new
    episode when none is active) before anything that depends on them is sent. Returns the
    episode the rest of the apply acts on."""
    if active is not None and planned.late_references:
        active = io.journal.set_references(planned.late_references)
    if active is not None and not planned.discovered:
        return active
    episode_id = active.episode_id if active is not None else None
    references = planned.references if active is None else None
    return io.journal.begin(planned.discovered, planned.factor, episode_id, references=references)


def intend(io: ClusterIO, episode: Episode, planned: Plan) -> list[Change]:
    """Intend, then: journal the operators' changes found (kept from now on) and the values
    about to be set (pending: a crash after sending them knows them as ours). Returns what
    Kafka's copy of the originals lacks, to be sent first."""
    copy_changes = _copy_changes(episode, planned.view.copy, planned.factor)
    _report_undone(io, planned.drift, planned.reverted)
    if planned.drift:
        io.journal.mark_drift(planned.drift)
    if planned.request_sizes:
        io.journal.keep_request_sizes(planned.request_sizes)
    if planned.todo:
        pending = {(c.entity, c.key): c.value for c in planned.todo}
        io.journal.set_pending(pending, planned.factor)
    return copy_changes


def _copy_changes(episode: Episode, copy: KafkaOriginals, factor: float) -> list[Change]:
    """What Kafka's copy lacks (records, then the marker naming `factor`), and the removal of
    other episodes' leftovers: sent before, or with, any change of the plan."""
    originals = episode.originals()
    missing = kafka_originals.missing_records(episode.episode_id, originals, copy, factor)
    leftovers = copy.leftovers(keep=episode.episode_id)
    return missing + kafka_originals.removals(leftovers)


def _report_undone(io: ClusterIO, drift: dict[Pair, float | None], reverted: list[Pair]) -> None:
    """One warning per kind naming the first few pairs (a reconciler may reset thousands at
    once); each pair at debug."""
    cluster = io.name
    if reverted:
        log.warning(
            "cluster %s: %d value(s) were reset to their original while throttled (a "
            "reconciler such as Strimzi's User or Cluster Operator?); throttling them again: "
            "%s",
            cluster,
            len(reverted),
            first_few(f"{entity.label()} {key}" for entity, key in reverted),
        )
        io.metrics.reverted.labels(cluster).inc(len(reverted))
    if drift:
        log.warning(
            "cluster %s: %d value(s) were changed by someone else while throttled; keeping "
            "them and not restoring them: %s",
            cluster,
            len(drift),
            first_few(
                f"{entity.label()} {key} = {'unset' if value is None else value}"
                for (entity, key), value in drift.items()
            ),
        )
        io.metrics.drift_changes.labels(cluster).inc(len(drift))
    if log.isEnabledFor(logging.DEBUG):
        for entity, key in reverted:
            log.debug("cluster %s: reset to its original: %s %s", cluster, entity.label(), key)
        for (entity, key), value in drift.items():
            log.debug(
                "cluster %s: changed by someone else: %s %s = %s",
                cluster,
                entity.label(),
                key,
                "unset" if value is None else value,
            )
