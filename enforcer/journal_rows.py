"""The journal's rows as records, so that a copy of them can live outside the SQLite file.

`Journal` (journal.py) keeps its tables and their logic; with a `RowSink` it also hands the rows
a write transaction changed to the sink before it commits, grouped by the cluster they belong to
(every table has a `cluster` column). Rows travel in pages: a record holds every row of one
cluster in one table whose rowid falls in one range of PAGE_ROWS rowids (its key names the table,
the cluster and the page, JSON; its value is the rows, each with its rowid, as a JSON list, or
None once the page has none). A write of 10,000 rows is some 40 records, not 10,000 (a Kafka
client pays per record); a write of one row rewrites its page. SQLite's temporary triggers note
which pages changed: the file's schema is not touched, and a journal used without a sink pays
nothing.

`load_cluster` puts a cluster's rows back from such records (the sink's copy) with the rowids
they had, replacing what the file held for that cluster; so the pages a replica writes after
taking over are the pages Kafka holds.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

TABLES = (
    "episode",
    "pair",
    "alert",
    "alert_episode",
    "finished_episode",
    "unanswered_alter",
    "request_size",
)
"""The journal's tables (each with a `cluster` column)."""
PAGE_ROWS = 256
"""Rowids per page: a page of pairs is some 40 kB of JSON."""

Record = tuple[str, bytes | None]
"""(key, value): the page's name and its rows (JSON), None: none left."""


class RowSink(Protocol):
    """Where changed rows go before the journal commits them; raises to refuse the write (the
    journal then rolls it back)."""

    def publish(self, records_by_cluster: Mapping[str, list[Record]]) -> None: ...


def track_changes(db: sqlite3.Connection) -> None:
    """Note, in temporary table `changed_page`, the page of every row of every journal table an
    insert, update or delete touches (connection-local: other connections and the file see
    nothing)."""
    db.execute("CREATE TEMP TABLE IF NOT EXISTS changed_page (tbl TEXT, cluster TEXT, page INT)")
    for table in TABLES:
        for event, rows in (("INSERT", ("NEW",)), ("UPDATE", ("OLD", "NEW")), ("DELETE", ("OLD",))):
            notes = " ".join(
                f"INSERT INTO changed_page VALUES ('{table}', {row}.cluster, "
                f"{row}.rowid / {PAGE_ROWS});"
                for row in rows
            )
            db.execute(
                f"CREATE TEMP TRIGGER IF NOT EXISTS kvq_{table}_{event.lower()} "
                f"AFTER {event} ON main.{table} BEGIN {notes} END"
            )


def changed_records(db: sqlite3.Connection) -> dict[str, list[Record]]:
    """The pages changed since the last call, as records per cluster (in the same transaction,
    before it commits), and forget them."""
    changed = db.execute("SELECT DISTINCT tbl, cluster, page FROM changed_page").fetchall()
    forget_changes(db)
    records: dict[str, list[Record]] = {}
    for table, cluster, page in changed:
        rows = _page_rows(db, table, cluster, page)
        records.setdefault(cluster, []).append((_key(table, cluster, page), _encode(rows)))
    return records


def forget_changes(db: sqlite3.Connection) -> None:
    db.execute("DELETE FROM changed_page")


def cluster_records(db: sqlite3.Connection, cluster: str) -> list[Record]:
    """Every row of `cluster`, as records (a whole copy of the cluster's journal)."""
    records: list[Record] = []
    for table in TABLES:
        pages: dict[int, list[dict[str, Any]]] = {}
        for row in _rows(db, f"SELECT rowid AS rowid, * FROM {table} WHERE cluster=?", (cluster,)):
            pages.setdefault(int(row["rowid"]) // PAGE_ROWS, []).append(row)
        records += [(_key(table, cluster, p), _encode(rows)) for p, rows in sorted(pages.items())]
    return records


def row_count(records: Iterable[tuple[str, bytes | None]]) -> int:
    """How many journal rows `records` hold (other records left out)."""
    return sum(len(json.loads(value)) for key, value in records if value and _is_page(key))


def load_cluster(db: sqlite3.Connection, cluster: str, records: Mapping[str, bytes]) -> None:
    """Replace every row of `cluster` with the rows `records` hold (latest value per key, no
    deletes), each with its rowid, in the caller's transaction."""
    known = {table: {c[1] for c in db.execute(f"PRAGMA table_info({table})")} for table in TABLES}
    for table in TABLES:
        db.execute(f"DELETE FROM {table} WHERE cluster=?", (cluster,))
    for key, value in records.items():
        if not _is_page(key):
            continue  # the marker, an inbox entry
        table, page_cluster, _page = json.loads(key)
        if table not in known or page_cluster != cluster:
            continue  # a later version's table: nothing here reads it
        for row in json.loads(value):
            columns = ["rowid", *(c for c in row if c in known[table])]
            # OR REPLACE: a leftover row of the working copy (a cluster no longer managed)
            # must not keep the rowid or key Kafka's row has
            db.execute(
                f"INSERT OR REPLACE INTO {table} ({', '.join(columns)}) "
                f"VALUES ({', '.join('?' * len(columns))})",
                [row[c] for c in columns],
            )


def _page_rows(db: sqlite3.Connection, table: str, cluster: str, page: int) -> list[dict[str, Any]]:
    return _rows(
        db,
        f"SELECT rowid AS rowid, * FROM {table} WHERE rowid BETWEEN ? AND ? AND cluster=?",
        (page * PAGE_ROWS, page * PAGE_ROWS + PAGE_ROWS - 1, cluster),
    )


def _rows(db: sqlite3.Connection, query: str, parameters: tuple) -> list[dict[str, Any]]:
    cursor = db.execute(query, parameters)
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def _key(table: str, cluster: str, page: int) -> str:
    return json.dumps([table, cluster, page], separators=(",", ":"))


def _is_page(key: str) -> bool:
    return key.startswith('["') and json.loads(key)[0] in TABLES


def _encode(rows: list[dict[str, Any]]) -> bytes | None:
    # Floats as repr (exact); the journal already stores non-finite values as text.
    if not rows:
        return None
    return json.dumps(rows, separators=(",", ":"), allow_nan=False).encode()
