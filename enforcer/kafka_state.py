"""KafkaState: the journal's rows kept in each cluster's Kafka, written only by the acting replica.

With `kvq.enforcer.state.store=kafka` the SQLite journal is a local working copy (it may live
on a volume that dies with the node) and each cluster's rows live in a compacted topic of that
cluster (state_log.py): every journal write hands the rows it changed to `publish`, which
commits them in one transaction of the cluster's transactional id before SQLite commits. A
replica acts on a cluster only after `take_over`: it fences whoever wrote before, reads the
committed rows and replaces its working copy's rows of that cluster with them.

Any failure to publish (fenced, or Kafka not confirming) releases every cluster: the working
copy may now differ from what Kafka holds, so nothing is written again until `take_over` has
read Kafka's copy back. A fenced replica raises `NotActing`; the others `JournalError`.

The first take-over of a cluster whose topic holds nothing yet carries the working copy's rows
of that cluster over (an upgrade from the SQLite journal: point `kvq.enforcer.journal` at the
old file for the first start, or run `kvq-enforcer --import-journal FILE`), and marks the
cluster's state as started, so that a working copy is never carried over again.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping

from enforcer.journal import Journal, JournalError, NotActing
from enforcer.journal_rows import Record, row_count
from enforcer.state_log import Fenced, StateLog, StateLogError

log = logging.getLogger("kvq.enforcer.state")

FORMAT = 1


def started_key(cluster: str) -> str:
    """The record marking that a cluster's state lives in Kafka (written by its first take-over)."""
    return json.dumps(["state", cluster], separators=(",", ":"))


class KafkaState:
    """The `journal_rows.RowSink` of a journal whose clusters' state lives in their Kafka."""

    def __init__(self, logs: Mapping[str, StateLog]) -> None:
        self._logs = dict(logs)
        self._lock = threading.Lock()
        self._writing = threading.Lock()
        """One transaction at a time per producer: journal writes and `forget` take turns."""
        self._acting: set[str] = set()
        self.on_lost: Callable[[bool], None] | None = None
        """Called (on the writing thread) when a failed write released the clusters, with True
        when another replica took over (the fence), False when Kafka did not confirm (the
        working copy must be read back)."""

    @property
    def clusters(self) -> tuple[str, ...]:
        return tuple(self._logs)

    def acting(self, cluster: str) -> bool:
        """Whether this replica has taken over `cluster` and has not lost it since."""
        with self._lock:
            return cluster in self._acting

    def take_over(self, journal: Journal, cluster: str) -> int:
        """Fence every other writer of `cluster`'s state, load the state into `journal`; returns
        how many rows it holds. Raises JournalError when Kafka cannot be reached."""
        state_log = self._logs[cluster]
        try:
            records = state_log.take_over()
            if started_key(cluster) not in records:
                records = self._start(journal, cluster, state_log)
        except StateLogError as exc:
            raise JournalError(str(exc)) from None
        journal.load_cluster(cluster, records)
        with self._lock:
            self._acting.add(cluster)
        rows = row_count(records.items())
        log.info("acting on cluster %s: took over its state (%d rows)", cluster, rows)
        return rows

    def import_rows(self, journal: Journal, cluster: str) -> int | None:
        """Once, on an upgrade: the rows `journal` holds for `cluster` into Kafka, marked as
        started; None (nothing written, `journal` untouched) when Kafka holds its state already.
        Fences a replica acting on the cluster. Raises JournalError."""
        state_log = self._logs[cluster]
        try:
            if started_key(cluster) in state_log.take_over():
                return None
            return row_count(self._start(journal, cluster, state_log).items())
        except StateLogError as exc:
            raise JournalError(str(exc)) from None
        finally:
            state_log.release()

    def release(self, cluster: str | None = None) -> None:
        """Stop acting on `cluster` (None: on every cluster)."""
        with self._lock:
            clusters = list(self._logs) if cluster is None else [cluster]
            for name in clusters:
                self._logs[name].release()
                self._acting.discard(name)

    def publish(self, records_by_cluster: Mapping[str, list[Record]]) -> None:
        for cluster, records in records_by_cluster.items():
            if cluster in self._logs:
                self._commit(cluster, records)
            # else: a cluster this enforcer does not manage (an alert's label): local only

    def forget(self, cluster: str, keys: list[str]) -> None:
        """Delete records that are not journal rows (handled inbox entries)."""
        self._commit(cluster, [(key, None) for key in keys])

    def _commit(self, cluster: str, records: list[Record]) -> None:
        if not self.acting(cluster):
            raise NotActing(f"not acting on cluster {cluster}: it has not taken over its state")
        try:
            with self._writing:
                self._logs[cluster].commit(records)
        except Fenced as exc:
            self._lost(fenced=True)
            raise NotActing(f"stopped acting on cluster {cluster}: {exc}") from None
        except StateLogError as exc:
            self._lost(fenced=False)
            raise JournalError(str(exc)) from None

    def _lost(self, fenced: bool) -> None:
        self.release()
        if self.on_lost is not None:
            self.on_lost(fenced)

    def close(self) -> None:
        self.release()

    def _start(self, journal: Journal, cluster: str, state_log: StateLog) -> dict[str, bytes]:
        """The first take-over of `cluster`: carry the working copy's rows over, marked."""
        carried = journal.cluster_records(cluster)
        marker = json.dumps({"cluster": cluster, "format": FORMAT}).encode()
        state_log.commit([*carried, (started_key(cluster), marker)])
        if carried:
            log.info(
                "carried %d rows of cluster %s over from %s to Kafka",
                row_count(carried),
                cluster,
                journal.path,
            )
        records = {key: value for key, value in carried if value is not None}
        records[started_key(cluster)] = marker
        return records
