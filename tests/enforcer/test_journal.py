"""The SQLite journal: durable originals, pending values, drift and alert state."""

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap

import pytest

from enforcer.journal import ACTIVE, FINISHED_KEPT, RESTORED, WRITTEN_KEPT, Journal
from kvq.kafka.quota_entity import QuotaEntity

P = "producer_byte_rate"
DEFAULT = QuotaEntity.default_user()
ALICE = QuotaEntity.user("alice")


def test_originals_are_kept_from_the_first_write_and_never_overwritten(tmp_path):
    journal = Journal(tmp_path / "j.sqlite3")
    journal.episodes.begin("c1", {(DEFAULT, P): None, (ALICE, P): 800.0}, 0.5)
    journal.episodes.begin("c1", {(ALICE, P): 400.0}, 0.0)
    episode = journal.episodes.episode("c1")
    assert episode.state == ACTIVE
    assert episode.pairs[(ALICE, P)].original == 800.0
    assert episode.pairs[(DEFAULT, P)].original is None


def test_pending_applied_and_drift_shape_what_is_expected_in_kafka(tmp_path):
    journal = Journal(tmp_path / "j.sqlite3")
    journal.episodes.begin("c1", {(ALICE, P): 800.0}, 0.5)
    assert journal.episodes.episode("c1").pairs[(ALICE, P)].expected() == [800.0]
    journal.episodes.set_pending("c1", {(ALICE, P): 400.0}, 0.5)
    assert journal.episodes.episode("c1").pairs[(ALICE, P)].expected() == [800.0, 400.0]
    journal.episodes.confirm("c1", {(ALICE, P): 400.0}, 0.5)
    record = journal.episodes.episode("c1").pairs[(ALICE, P)]
    assert record.expected() == [400.0] and journal.episodes.episode("c1").applied == 0.5
    journal.episodes.mark_drift("c1", {(ALICE, P): 999.0})
    assert journal.episodes.episode("c1").drifted() == {(ALICE, P)}


def test_finished_episode_stays_readable_and_the_next_one_starts_fresh(tmp_path):
    journal = Journal(tmp_path / "j.sqlite3")
    journal.episodes.begin("c1", {(ALICE, P): 800.0}, 0.5)
    journal.episodes.finish("c1")
    assert journal.episodes.episode("c1").state == RESTORED
    assert journal.episodes.active_clusters() == []
    journal.episodes.begin("c1", {(ALICE, P): 700.0}, 0.5)
    assert journal.episodes.episode("c1").pairs[(ALICE, P)].original == 700.0


def test_alert_groups_are_replaced_whole_and_summed_per_cluster(tmp_path):
    journal = Journal(tmp_path / "j.sqlite3")
    journal.alerts.replace_group("g1", {("c1", "f1"): 0.5, ("c2", "f2"): 0.0})
    journal.alerts.replace_group("g2", {("c1", "f3"): 0.2})
    assert sorted(journal.alerts.firing_factors("c1")) == [0.2, 0.5]
    journal.alerts.replace_group("g1", {})
    assert journal.alerts.firing_factors("c1") == [0.2]
    assert journal.alerts.firing_factors("c2") == []


def test_durable_settings_are_in_force(tmp_path):
    journal = Journal(tmp_path / "j.sqlite3")
    assert journal._db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL: fsync on commit
    assert journal._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_write_survives_sigkill_right_after_it_returns(tmp_path):
    path = tmp_path / "j.sqlite3"
    script = textwrap.dedent(
        f"""
        import os, signal
        from enforcer.journal import Journal
        from kvq.kafka.quota_entity import QuotaEntity
        j = Journal({str(path)!r})
        j.episodes.begin("c1", {{(QuotaEntity.user("alice"), "producer_byte_rate"): 800.0}}, 0.0)
        alice = (QuotaEntity.user("alice"), "producer_byte_rate")
        j.episodes.set_pending("c1", {{alice: 1.0}}, 0.0)
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], cwd=os.getcwd(), timeout=30)
    assert proc.returncode == -signal.SIGKILL
    record = Journal(path).episodes.episode("c1").pairs[(ALICE, P)]
    assert record.original == 800.0 and record.pending == 1.0


def test_a_failed_transaction_leaves_nothing_behind(tmp_path):
    journal = Journal(tmp_path / "j.sqlite3")

    def broken(db: sqlite3.Connection) -> None:
        db.execute("INSERT INTO alert VALUES ('g', 'c1', 'f', 0.5, 'now')")
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        journal.write(broken)
    assert journal.alerts.firing_factors("c1") == []


def test_values_written_during_an_episode_are_remembered_bounded_and_forgotten_at_its_end(
    tmp_path,
):
    journal = Journal(tmp_path / "j.sqlite3")
    journal.episodes.begin("c1", {(ALICE, P): 800.0}, 0.5)
    for value in (400.0, 200.0, 400.0, float("nan"), None):
        journal.episodes.set_pending("c1", {(ALICE, P): value}, 0.5)
    record = journal.episodes.episode("c1").pairs[(ALICE, P)]
    assert record.written[:2] == (200.0, 400.0) and record.written[3] is None
    assert record.wrote(float("nan")) and record.wrote(None) and not record.wrote(800.0)
    for value in range(WRITTEN_KEPT + 3):
        journal.episodes.set_pending("c1", {(ALICE, P): float(value)}, 0.5)
    record = journal.episodes.episode("c1").pairs[(ALICE, P)]
    assert record.written == tuple(float(v) for v in range(3, WRITTEN_KEPT + 3))
    journal.episodes.finish("c1")
    assert journal.episodes.episode("c1").pairs[(ALICE, P)].written == ()


def test_finished_episode_ids_are_remembered_durably_and_bounded(tmp_path):
    """A lagging broker may still show a finished episode's copy in Kafka: its id is known."""
    path = tmp_path / "j.sqlite3"
    journal = Journal(path)
    for n in range(FINISHED_KEPT + 2):
        journal.episodes.begin("c1", {(ALICE, P): 800.0}, 0.5, episode_id=f"e{n}")
        journal.episodes.finish("c1")
    journal.episodes.begin("c2", {(ALICE, P): 800.0}, 0.5, episode_id="other")
    assert journal.episodes.finished_ids("c2") == frozenset(), "active: not finished"
    journal.close()
    reopened = Journal(path)
    kept = reopened.episodes.finished_ids("c1")
    assert kept == {f"e{n}" for n in range(2, FINISHED_KEPT + 2)}, "the latest, after a restart"


def _journal_from_before_the_written_values(path, state: str = "active") -> None:
    old = sqlite3.connect(path)
    old.executescript(
        """
        CREATE TABLE episode (cluster TEXT PRIMARY KEY, state TEXT NOT NULL,
            started_at TEXT NOT NULL, updated_at TEXT NOT NULL, target REAL, applied REAL,
            episode_id TEXT);
        CREATE TABLE pair (cluster TEXT NOT NULL, entity TEXT NOT NULL, key TEXT NOT NULL,
            original REAL, applied REAL, applied_known INTEGER NOT NULL DEFAULT 0, pending REAL,
            pending_known INTEGER NOT NULL DEFAULT 0, drift REAL,
            drifted INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (cluster, entity, key));
        """
    )
    old.execute("INSERT INTO episode VALUES ('c1', ?, 't0', 't0', 0.5, 0.5, 'e1')", (state,))
    old.execute(
        "INSERT INTO pair VALUES ('c1', ?, ?, 800.0, 400.0, 1, NULL, 0, NULL, 0)",
        (ALICE.to_json(), P),
    )
    old.commit()
    old.close()


def test_a_journal_from_before_the_written_values_opens_and_works(tmp_path):
    path = tmp_path / "j.sqlite3"
    _journal_from_before_the_written_values(path)
    journal = Journal(path)
    record = journal.episodes.episode("c1").pairs[(ALICE, P)]
    assert record.original == 800.0 and record.current_ours == 400.0 and record.written == ()
    journal.episodes.set_pending("c1", {(ALICE, P): 200.0}, 0.25)
    assert journal.episodes.episode("c1").pairs[(ALICE, P)].written == (200.0,)


def test_a_journal_from_before_finished_ids_knows_its_restored_episode_as_finished(tmp_path):
    path = tmp_path / "j.sqlite3"
    _journal_from_before_the_written_values(path, state=RESTORED)
    journal = Journal(path)
    assert journal.episodes.finished_ids("c1") == {"e1"}
    journal.episodes.begin("c1", {(ALICE, P): 900.0}, 0.5, episode_id="e2")
    journal.episodes.finish("c1")
    journal.close()
    assert Journal(path).episodes.finished_ids("c1") == {"e1", "e2"}
