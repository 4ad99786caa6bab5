"""The journal's state in Kafka (kvq.enforcer.state.store=kafka): what one replica commits the
next one reads back, a replica another has taken over from gets no write through, and a SQLite
journal carries over on the first take-over. On the run's shared 3-node Kafka cluster, each test
with a topic and transactional id of its own."""

from __future__ import annotations

import uuid

import pytest

from enforcer.journal import ACTIVE, JournalError, NotActing
from enforcer.journal import Journal as SqliteJournal
from enforcer.kafka_state import KafkaState
from enforcer.state_log import StateLog
from kvq.kafka.quota_entity import QuotaEntity

pytestmark = pytest.mark.integration

CLUSTER = "c1"
P = "producer_byte_rate"
ALICE = QuotaEntity.user("alice")
BOB = QuotaEntity.user("bob")


class Replica:
    """One enforcer replica's journal: a working copy of its own, the state in Kafka."""

    def __init__(self, kafka, path, topic: str, transactional_id: str) -> None:
        log = StateLog(kafka.admin_properties, topic, transactional_id, timeout_seconds=30)
        self.state = KafkaState({CLUSTER: log})
        self.journal = SqliteJournal(path, sink=self.state)

    def take_over(self) -> int:
        return self.state.take_over(self.journal, CLUSTER)

    def close(self) -> None:
        self.state.close()
        self.journal.close()


@pytest.fixture
def replicas(shared_kafka, tmp_path):
    """A factory of replicas sharing one fresh topic and transactional id; all closed after."""
    topic = f"kvq-state-{uuid.uuid4().hex[:8]}"
    transactional_id = f"kvq-enforcer.{topic}"
    made: list[Replica] = []

    def replica(name: str) -> Replica:
        made.append(Replica(shared_kafka, tmp_path / f"{name}.sqlite3", topic, transactional_id))
        return made[-1]

    yield replica
    for one in made:
        one.close()


def test_the_replica_taking_over_reads_every_row_the_other_committed(replicas):
    first = replicas("first")
    first.take_over()
    first.journal.episodes.begin(CLUSTER, {(ALICE, P): 800.0, (BOB, P): None}, 0.5)
    first.journal.episodes.set_pending(CLUSTER, {(ALICE, P): 400.0}, 0.5)
    request = first.journal.unanswered.sending(CLUSTER, [((ALICE, P), 400.0)])
    first.journal.alerts.replace_group("g1", {(CLUSTER, "f1"): 0.5})
    first.journal.request_sizes.keep(CLUSTER, {(ALICE, P): 24_576.0})

    second = replicas("second")
    assert second.journal.episodes.episode(CLUSTER) is None  # its working copy starts empty
    second.take_over()

    assert second.journal.episodes.episode(CLUSTER) == first.journal.episodes.episode(CLUSTER)
    assert second.journal.unanswered.in_doubt(CLUSTER) == first.journal.unanswered.in_doubt(CLUSTER)
    assert second.journal.alerts.firing_factors(CLUSTER) == [0.5]
    # what the episode estimated of each entity's requests: raised from the standby's first plan
    assert second.journal.request_sizes.sizes(CLUSTER) == {(ALICE, P): 24_576.0}
    assert request == 1


def test_a_replica_taken_over_from_gets_no_write_through_and_keeps_nothing_it_tried(replicas):
    first = replicas("first")
    first.take_over()
    first.journal.episodes.begin(CLUSTER, {(ALICE, P): 800.0}, 0.5)
    second = replicas("second")
    second.take_over()

    with pytest.raises(NotActing, match="another replica took over"):
        first.journal.unanswered.sending(CLUSTER, [((ALICE, P), 0.0)])
    assert first.journal.unanswered.in_doubt(CLUSTER) == []  # rolled back, not sent
    assert not first.state.acting(CLUSTER)
    with pytest.raises(NotActing):  # and it stays out until it takes over again
        first.journal.episodes.finish(CLUSTER)

    second.journal.episodes.confirm(CLUSTER, {(ALICE, P): 400.0}, 0.5)
    third = replicas("third")
    third.take_over()
    episode = third.journal.episodes.episode(CLUSTER)
    assert episode.state == ACTIVE and episode.applied == 0.5
    assert third.journal.unanswered.in_doubt(CLUSTER) == []


def test_a_replica_that_has_not_taken_over_writes_nothing(replicas):
    idle = replicas("idle")
    with pytest.raises(NotActing, match="not acting on cluster c1"):
        idle.journal.episodes.begin(CLUSTER, {(ALICE, P): 800.0}, 0.5)
    assert idle.journal.episodes.episode(CLUSTER) is None


def test_taking_over_again_replaces_a_working_copy_that_went_stale(replicas):
    first = replicas("first")
    first.take_over()
    first.journal.episodes.begin(CLUSTER, {(ALICE, P): 800.0}, 0.5)
    second = replicas("second")
    second.take_over()
    second.journal.episodes.finish(CLUSTER)

    first.take_over()  # back to the first (the second was, say, drained)
    assert first.journal.episodes.episode(CLUSTER).state != ACTIVE
    assert first.journal.episodes.finished_ids(CLUSTER) == second.journal.episodes.finished_ids(
        CLUSTER
    )


def test_a_sqlite_journal_carries_over_on_the_first_take_over_only(replicas, tmp_path):
    old = SqliteJournal(tmp_path / "upgraded.sqlite3")  # written by a version before the store
    old.episodes.begin(CLUSTER, {(ALICE, P): 800.0, (BOB, P): None}, 0.0)
    old.unanswered.sending(CLUSTER, [((ALICE, P), 8192.0)])
    expected = old.episodes.episode(CLUSTER)
    old.close()

    upgraded = replicas("upgraded")  # the same file, now with the state in Kafka
    assert upgraded.take_over() > 0
    fresh = replicas("fresh")
    fresh.take_over()
    assert fresh.journal.episodes.episode(CLUSTER) == expected
    assert [v for _, _, v in fresh.journal.unanswered.in_doubt(CLUSTER)] == [None, 8192.0]

    stale = SqliteJournal(tmp_path / "stale.sqlite3")  # a leftover copy, once the state is in Kafka
    stale.episodes.begin(CLUSTER, {(BOB, P): 1.0}, 0.9)
    stale.close()
    later = replicas("stale")
    later.take_over()
    assert later.journal.episodes.episode(CLUSTER) == expected  # Kafka's, not the leftover's


def test_kafka_unreachable_is_a_journal_error_naming_the_topic(tmp_path):
    log = StateLog(
        {"bootstrap.servers": "127.0.0.1:1"}, "kvq-state-x", "kvq-enforcer.x", timeout_seconds=2
    )
    state = KafkaState({CLUSTER: log})
    journal = SqliteJournal(tmp_path / "j.sqlite3", sink=state)
    try:
        with pytest.raises(JournalError, match="kvq-state-x"):
            state.take_over(journal, CLUSTER)
        assert not state.acting(CLUSTER)
    finally:
        state.close()
        journal.close()
