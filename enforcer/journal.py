"""The durable journal (one SQLite file) and the four stores it holds (`Journal.episodes`,
`.alerts`, `.unanswered`, `.request_sizes`), each on its own tables.

Every write is one transaction committed with `synchronous=FULL` (fsync) before the enforcer
touches Kafka, so a crash at any point leaves enough to finish or undo a throttle.

- `ThrottleEpisodes` (tables `episode`, `pair`, `finished_episode`): per cluster one throttle
  from its first change to its full restore; per (entity, key) of it the original value (NULL:
  unset), the value last confirmed in Kafka, the value about to be set (pending), an operator's
  value (drift) and the last values the enforcer wrote during the episode (a lagging broker may
  still show them). `finished_episode` keeps the ids of the last FINISHED_KEPT episodes restored
  per cluster: a broker whose metadata lags may still show a finished episode's copy of the
  originals in Kafka, which is then known to be a leftover, not a throttle whose journal was
  lost.
- `FiringAlerts` (table `alert`): firing throttle alerts per Alertmanager group with the time they
  were last sent, so the target survives restarts and an alert no longer sent can expire.
- `UnansweredRequests` (table `unanswered_alter`): the values of AlterClientQuotas requests sent
  and not answered (yet), so a request that may still land is known after a restart.
- `KnownRequestSizes` (table `request_size`): each quota entity's request size as the episodes
  estimated it from its throttle times, so a restart or the next episode starts from it.

`ClusterJournal` is one cluster's episode and unanswered requests, what an `Applier` acts
through; the firing alerts are the `Enforcer`'s, across clusters.

SQLite stores a NaN REAL as NULL, so non-finite values are written as text ('nan', 'inf').
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import secrets
import sqlite3
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypeVar

from enforcer import journal_rows
from enforcer.journal_rows import RowSink
from enforcer.quota_plan import Pair, same_value
from kvq.kafka.quota_entity import QuotaEntity
from kvq.model.throttle_factor_policy import UNTHROTTLED

ACTIVE = "active"
RESTORED = "restored"
T = TypeVar("T")

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
CREATE TABLE IF NOT EXISTS alert_episode (
    cluster TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    started_at TEXT,
    ended_at TEXT,
    changed_at TEXT NOT NULL,
    PRIMARY KEY (cluster, fingerprint)
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
_ADDED_COLUMNS = (
    ("episode", "episode_id", "TEXT"),
    ("pair", "written", "TEXT"),
    ("pair", "reference", "REAL"),
    ("alert_episode", "resolved_at", "TEXT"),
)
"""(table, column, type) added after the first release: a journal written before gets them when
it is opened. `pair.written` is a JSON list of the values written (text: NaN and unset survive);
`pair.reference` the rate observed when the episode started (observed_rates.py), NULL: none."""
WRITTEN_KEPT = 8
"""How many of the latest different values the enforcer wrote to a pair during an episode are
remembered: a broker's view lagging further behind than that many changes is not expected."""
_FINISHED_SCHEMA = """
CREATE TABLE finished_episode (
    cluster TEXT NOT NULL,
    episode_id TEXT NOT NULL,
    finished_at TEXT NOT NULL,
    PRIMARY KEY (cluster, episode_id)
);
"""
FINISHED_KEPT = 32
"""How many finished episode ids are remembered per cluster. A finished episode's copy shows up
only in a view lagging seconds behind, and an episode takes at least two notifications (firing,
resolved), which Alertmanager sends a group at most every group_interval (1 s on the recommended
route) after Prometheus has evaluated the alert, so 32 episodes span a minute or more."""
_UNANSWERED_SCHEMA = """
CREATE TABLE IF NOT EXISTS unanswered_alter (
    cluster TEXT NOT NULL,
    request INTEGER NOT NULL,
    sent_at REAL NOT NULL,
    entity TEXT,
    key TEXT,
    value REAL
);
"""
"""One row per request (entity NULL) and one per value it sets; no index: the table is empty but
for requests in flight or in doubt."""
_REQUEST_SIZE_SCHEMA = """
CREATE TABLE IF NOT EXISTS request_size (
    cluster TEXT NOT NULL,
    entity TEXT NOT NULL,
    key TEXT NOT NULL,
    bytes REAL NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (cluster, entity, key)
);
"""
"""Per quota entity, the request size the episodes estimated from its throttle times
(request_sizes.py), kept across episodes: the next starts from it."""
_WAL_AUTOCHECKPOINT_PAGES = 1
_WAL_SIZE_LIMIT_BYTES = 0


class JournalError(RuntimeError):
    """The journal cannot be opened, read or written."""


class NotActing(JournalError):
    """This replica may not write the cluster's state: another one acts on the cluster (it
    took over the state since), or this one has not taken over yet."""


@dataclass(frozen=True, slots=True)
class PairRecord:
    original: float | None
    applied: float | None = None
    applied_known: bool = False
    pending: float | None = None
    pending_known: bool = False
    drift: float | None = None
    drifted: bool = False
    written: tuple[float | None, ...] = ()
    """The last WRITTEN_KEPT different values the enforcer sent for this pair during the episode,
    oldest first (pending ones included: they may have landed)."""
    reference: float | None = None
    """The rate the pair's entity was seen producing when the episode started (None: none);
    every factor of the episode scales min(original or base, reference)."""

    def expected(self) -> list[float | None]:
        """Values Kafka may hold without anyone but us having changed them."""
        values = [self.current_ours]
        if self.pending_known:
            values.append(self.pending)
        return values

    def holds_expected(self, value: float | None) -> bool:
        return any(same_value(value, v) for v in self.expected())

    def wrote(self, value: float | None) -> bool:
        """`value` is one the enforcer itself wrote during the episode: a broker whose metadata
        lags may still show it after a later write replaced it (never an operator's change)."""
        return any(same_value(value, v) for v in self.written)

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
    episode_id: str
    """Names this episode's copy of the originals in Kafka (see kafka_originals.py)."""
    pairs: dict[Pair, PairRecord] = field(default_factory=dict)

    @property
    def active(self) -> bool:
        return self.state == ACTIVE

    def drifted(self) -> set[Pair]:
        return {p for p, r in self.pairs.items() if r.drifted}

    def originals(self) -> dict[Pair, float | None]:
        """Each pair's value before the episode (None: unset)."""
        return {pair: record.original for pair, record in self.pairs.items()}


def _utc_now() -> datetime:
    return datetime.now(UTC)


def new_episode_id(now: datetime | None = None) -> str:
    """A new episode's id: when it started, and random bits (no space: see kafka_originals.py)."""
    moment = (now or datetime.now(UTC)).astimezone(UTC)
    return f"{moment:%Y%m%dT%H%M%SZ}-{secrets.token_hex(4)}"


class Journal:
    """The SQLite journal file at `path`: one connection, serialised, shared by its four stores."""

    def __init__(
        self,
        path: str | Path,
        clock: Callable[[], datetime] = _utc_now,
        busy_timeout_s: float = 5.0,
        sink: RowSink | None = None,
    ) -> None:
        """`busy_timeout_s`: how long a write waits for a lock another process holds (e.g.
        `sqlite3 journal .backup`) before failing with JournalError. `sink`: where every write
        hands the rows it changed before it commits (journal_rows.py); a write the sink refuses
        is rolled back."""
        self.path = Path(path)
        self._clock = clock
        self._sink = sink
        self._lock = threading.Lock()
        created = not self.path.exists()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(
                str(self.path),
                check_same_thread=False,
                isolation_level=None,
                timeout=busy_timeout_s,
            )
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            # SQLite checkpoints the WAL only once it holds 1,000 pages (4 MB) and never shrinks
            # it: on a small disk the WAL alone would fill it with stale copies of the same pages
            # and no write could ever succeed again, even once space is freed. Checkpoint after
            # every commit and keep the WAL file to one transaction's size.
            self._db.execute(f"PRAGMA wal_autocheckpoint={_WAL_AUTOCHECKPOINT_PAGES}")
            self._db.execute(f"PRAGMA journal_size_limit={_WAL_SIZE_LIMIT_BYTES}")
            self._db.executescript(_SCHEMA + _UNANSWERED_SCHEMA + _REQUEST_SIZE_SCHEMA)
            _add_missing_columns(self._db)
            _add_finished_episodes(self._db)
            _name_unnamed_episodes(self._db)
            if sink is not None:
                journal_rows.track_changes(self._db)
        except (OSError, sqlite3.Error) as exc:
            raise JournalError(f"cannot open journal {self.path}: {exc}") from None
        if created:
            _fsync_dir(self.path.parent)
        self.alerts = FiringAlerts(self)
        self.episodes = ThrottleEpisodes(self)
        self.unanswered = UnansweredRequests(self)
        self.request_sizes = KnownRequestSizes(self)

    def for_cluster(self, cluster: str) -> ClusterJournal:
        """One cluster's part of this journal, behind a lock of this process: what an
        `Applier` acts through."""
        return ClusterJournal(self, cluster)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def now(self) -> str:
        return _stamp(self._clock())

    def unix_now(self) -> float:
        return self._clock().timestamp()

    def stamp_before(self, duration: timedelta) -> str:
        """The stamp of `duration` ago (compares with the journal's stamps as text)."""
        return _stamp(self._clock() - duration)

    def read(self, query: Callable[[sqlite3.Connection], T]) -> T:
        with self._lock:
            try:
                return query(self._db)
            except sqlite3.Error as exc:
                raise JournalError(f"cannot read journal {self.path}: {exc}") from None

    def write(self, statements: Callable[[sqlite3.Connection], T], publish: bool = True) -> T:
        """Run `statements` in one immediate transaction (all or nothing, durable on return);
        the rows it changed go to the sink first unless `publish` is False."""
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    result = statements(self._db)
                    if self._sink is not None:
                        changed = journal_rows.changed_records(self._db)
                        if changed and publish:
                            self._sink.publish(changed)
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
                self._db.execute("COMMIT")
                return result
            except sqlite3.Error as exc:
                if self._db.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        self._db.execute("ROLLBACK")
                if getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:
                    self._release_wal()
                raise JournalError(f"cannot write journal {self.path}: {exc}") from None

    def cluster_records(self, cluster: str) -> list[journal_rows.Record]:
        """Every row the journal holds for `cluster`, as records (journal_rows.py)."""
        return self.read(lambda db: journal_rows.cluster_records(db, cluster))

    def load_cluster(self, cluster: str, records: Mapping[str, bytes]) -> None:
        """Replace what the journal holds for `cluster` with the rows of `records` (the sink's
        copy), without handing them to the sink again."""
        self.write(lambda db: journal_rows.load_cluster(db, cluster, records), publish=False)

    def _release_wal(self) -> None:
        """After a write failed on a full disk: give the frames it wrote to the WAL back to the
        file system (they are past the last commit, never read), so the next write finds the
        space again once other files freed some."""
        with contextlib.suppress(sqlite3.Error):
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")


class FiringAlerts:
    """The firing throttle alerts per Alertmanager group (table `alert`)."""

    def __init__(self, journal: Journal) -> None:
        self._journal = journal

    def group_state(self, group_key: str) -> dict[tuple[str, str], float]:
        rows = self._journal.read(
            lambda db: db.execute(
                "SELECT cluster, fingerprint, factor FROM alert WHERE group_key=?", (group_key,)
            ).fetchall()
        )
        return {(c, f): v for c, f, v in rows}

    def update_group(
        self,
        group_key: str,
        next_state: Callable[[dict[tuple[str, str], float]], dict[tuple[str, str], float]],
    ) -> set[str]:
        """Replace the group's alerts with `next_state(previous)` in one transaction.

        Returns the clusters the previous or the new state names.
        """
        now = self._journal.now()

        def run(db: sqlite3.Connection):
            rows = db.execute(
                "SELECT cluster, fingerprint, factor FROM alert WHERE group_key=?", (group_key,)
            ).fetchall()
            previous = {(c, f): v for c, f, v in rows}
            state = next_state(previous)
            if state or previous:
                db.execute("DELETE FROM alert WHERE group_key=?", (group_key,))
                db.executemany(
                    "INSERT INTO alert VALUES (?,?,?,?,?)",
                    [(group_key, c, f, v, now) for (c, f), v in state.items()],
                )
            return {c for c, _ in previous} | {c for c, _ in state}

        return self._journal.write(run)

    def replace_group(self, group_key: str, state: Mapping[tuple[str, str], float]) -> None:
        self.update_group(group_key, lambda _previous: dict(state))

    def expire(self, older_than: datetime) -> list[tuple[str, str, str, str]]:
        """Forget alerts not re-sent since `older_than`; returns (group, cluster, fingerprint,
        last seen) of each."""
        cutoff = _stamp(older_than)

        def run(db: sqlite3.Connection) -> list[tuple[str, str, str, str]]:
            found = db.execute(
                "SELECT group_key, cluster, fingerprint, updated_at FROM alert "
                "WHERE updated_at < ?",
                (cutoff,),
            ).fetchall()
            if found:
                db.execute("DELETE FROM alert WHERE updated_at < ?", (cutoff,))
            return found

        return self._journal.write(run)

    def unrepeated(
        self, cluster: str, longer_than: timedelta, except_fingerprint: str
    ) -> str | None:
        """When Alertmanager last sent an alert of `cluster` (other than `except_fingerprint`),
        if that was longer than `longer_than` ago; None when it was sooner or none is held."""
        cutoff = self._journal.stamp_before(longer_than)
        last = self.last_sent(cluster, except_fingerprint)
        return last if last is not None and last < cutoff else None

    def last_sent(self, cluster: str, except_fingerprint: str) -> str | None:
        """When Alertmanager last sent an alert of `cluster` (other than `except_fingerprint`);
        None when none is held."""
        row = self._journal.read(
            lambda db: db.execute(
                "SELECT max(updated_at) FROM alert WHERE cluster=? AND fingerprint!=?",
                (cluster, except_fingerprint),
            ).fetchone()
        )
        return row[0]

    def forget(self, cluster: str, seen_until: str, except_fingerprint: str) -> int:
        """Forget the alerts of `cluster` (but `except_fingerprint`) last sent at or before
        `seen_until`, in every group; returns how many."""
        return self._journal.write(
            lambda db: (
                db.execute(
                    "DELETE FROM alert WHERE cluster=? AND fingerprint!=? AND updated_at<=?",
                    (cluster, except_fingerprint, seen_until),
                ).rowcount
            )
        )

    def firing_factors(self, cluster: str) -> list[float]:
        rows = self._journal.read(
            lambda db: db.execute("SELECT factor FROM alert WHERE cluster=?", (cluster,)).fetchall()
        )
        return [r[0] for r in rows]


class ThrottleEpisodes:
    """Per cluster the current (or last) throttle episode and its pairs (tables `episode`,
    `pair`)."""

    def __init__(self, journal: Journal) -> None:
        self._journal = journal

    def episode(self, cluster: str) -> Episode | None:
        def query(db: sqlite3.Connection):
            row = db.execute(
                "SELECT state, started_at, updated_at, target, applied, episode_id FROM episode "
                "WHERE cluster=?",
                (cluster,),
            ).fetchone()
            if row is None:
                return None, []
            rows = db.execute(
                "SELECT entity, key, original, applied, applied_known, pending, pending_known, "
                "drift, drifted, written, reference FROM pair WHERE cluster=? "
                "ORDER BY entity, key",
                (cluster,),
            ).fetchall()
            return row, rows

        row, rows = self._journal.read(query)
        if row is None:
            return None
        pairs = {
            (QuotaEntity.from_json(e), k): PairRecord(
                _load(o), _load(a), bool(ak), _load(p), bool(pk), _load(d), bool(dd), _values(w), r
            )
            for e, k, o, a, ak, p, pk, d, dd, w, r in rows
        }
        state, started_at, updated_at, target, applied, episode_id = row
        return Episode(cluster, state, started_at, updated_at, target, applied, episode_id, pairs)

    def active_clusters(self) -> list[str]:
        rows = self._journal.read(
            lambda db: db.execute("SELECT cluster FROM episode WHERE state=?", (ACTIVE,)).fetchall()
        )
        return [r[0] for r in rows]

    def begin(
        self,
        cluster: str,
        originals: Mapping[Pair, float | None],
        target: float,
        episode_id: str | None = None,
        applied: Mapping[Pair, float | None] | None = None,
        references: Mapping[Pair, float] | None = None,
    ) -> Episode:
        """Record originals (new pairs only) and make the cluster's episode active; returns it.

        `episode_id` names a new episode (a new id when None; ignored when one is active);
        `applied` marks values known to be in Kafka already (an episode recovered from Kafka's
        copy of the originals); `references` the observed rates of new pairs (kept, like the
        originals, until the episode is finished).
        """
        now = self._journal.now()
        applied = applied or {}
        references = references or {}
        new_id = episode_id or new_episode_id()

        def run(db: sqlite3.Connection) -> None:
            row = db.execute("SELECT state FROM episode WHERE cluster=?", (cluster,)).fetchone()
            if row is None or row[0] != ACTIVE:
                db.execute("DELETE FROM pair WHERE cluster=?", (cluster,))
                db.execute(
                    "INSERT OR REPLACE INTO episode "
                    "(cluster, state, started_at, updated_at, target, applied, episode_id) "
                    "VALUES (?,?,?,?,?,NULL,?)",
                    (cluster, ACTIVE, now, now, target, new_id),
                )
            db.executemany(
                "INSERT OR IGNORE INTO pair (cluster, entity, key, original, applied, "
                "applied_known, reference) VALUES (?,?,?,?,?,?,?)",
                [
                    (
                        cluster,
                        e.to_json(),
                        k,
                        _dump(v),
                        _dump(applied.get((e, k))),
                        int((e, k) in applied),
                        references.get((e, k)),
                    )
                    for (e, k), v in originals.items()
                ],
            )

        self._journal.write(run)
        episode = self.episode(cluster)
        if episode is None or not episode.active:
            raise JournalError(
                f"journal {self._journal.path}: the episode of cluster {cluster} just made active "
                "is not there (changed by another process?)"
            )
        return episode

    def discard(self, cluster: str) -> None:
        """Forget the cluster's episode (the journal's was stale; Kafka's copy replaces it)."""

        def run(db: sqlite3.Connection) -> None:
            db.execute("DELETE FROM pair WHERE cluster=?", (cluster,))
            db.execute("DELETE FROM episode WHERE cluster=?", (cluster,))

        self._journal.write(run)

    def set_pending(
        self, cluster: str, pending: Mapping[Pair, float | None], target: float
    ) -> None:
        """Record what is about to be set, before sending it (also among the values written
        during the episode)."""
        now = self._journal.now()

        def run(db: sqlite3.Connection) -> None:
            db.execute(
                "UPDATE episode SET target=?, updated_at=? WHERE cluster=?", (target, now, cluster)
            )
            written = dict(
                ((e, k), w)
                for e, k, w in db.execute(
                    "SELECT entity, key, written FROM pair WHERE cluster=?", (cluster,)
                )
            )
            rows = []
            for (entity, key), value in pending.items():
                e = entity.to_json()
                kept = _remembered(_values(written.get((e, key))), value)
                rows.append((_dump(value), kept, cluster, e, key))
            db.executemany(
                "UPDATE pair SET pending=?, pending_known=1, written=? "
                "WHERE cluster=? AND entity=? AND key=?",
                rows,
            )

        self._journal.write(run)

    def set_references(self, cluster: str, references: Mapping[Pair, float]) -> Episode:
        """Give the active episode's pairs without a reference the ones found late (the
        episode began without observed rates); returns the episode as journaled now."""
        self._journal.write(
            lambda db: db.executemany(
                "UPDATE pair SET reference=? "
                "WHERE cluster=? AND entity=? AND key=? AND reference IS NULL",
                [(r, cluster, e.to_json(), k) for (e, k), r in references.items()],
            )
        )
        episode = self.episode(cluster)
        assert episode is not None, "references set without an episode"
        return episode

    def mark_drift(self, cluster: str, drift: Mapping[Pair, float | None]) -> None:
        """Freeze pairs an operator changed: their value is kept from now on."""
        self._journal.write(
            lambda db: db.executemany(
                "UPDATE pair SET drift=?, drifted=1, pending=NULL, pending_known=0 "
                "WHERE cluster=? AND entity=? AND key=?",
                [(_dump(v), cluster, e.to_json(), k) for (e, k), v in drift.items()],
            )
        )

    def confirm(
        self, cluster: str, landed: Mapping[Pair, float | None], factor: float | None
    ) -> None:
        """Values verified in Kafka (`landed`); `factor` (unless None) is now fully applied."""
        now = self._journal.now()

        def run(db: sqlite3.Connection) -> None:
            db.executemany(
                "UPDATE pair SET applied=?, applied_known=1, pending=NULL, pending_known=0 "
                "WHERE cluster=? AND entity=? AND key=?",
                [(_dump(v), cluster, e.to_json(), k) for (e, k), v in landed.items()],
            )
            if factor is not None:
                db.execute(
                    "UPDATE episode SET applied=?, updated_at=? WHERE cluster=?",
                    (factor, now, cluster),
                )

        self._journal.write(run)

    def finish(self, cluster: str) -> None:
        """Everything is restored: the episode stays readable (status) until the next one; the
        values written during it are forgotten, its id is remembered as finished."""
        now = self._journal.now()

        def run(db: sqlite3.Connection) -> None:
            db.execute(
                "UPDATE episode SET state=?, applied=?, target=?, updated_at=? WHERE cluster=?",
                (RESTORED, UNTHROTTLED, UNTHROTTLED, now, cluster),
            )
            db.execute("UPDATE pair SET written=NULL WHERE cluster=?", (cluster,))
            db.execute(
                "INSERT OR REPLACE INTO finished_episode SELECT cluster, episode_id, ? "
                "FROM episode WHERE cluster=? AND episode_id IS NOT NULL",
                (now, cluster),
            )
            db.execute(
                "DELETE FROM finished_episode WHERE cluster=? AND episode_id NOT IN ("
                "SELECT episode_id FROM finished_episode WHERE cluster=? "
                "ORDER BY finished_at DESC LIMIT ?)",
                (cluster, cluster, FINISHED_KEPT),
            )

        self._journal.write(run)

    def recent_references(self, cluster: str, since: str) -> dict[Pair, float]:
        """The references of the cluster's last episode if it was finished (restored) at or
        after `since` (a stamp); none if it is active, unknown or finished earlier. Its pairs
        stay journaled until the next episode begins, which reads them first."""

        def query(db: sqlite3.Connection) -> list[tuple[str, str, float]]:
            return db.execute(
                "SELECT p.entity, p.key, p.reference FROM episode e "
                "JOIN finished_episode f ON f.cluster=e.cluster AND f.episode_id=e.episode_id "
                "JOIN pair p ON p.cluster=e.cluster "
                "WHERE e.cluster=? AND e.state=? AND f.finished_at>=? AND p.reference IS NOT NULL",
                (cluster, RESTORED, since),
            ).fetchall()

        return {(QuotaEntity.from_json(e), k): r for e, k, r in self._journal.read(query)}

    def finished_ids(self, cluster: str) -> frozenset[str]:
        """Ids of the cluster's last FINISHED_KEPT finished (restored) episodes."""
        rows = self._journal.read(
            lambda db: db.execute(
                "SELECT episode_id FROM finished_episode WHERE cluster=?", (cluster,)
            ).fetchall()
        )
        return frozenset(r[0] for r in rows)


class UnansweredRequests:
    """AlterClientQuotas requests sent without an answer yet (table `unanswered_alter`): written
    before a request is sent and removed when it is answered, so a request the enforcer died
    waiting for is still known to be in doubt after a restart."""

    def __init__(self, journal: Journal) -> None:
        self._journal = journal

    def sending(self, cluster: str, values: Iterable[tuple[Pair, float | None]]) -> int:
        """Record a request about to be sent with the values it sets (those that matter if it
        lands late); returns its number (for `answered`)."""
        sent_at = self._journal.unix_now()

        def run(db: sqlite3.Connection) -> int:
            (last,) = db.execute(
                "SELECT coalesce(max(request), 0) FROM unanswered_alter WHERE cluster=?",
                (cluster,),
            ).fetchone()
            rows: list[tuple[str, int, float, str | None, str | None, float | str | None]]
            rows = [(cluster, last + 1, sent_at, None, None, None)]
            rows += [(cluster, last + 1, sent_at, e.to_json(), k, _dump(v)) for (e, k), v in values]
            db.executemany("INSERT INTO unanswered_alter VALUES (?,?,?,?,?,?)", rows)
            return last + 1

        return self._journal.write(run)

    def answered(self, cluster: str, request: int) -> None:
        self._journal.write(
            lambda db: db.execute(
                "DELETE FROM unanswered_alter WHERE cluster=? AND request=?", (cluster, request)
            )
        )

    def in_doubt(self, cluster: str) -> list[tuple[float, Pair | None, float | None]]:
        """(Unix time sent, pair, value) of every value a request without an answer carries,
        and (Unix time sent, None, None) of every such request."""
        rows = self._journal.read(
            lambda db: db.execute(
                "SELECT sent_at, entity, key, value FROM unanswered_alter WHERE cluster=? "
                "ORDER BY request",
                (cluster,),
            ).fetchall()
        )
        return [
            (t, None if e is None else (QuotaEntity.from_json(e), k), _load(v))
            for t, e, k, v in rows
        ]

    def forget(self, cluster: str) -> None:
        """None of the cluster's requests can land any more."""
        self._journal.write(
            lambda db: db.execute("DELETE FROM unanswered_alter WHERE cluster=?", (cluster,))
        )


REQUEST_SIZE_KEPT = timedelta(days=30)
"""How long a request size is kept once no episode estimated it as large again: the entity's
clients may have changed (an entity raised for its requests is throttled too little for its
own estimate to reach them again, so a size is confirmed only now and then)."""


class KnownRequestSizes:
    """Each quota entity's request size as the episodes estimated it (table `request_size`)."""

    def __init__(self, journal: Journal) -> None:
        self._journal = journal

    def sizes(self, cluster: str) -> dict[Pair, float]:
        """The cluster's sizes kept within the last REQUEST_SIZE_KEPT."""
        since = self._journal.stamp_before(REQUEST_SIZE_KEPT)
        rows = self._journal.read(
            lambda db: db.execute(
                "SELECT entity, key, bytes FROM request_size WHERE cluster=? AND updated_at>=?",
                (cluster, since),
            ).fetchall()
        )
        return {(QuotaEntity.from_json(e), k): b for e, k, b in rows}

    def keep(self, cluster: str, sizes: Mapping[Pair, float]) -> None:
        """Each pair's size as given, kept from now (the others stay)."""
        now = self._journal.now()
        self._journal.write(
            lambda db: db.executemany(
                "INSERT OR REPLACE INTO request_size VALUES (?,?,?,?,?)",
                [(cluster, e.to_json(), k, b, now) for (e, k), b in sizes.items()],
            )
        )


class ClusterJournal:
    """One cluster's throttle episode, unanswered requests and known request sizes, and the
    lock that makes one apply at a time act on the cluster (`exclusive`, held for a whole
    apply): a thread lock in front of the cluster's rows of the SQLite journal. With several
    replicas (`kvq.enforcer.state.store=kafka`) the same: only the replica the election picks
    acts, and each of its journal writes is committed to Kafka first (the journal's sink,
    fenced), so the phases of an apply need not know whether other replicas exist."""

    def __init__(self, journal: Journal, cluster: str) -> None:
        self._journal = journal
        self._cluster = cluster
        self._lock = threading.Lock()

    def exclusive(self) -> threading.Lock:
        return self._lock

    def unix_now(self) -> float:
        return self._journal.unix_now()

    def episode(self) -> Episode | None:
        return self._journal.episodes.episode(self._cluster)

    def finished_ids(self) -> frozenset[str]:
        return self._journal.episodes.finished_ids(self._cluster)

    def recent_references(self, within: timedelta) -> dict[Pair, float]:
        if within <= timedelta(0):
            return {}
        since = self._journal.stamp_before(within)
        return self._journal.episodes.recent_references(self._cluster, since)

    def begin(
        self,
        originals: Mapping[Pair, float | None],
        target: float,
        episode_id: str | None = None,
        applied: Mapping[Pair, float | None] | None = None,
        references: Mapping[Pair, float] | None = None,
    ) -> Episode:
        return self._journal.episodes.begin(
            self._cluster, originals, target, episode_id, applied, references
        )

    def discard(self) -> None:
        self._journal.episodes.discard(self._cluster)

    def set_pending(self, pending: Mapping[Pair, float | None], target: float) -> None:
        self._journal.episodes.set_pending(self._cluster, pending, target)

    def set_references(self, references: Mapping[Pair, float]) -> Episode:
        return self._journal.episodes.set_references(self._cluster, references)

    def keep_request_sizes(self, sizes: Mapping[Pair, float]) -> None:
        self._journal.request_sizes.keep(self._cluster, sizes)

    def request_sizes(self) -> dict[Pair, float]:
        return self._journal.request_sizes.sizes(self._cluster)

    def mark_drift(self, drift: Mapping[Pair, float | None]) -> None:
        self._journal.episodes.mark_drift(self._cluster, drift)

    def confirm(self, landed: Mapping[Pair, float | None], factor: float | None) -> None:
        self._journal.episodes.confirm(self._cluster, landed, factor)

    def finish(self) -> None:
        self._journal.episodes.finish(self._cluster)

    def sending(self, values: Iterable[tuple[Pair, float | None]]) -> int:
        return self._journal.unanswered.sending(self._cluster, values)

    def answered(self, request: int) -> None:
        self._journal.unanswered.answered(self._cluster, request)

    def in_doubt(self) -> list[tuple[float, Pair | None, float | None]]:
        return self._journal.unanswered.in_doubt(self._cluster)

    def forget_unanswered(self) -> None:
        self._journal.unanswered.forget(self._cluster)


def _dump(value: float | None) -> float | str | None:
    """SQLite turns a NaN REAL into NULL: keep non-finite values as text."""
    if value is not None and not math.isfinite(value):
        return repr(float(value))
    return value


def _load(value: float | str | None) -> float | None:
    if isinstance(value, str):
        return float(value)
    return value


def _values(text: str | None) -> tuple[float | None, ...]:
    """The values of a `pair.written` column (NULL: none)."""
    if not text:
        return ()
    return tuple(None if v is None else float(v) for v in json.loads(text))


def _remembered(values: tuple[float | None, ...], value: float | None) -> str:
    """`values` with `value` as the latest (moved there if already in), the oldest beyond
    WRITTEN_KEPT dropped; as the column's JSON text."""
    kept = [v for v in values if not same_value(v, value)] + [value]
    return json.dumps([None if v is None else repr(float(v)) for v in kept[-WRITTEN_KEPT:]])


def _add_missing_columns(db: sqlite3.Connection) -> None:
    """Bring a journal written by an earlier version up to the current tables (additive only)."""
    for table, column, kind in _ADDED_COLUMNS:
        columns = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
        if column not in columns:
            db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")


def _add_finished_episodes(db: sqlite3.Connection) -> None:
    """Create table `finished_episode` in a journal written by an earlier version, remembering
    the restored episode it still holds as finished (one transaction)."""

    def exists() -> bool:
        query = "SELECT 1 FROM sqlite_master WHERE type='table' AND name='finished_episode'"
        return db.execute(query).fetchone() is not None

    if exists():
        return
    db.execute("BEGIN IMMEDIATE")
    try:
        if not exists():  # another process may have added it meanwhile
            db.execute(_FINISHED_SCHEMA)
            db.execute(
                "INSERT INTO finished_episode SELECT cluster, episode_id, updated_at "
                "FROM episode WHERE state=? AND episode_id IS NOT NULL",
                (RESTORED,),
            )
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def _name_unnamed_episodes(db: sqlite3.Connection) -> None:
    """Give an id to each episode journaled before episodes had one (column `episode_id` added
    later): an active one gets its copy of the originals in Kafka like any other."""
    for (cluster,) in db.execute("SELECT cluster FROM episode WHERE episode_id IS NULL").fetchall():
        db.execute(
            "UPDATE episode SET episode_id=? WHERE cluster=? AND episode_id IS NULL",
            (new_episode_id(), cluster),
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
