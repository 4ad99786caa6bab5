"""The devcluster's quotas on disk: an alteration writes its change, not the whole store, and the
store loads after a crash at any point (a torn journal line, a compaction cut short)."""

from __future__ import annotations

from pathlib import Path

from devcluster.quota_files import QuotaFiles, apply
from devcluster.quota_store import MAX_RECORDS_PER_USER_OP, Alteration, Op, QuotaStore, entity_key

KEY = "producer_byte_rate"


def user(index: int) -> tuple[tuple[str, str | None], ...]:
    return (("user", f"user-{index:05d}"),)


def set_users(store: QuotaStore, users: range, value: float) -> None:
    for start in range(users.start, users.stop, MAX_RECORDS_PER_USER_OP):
        batch = range(start, min(start + MAX_RECORDS_PER_USER_OP, users.stop))
        results = store.alter([Alteration(user(i), (Op(KEY, value),)) for i in batch])
        assert all(r.error_code == 0 for r in results)


def everything(store: QuotaStore) -> dict:
    return dict(store.describe([]))


def written_bytes() -> int:
    """Bytes this thread has passed to write() so far (the kernel's per-thread accounting)."""
    for line in Path("/proc/thread-self/io").read_text().splitlines():
        if line.startswith("wchar:"):
            return int(line.split()[1])
    raise AssertionError("no wchar in /proc/thread-self/io")


def test_altering_single_quotas_among_20000_writes_the_changes_not_the_store(tmp_path):
    path = tmp_path / "quotas.json"
    store = QuotaStore(path)
    set_users(store, range(20_000), 1000.0)
    whole = QuotaFiles(tmp_path / "whole.json", entity_key)
    whole.compact(everything(store))
    whole_store = whole.snapshot.stat().st_size
    before = written_bytes()
    for index in range(200):
        set_users(store, range(index, index + 1), 500.0)
    assert written_bytes() - before < 2 * whole_store, "200 alterations rewrote the store"
    reloaded = everything(QuotaStore(path))
    assert reloaded == everything(store)
    assert reloaded[user(199)] == {KEY: 500.0} and reloaded[user(200)] == {KEY: 1000.0}


def test_a_crash_at_any_byte_of_a_journal_write_loses_only_that_unanswered_change(tmp_path):
    path = tmp_path / "quotas.json"
    store = QuotaStore(path)
    set_users(store, range(3), 1000.0)
    answered = everything(store)
    journal = path.with_suffix(".journal")
    complete = journal.read_bytes()
    set_users(store, range(3), 2000.0)
    line = journal.read_bytes()[len(complete) :]
    for cut in range(len(line)):
        journal.write_bytes(complete + line[:cut])
        reloaded = QuotaStore(path)
        assert everything(reloaded) == answered, f"cut at byte {cut} of {line!r}"
        set_users(reloaded, range(5, 6), 7.0)  # appended after the torn bytes were cut off
        assert everything(QuotaStore(path)) == {**answered, user(5): {KEY: 7.0}}
    journal.write_bytes(complete + line)
    assert everything(QuotaStore(path)) == everything(store)


def test_a_compaction_cut_short_at_any_step_loads_every_change(tmp_path):
    path = tmp_path / "quotas.json"
    files = QuotaFiles(path, entity_key)
    quotas = files.load()

    def append(records: list) -> None:
        for record in records:
            apply(quotas, record)
        files.append(records, quotas)

    append([(user(i), KEY, 1000.0) for i in range(50)])
    files.compact(quotas)
    old_snapshot = path.read_bytes()
    append([(user(i), KEY, 2000.0 if i % 2 else None) for i in range(50)])  # half removed
    whole_journal = files.journal.read_bytes()
    files.compact(quotas)
    new_snapshot = path.read_bytes()
    assert files.journal.read_bytes() == b"" and new_snapshot != old_snapshot

    def crashed(snapshot: bytes, journal: bytes) -> dict:
        path.write_bytes(snapshot)
        files.journal.write_bytes(journal)
        return QuotaFiles(path, entity_key).load()

    # killed after writing the temporary snapshot, before renaming it
    path.with_name(path.name + ".tmp").write_bytes(new_snapshot)
    assert crashed(old_snapshot, whole_journal) == quotas
    # killed after the rename, before emptying the journal: its records, replayed on the snapshot
    # that holds them already, removals included, change nothing
    assert crashed(new_snapshot, whole_journal) == quotas
    assert len(quotas) == 25
