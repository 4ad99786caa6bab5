"""Recovery from Kafka's copy of the originals (kafka_originals.py) when the journal lost them.

Kafka's marked episode is current: markers are removed before the journal finishes an episode.
A journal that does not know it was lost or rolled back, and takes its originals from Kafka,
assuming the values Kafka holds now are the enforcer's own (`recover`; every apply does this with
the view it describes anyway). The firing alerts were lost with the journal, so after a start a
throttle adopted from Kafka is held at the factor its marker names, as a firing alert of its own
(`RecoveredThrottles`), until Alertmanager sends anything about the cluster or
kvq.enforcer.alert.expiry passes: restoring at once would leave a disk that may still be full
unprotected until Alertmanager's next repeat.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from enforcer.journal import ClusterJournal, Episode, FiringAlerts
from enforcer.kafka_originals import KafkaOriginals
from enforcer.metrics import EnforcerMetrics
from enforcer.quota_plan import Snapshot, current_value
from kvq.model.throttle_factor_policy import UNTHROTTLED

log = logging.getLogger("kvq.enforcer")
RECOVERED_GROUP = "kvq-enforcer/recovered-from-kafka/"
"""Alert group (+ cluster) holding the factor of a throttle recovered from Kafka's copy of the
originals until Alertmanager says something about that cluster."""


def unknown_throttle(active: Episode | None, copy: KafkaOriginals) -> str | None:
    """The id of the throttle Kafka's copy marks that the journal does not know as its active
    episode (None: no marked throttle, or the known one). OriginalsUnknown when the copy cannot
    be trusted."""
    kafka_id = copy.current()
    if kafka_id is None or (active is not None and active.episode_id == kafka_id):
        return None
    return kafka_id


def recover(
    journal: ClusterJournal,
    cluster: str,
    metrics: EnforcerMetrics,
    active: Episode | None,
    snapshot: Snapshot,
    copy: KafkaOriginals,
    factor: float,
) -> Episode | None:
    """Reconcile the journal's `active` episode with Kafka's copy of the originals: take from
    Kafka what the journal lacks (an episode it does not know replaces the journal's, begun at
    `factor`). Returns the active episode afterwards."""
    kafka_id = copy.current()
    if kafka_id is None:
        return active
    held = copy.episodes.get(kafka_id, {})
    if active is not None and active.episode_id == kafka_id:
        missing = {p: v for p, v in held.items() if p not in active.pairs}
        if not missing:
            return active
        log.warning(
            "cluster %s: the journal lacks %d original(s) Kafka's copy holds (rolled back?); "
            "taking them from Kafka",
            cluster,
            len(missing),
        )
    else:
        missing = held
        log.warning(
            "cluster %s: the journal does not know the throttle %s that Kafka's copy of the "
            "originals records (journal lost or rolled back): recovering %d original(s) "
            "from Kafka",
            cluster,
            kafka_id,
            len(held),
        )
        journal.discard()
    current = {pair: current_value(snapshot, pair) for pair in missing}
    episode = journal.begin(missing, factor, episode_id=kafka_id, applied=current)
    metrics.originals_recovered.labels(cluster).inc(len(missing))
    return episode


class RecoveredThrottles:
    """Throttles adopted from Kafka's copy, held as firing alerts (group RECOVERED_GROUP +
    cluster, kept in the journal like Alertmanager's) until Alertmanager speaks."""

    def __init__(self, alerts: FiringAlerts, clusters: Iterable[str]) -> None:
        self._alerts = alerts
        self._held = {c for c in clusters if alerts.group_state(RECOVERED_GROUP + c)}
        self._heard_from: set[str] = set()
        """Clusters Alertmanager has sent an alert about since start."""

    def heard_from(self, clusters: Iterable[str]) -> None:
        """Alertmanager sent something about `clusters`."""
        self._heard_from.update(clusters)

    def held(self, cluster: str) -> bool:
        return cluster in self._held

    def hold(self, cluster: str, factor: float | None) -> None:
        """Hold a throttle adopted at `factor` (None: none adopted) until Alertmanager speaks;
        nothing to hold when it spoke already (its alerts say what to apply)."""
        if factor is None or factor >= UNTHROTTLED or cluster in self._heard_from:
            return
        log.warning(
            "cluster %s: holding the recovered throttle at factor %s until Alertmanager sends "
            "an alert about this cluster",
            cluster,
            factor,
        )
        self._alerts.replace_group(RECOVERED_GROUP + cluster, {(cluster, "journal-lost"): factor})
        self._held.add(cluster)

    def release_if_heard(self, cluster: str) -> None:
        """Alertmanager knows about the cluster now: its alerts replace the hold."""
        if cluster in self._held and cluster in self._heard_from:
            self._alerts.replace_group(RECOVERED_GROUP + cluster, {})
            self._held.discard(cluster)
