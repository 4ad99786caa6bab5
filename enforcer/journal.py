"""The durable journal (SQLite): originals before any change, what was set, firing alerts.

Every write is one transaction committed with `synchronous=FULL` (fsync) before the enforcer
touches Kafka, so a crash at any point leaves enough to finish or undo a throttle:
- `episode`: per cluster, one throttle from its first change to its full restore.
- `pair`: per (entity, key) of an episode, the original value (NULL: unset), the value last
  confirmed in Kafka, the value about to be set (pending) and an operator's value (drift).
- `alert`: firing throttle alerts per Alertmanager group with the time they were last sent, so
  the target survives restarts and an alert Alertmanager stopped sending can expire.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from enforcer.quota_entity import QuotaEntity
from enforcer.quota_plan import Pair

ACTIVE = "active"
RESTORED = "restored"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS episode (
    cluster TEXT PRIMARY KEY,
    state TEXT NOT NULL,
    started_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    target REAL,
    applied REAL
);
CREATE TABLE IF NOT EXISTS pair (
    cluster TEXT NOT NULL,
    entity TEXT NOT NULL,
    key TEXT NOT NULL,
    original REAL,
    applied REAL,
    applied_known INTEGER NOT NULL DEFAULT 0,
    pending REAL,
    pending_known INTEGER NOT NULL DEFAULT 0,
    drift REAL,
    drifted INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (cluster, entity, key)
);
CREATE TABLE IF NOT EXISTS alert (
    group_key TEXT NOT NULL,
    cluster TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    factor REAL NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (group_key, cluster, fingerprint)
);
"""


class JournalError(RuntimeError):
    """The journal cannot be opened or written."""


@dataclass(frozen=True, slots=True)
class PairRecord:
    original: float | None
    applied: float | None = None
    applied_known: bool = False
    pending: float | None = None
    pending_known: bool = False
    drift: float | None = None
    drifted: bool = False

    def expected(self) -> set[float | None]:
        """Values Kafka may hold without anyone but us having changed them."""
        values = {self.applied if self.applied_known else self.original}
        if self.pending_known:
            values.add(self.pending)
        return values

    @property
    def current_ours(self) -> float | None:
        """What we believe Kafka holds (drift aside)."""
        return self.applied if self.applied_known else self.original


@dataclass(frozen=True, slots=True)
class Episode:
    cluster: str
    state: str
    started_at: str
    updated_at: str
    target: float | None
    applied: float | None
    pairs: dict[Pair, PairRecord] = field(default_factory=dict)

    @property
    def active(self) -> bool:
        return self.state == ACTIVE

    def drifted(self) -> set[Pair]:
        return {p for p, r in self.pairs.items() if r.drifted}


def _utc_now() -> datetime:
    return datetime.now(UTC)


class Journal:
    """Thread-safe access to the SQLite journal at `path`."""

    def __init__(self, path: str | Path, clock: Callable[[], datetime] = _utc_now) -> None:
        self.path = Path(path)
        self._clock = clock
        self._lock = threading.Lock()
        created = not self.path.exists()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(
                str(self.path), check_same_thread=False, isolation_level=None
            )
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.executescript(_SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            raise JournalError(f"cannot open journal {self.path}: {exc}") from None
        if created:
            _fsync_dir(self.path.parent)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _now(self) -> str:
        return _stamp(self._clock())

    def _write(self, statements: Callable[[sqlite3.Connection], None]) -> None:
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    statements(self._db)
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
                self._db.execute("COMMIT")
            except sqlite3.Error as exc:
                raise JournalError(f"cannot write journal {self.path}: {exc}") from None

    # --- alerts -------------------------------------------------------------------------------
    def group_state(self, group_key: str) -> dict[tuple[str, str], float]:
        with self._lock:
            rows = self._db.execute(
                "SELECT cluster, fingerprint, factor FROM alert WHERE group_key=?", (group_key,)
            ).fetchall()
        return {(c, f): v for c, f, v in rows}

    def replace_group(self, group_key: str, state: Mapping[tuple[str, str], float]) -> None:
        now = self._now()

        def run(db: sqlite3.Connection) -> None:
            db.execute("DELETE FROM alert WHERE group_key=?", (group_key,))
            db.executemany(
                "INSERT INTO alert VALUES (?,?,?,?,?)",
                [(group_key, c, f, v, now) for (c, f), v in state.items()],
            )

        self._write(run)

    def expire_alerts(self, older_than: datetime) -> list[tuple[str, str, str, str]]:
        """Forget alerts not re-sent since `older_than`; returns (group, cluster, fingerprint,
        last seen) of each."""
        cutoff = _stamp(older_than)
        found: list[tuple[str, str, str, str]] = []

        def run(db: sqlite3.Connection) -> None:
            found.extend(
                db.execute(
                    "SELECT group_key, cluster, fingerprint, updated_at FROM alert "
                    "WHERE updated_at < ?",
                    (cutoff,),
                ).fetchall()
            )
            db.execute("DELETE FROM alert WHERE updated_at < ?", (cutoff,))

        self._write(run)
        return found

    def firing_factors(self, cluster: str) -> list[float]:
        with self._lock:
            rows = self._db.execute("SELECT factor FROM alert WHERE cluster=?", (cluster,))
            return [r[0] for r in rows.fetchall()]

    # --- episodes -----------------------------------------------------------------------------
    def episode(self, cluster: str) -> Episode | None:
        with self._lock:
            row = self._db.execute(
                "SELECT state, started_at, updated_at, target, applied FROM episode "
                "WHERE cluster=?",
                (cluster,),
            ).fetchone()
            if row is None:
                return None
            rows = self._db.execute(
                "SELECT entity, key, original, applied, applied_known, pending, pending_known, "
                "drift, drifted FROM pair WHERE cluster=? ORDER BY entity, key",
                (cluster,),
            ).fetchall()
        pairs = {
            (QuotaEntity.from_json(e), k): PairRecord(o, a, bool(ak), p, bool(pk), d, bool(dd))
            for e, k, o, a, ak, p, pk, d, dd in rows
        }
        return Episode(cluster, *row, pairs=pairs)

    def active_clusters(self) -> list[str]:
        with self._lock:
            rows = self._db.execute("SELECT cluster FROM episode WHERE state=?", (ACTIVE,))
            return [r[0] for r in rows.fetchall()]

    def begin(self, cluster: str, originals: Mapping[Pair, float | None], target: float) -> None:
        """Record originals (new pairs only) and make the cluster's episode active."""
        now = self._now()

        def run(db: sqlite3.Connection) -> None:
            row = db.execute("SELECT state FROM episode WHERE cluster=?", (cluster,)).fetchone()
            if row is None or row[0] != ACTIVE:
                db.execute("DELETE FROM pair WHERE cluster=?", (cluster,))
                db.execute(
                    "INSERT OR REPLACE INTO episode VALUES (?,?,?,?,?,NULL)",
                    (cluster, ACTIVE, now, now, target),
                )
            db.executemany(
                "INSERT OR IGNORE INTO pair (cluster, entity, key, original) VALUES (?,?,?,?)",
                [(cluster, e.to_json(), k, v) for (e, k), v in originals.items()],
            )

        self._write(run)

    def set_pending(
        self, cluster: str, pending: Mapping[Pair, float | None], target: float
    ) -> None:
        """Record what is about to be set, before sending it."""
        now = self._now()

        def run(db: sqlite3.Connection) -> None:
            db.execute(
                "UPDATE episode SET target=?, updated_at=? WHERE cluster=?", (target, now, cluster)
            )
            db.executemany(
                "UPDATE pair SET pending=?, pending_known=1 WHERE cluster=? AND entity=? AND key=?",
                [(v, cluster, e.to_json(), k) for (e, k), v in pending.items()],
            )

        self._write(run)

    def mark_drift(self, cluster: str, drift: Mapping[Pair, float | None]) -> None:
        """Freeze pairs an operator changed: their value is kept from now on."""

        def run(db: sqlite3.Connection) -> None:
            db.executemany(
                "UPDATE pair SET drift=?, drifted=1, pending=NULL, pending_known=0 "
                "WHERE cluster=? AND entity=? AND key=?",
                [(v, cluster, e.to_json(), k) for (e, k), v in drift.items()],
            )

        self._write(run)

    def confirm(
        self, cluster: str, confirmed: Mapping[Pair, float | None], factor: float | None
    ) -> None:
        """Values verified in Kafka; `factor` (unless None) is now fully applied."""
        now = self._now()

        def run(db: sqlite3.Connection) -> None:
            db.executemany(
                "UPDATE pair SET applied=?, applied_known=1, pending=NULL, pending_known=0 "
                "WHERE cluster=? AND entity=? AND key=?",
                [(v, cluster, e.to_json(), k) for (e, k), v in confirmed.items()],
            )
            if factor is not None:
                db.execute(
                    "UPDATE episode SET applied=?, updated_at=? WHERE cluster=?",
                    (factor, now, cluster),
                )

        self._write(run)

    def finish(self, cluster: str) -> None:
        """Everything is restored: the episode stays readable (status) until the next one."""
        now = self._now()
        self._write(
            lambda db: db.execute(
                "UPDATE episode SET state=?, applied=1.0, target=1.0, updated_at=? WHERE cluster=?",
                (RESTORED, now, cluster),
            )
        )


def _stamp(moment: datetime) -> str:
    """UTC, fixed width: compares correctly as text."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _fsync_dir(directory: Path) -> None:
    """Make a newly created file's directory entry durable."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
