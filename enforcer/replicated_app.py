"""Wiring of an enforcer whose state lives in Kafka (kvq.enforcer.state.store=kafka): each
cluster's state log, the journal's working copy handing its rows to them, the inbox and the
election, around the same Enforcer the local store runs (built anew each time this replica
starts acting)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial

from enforcer.acting_role import ActingRole
from enforcer.enforcer import Enforcer
from enforcer.inbox import Inbox, is_inbox
from enforcer.journal import Journal
from enforcer.kafka_state import KafkaState
from enforcer.metrics import EnforcerMetrics
from enforcer.replica import Replica
from enforcer.settings import EnforcerSettings
from enforcer.state_log import StateLog, ensure_state_topic


def transactional_id(settings: EnforcerSettings, cluster: str) -> str:
    """The id whose epoch fences the writers of `cluster`'s state."""
    return f"{settings.state_group}.{cluster}"


def state_of(all_settings: Sequence[EnforcerSettings]) -> KafkaState:
    """Every cluster's state log (in that cluster's Kafka), not taken over yet."""
    first = all_settings[0]
    return KafkaState(
        {
            s.config.cluster_name: StateLog(
                s.config.admin_properties,
                s.state_topic,
                transactional_id(first, s.config.cluster_name),
            )
            for s in all_settings
        }
    )


def replica_of(
    all_settings: Sequence[EnforcerSettings],
    open_journal: Callable[[KafkaState], Journal],
    build: Callable[[Journal, EnforcerMetrics], Enforcer],
) -> Replica:
    """The replica of the clusters `all_settings` describe; the election and the inbox are on
    the first cluster's state topic."""
    first = all_settings[0]
    names = tuple(s.config.cluster_name for s in all_settings)
    metrics = EnforcerMetrics(names, first.config.cluster_label)
    state = state_of(all_settings)
    journal = open_journal(state)

    def role_of(
        on_acting: Callable[[bool], bool], on_inbox: Callable[[str, bytes], None]
    ) -> ActingRole:
        return ActingRole(
            first.config.admin_properties,
            first.state_topic,
            first.state_group,
            on_acting,
            on_inbox,
            is_inbox,
            before_join=partial(
                ensure_state_topic, first.config.admin_properties, first.state_topic
            ),
        )

    return Replica(
        names,
        journal,
        state,
        Inbox(first.config.admin_properties, first.state_topic),
        lambda: build(journal, metrics),
        metrics,
        role_of,
    )


def import_journal(
    all_settings: Sequence[EnforcerSettings], journal: Journal
) -> Mapping[str, int | None]:
    """Each cluster's rows of a SQLite journal into its state topic, unless Kafka holds its
    state already: per cluster the rows imported, or None."""
    state = state_of(all_settings)
    try:
        return {c: state.import_rows(journal, c) for c in state.clusters}
    finally:
        state.close()
