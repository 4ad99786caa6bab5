"""The journal's rows as records, so that a copy of them can live outside the SQLite file.

`Journal` (journal.py) keeps its tables and their logic; with a `RowSink` it also hands every
row a write transaction changed to the sink before it commits, grouped by the cluster the row
belongs to (every table has a `cluster` column). A record's key names the row (its table and
primary key, JSON), its value is the whole row (JSON object of column -> value) or None when
the row was deleted. SQLite's temporary triggers note which rows changed: the file's schema is
not touched, and a journal used without a sink pays nothing.

`load_cluster` puts a cluster's rows back from such records (the sink's copy), replacing what
the file held for that cluster.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from typing import Protocol

ROW_KEYS: dict[str, tuple[str, ...]] = {
    "episode": ("cluster",),
    "pair": ("cluster", "entity", "key"),
    "alert": ("group_key", "cluster", "fingerprint"),
    "alert_episode": ("cluster", "fingerprint"),
    "finished_episode": ("cluster", "episode_id"),
    "unanswered_alter": ("cluster", "request", "entity", "key"),
}
"""Each table and the columns that name one of its rows (`unanswered_alter` has no primary key
but these never repeat: one row per request, one per value it sets)."""

Record = tuple[str, bytes | None]
"""(key, value): the row's name and the row (JSON), None: deleted."""


class RowSink(Protocol):
    """Where changed rows go before the journal commits them; raises to refuse the write (the
    journal then rolls it back)."""

    def publish(self, records_by_cluster: Mapping[str, list[Record]]) -> None: ...


def track_changes(db: sqlite3.Connection) -> None:
    """Note, in temporary table `changed_row`, every row of every journal table an insert,
    update or delete touches: its key and, unless deleted, its rowid (connection-local: other
    connections and the file see nothing)."""
    db.execute(
        "CREATE TEMP TABLE IF NOT EXISTS changed_row (tbl TEXT, cluster TEXT, pk TEXT, rid INTEGER)"
    )
    for table, columns in ROW_KEYS.items():
        for event, rows in (("INSERT", ("NEW",)), ("UPDATE", ("OLD", "NEW")), ("DELETE", ("OLD",))):
            notes = " ".join(
                f"INSERT INTO changed_row VALUES ('{table}', {row}.cluster, "
                f"json_array({', '.join(f'{row}.{c}' for c in columns)}), "
                f"{'NEW.rowid' if row == 'NEW' else 'NULL'});"
                for row in rows
            )
            db.execute(
                f"CREATE TEMP TRIGGER IF NOT EXISTS kvq_{table}_{event.lower()} "
                f"AFTER {event} ON main.{table} BEGIN {notes} END"
            )


def changed_records(db: sqlite3.Connection) -> dict[str, list[Record]]:
    """The rows changed since the last call, as records per cluster (in the same transaction,
    before it commits), and forget them. A row changed several times is one record: its last
    state (an update that changed a row's key deletes the old key)."""
    last: dict[tuple[str, str], tuple[str, int | None]] = {}
    for table, cluster, pk, rid in db.execute(
        "SELECT tbl, cluster, pk, rid FROM changed_row ORDER BY rowid"
    ):
        last[(table, pk)] = (cluster, rid)
    db.execute("DELETE FROM changed_row")
    rows = _rows_by_rowid(db, {(t, rid) for (t, _), (_, rid) in last.items() if rid is not None})
    records: dict[str, list[Record]] = {}
    for (table, pk), (cluster, rid) in last.items():
        value = None if rid is None else rows.get((table, rid))
        records.setdefault(cluster, []).append((_key(table, json.loads(pk)), value))
    return records


def _rows_by_rowid(
    db: sqlite3.Connection, wanted: set[tuple[str, int]]
) -> dict[tuple[str, int], bytes]:
    """The rows of `wanted` (table, rowid), encoded, read a few hundred at a time."""
    found: dict[tuple[str, int], bytes] = {}
    for table in ROW_KEYS:
        rowids = sorted(rid for t, rid in wanted if t == table)
        for start in range(0, len(rowids), _CHUNK):
            chunk = rowids[start : start + _CHUNK]
            cursor = db.execute(
                f"SELECT rowid, * FROM {table} WHERE rowid IN ({','.join('?' * len(chunk))})",
                chunk,
            )
            names = [d[0] for d in cursor.description][1:]
            for rid, *values in cursor.fetchall():
                found[(table, rid)] = _encode(dict(zip(names, values, strict=True)))
    return found


_CHUNK = 500
"""Rowids per query (SQLite's default limit on host parameters is 32,766; small is fast too)."""


def forget_changes(db: sqlite3.Connection) -> None:
    db.execute("DELETE FROM changed_row")


def cluster_records(db: sqlite3.Connection, cluster: str) -> list[Record]:
    """Every row of `cluster`, as records (a whole copy of the cluster's journal)."""
    records: list[Record] = []
    for table, columns in ROW_KEYS.items():
        cursor = db.execute(f"SELECT * FROM {table} WHERE cluster=?", (cluster,))
        names = [d[0] for d in cursor.description]
        for row in cursor.fetchall():
            values = dict(zip(names, row, strict=True))
            records.append((_key(table, [values[c] for c in columns]), _encode(values)))
    return records


def load_cluster(db: sqlite3.Connection, cluster: str, records: Mapping[str, bytes]) -> None:
    """Replace every row of `cluster` with the rows `records` hold (latest value per key, no
    deletes), in the caller's transaction."""
    known = {table: {c[1] for c in db.execute(f"PRAGMA table_info({table})")} for table in ROW_KEYS}
    for table in ROW_KEYS:
        db.execute(f"DELETE FROM {table} WHERE cluster=?", (cluster,))
    for key, value in records.items():
        table = json.loads(key)[0]
        if table not in ROW_KEYS:
            continue  # a record of a later version's table: nothing here reads it
        row = json.loads(value)
        if row.get("cluster") != cluster:
            continue
        columns = [c for c in row if c in known[table]]
        db.execute(
            f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
            [row[c] for c in columns],
        )


def _key(table: str, key_values: list[object]) -> str:
    return json.dumps([table, *key_values], separators=(",", ":"))


def _encode(values: Mapping[str, object]) -> bytes:
    # Floats as repr (exact); the journal already stores non-finite values as text.
    return json.dumps(values, separators=(",", ":"), allow_nan=False).encode()
