"""Where each replica lives, who is in sync, and the replicated append (synchronous replication).

A replica is in sync when its broker is up and the log dir holding it is online (no write failed
there, no injected log dir error). The first in-sync replica in assignment order (Kafka's preferred
leader) leads, and keeps leading while in sync: a broker that comes back is a follower. An append
goes to the leader, then the same bytes to every other in-sync replica before the answer, so each
broker's log dir grows as in Kafka with acks=all. A replica whose disk is full is dropped from the
ISR and its dir taken offline; the produce fails with KAFKA_STORAGE_ERROR only when the leader's
write fails. A replica that comes back (broker started, log dir back online) first copies what it
missed from the leader.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from .faults import Faults
from .log_dirs import LogDir
from .partition_log import NoSpace, PartitionLog
from .topics import TopicRegistry

log = logging.getLogger(__name__)

KAFKA_STORAGE_ERROR = 56


class ReplicaHost(Protocol):
    """A broker as its replicas read it: whether it is up, its log dirs, its log dir faults."""

    broker_id: int
    up: bool
    log_dirs: list[LogDir]
    faults: Faults


@dataclass
class Replica:
    broker: ReplicaHost
    log_dir_index: int
    directory: Path
    _log: PartitionLog | None = None

    @property
    def log(self) -> PartitionLog:
        """The segment, opened (and recovered) on first use."""
        if self._log is None:
            self._log = PartitionLog(self.directory)
        return self._log

    @property
    def log_dir(self) -> LogDir:
        return self.broker.log_dirs[self.log_dir_index]

    @property
    def online(self) -> bool:
        return (
            self.broker.up
            and self.log_dir.offline_reason is None
            and self.log_dir_index not in self.broker.faults.log_dir_errors
        )


class ReplicaStore:
    """Every replica's open log, by (broker id, topic, partition)."""

    def __init__(
        self,
        brokers: Sequence[ReplicaHost],
        topic_registry: TopicRegistry,
        on_storage_error: Callable[[int, int], None],
    ):
        """``on_storage_error(broker_id, log_dir_index)`` is told of every write that failed (the
        log dir is offline from then on)."""
        self._brokers = brokers
        self._topic_registry = topic_registry
        self._on_storage_error = on_storage_error
        self._replicas: dict[tuple[int, str, int], Replica] = {}
        self._leaders: dict[tuple[str, int], int | None] = {}

    def create(self, topic: str, placement: dict[int, list[int]]) -> None:
        """Make each replica's partition directory and empty segment, in the broker's log dir
        holding the fewest partitions (Kafka's LogManager.nextLogDirs)."""
        for partition, broker_ids in placement.items():
            for broker_id in broker_ids:
                broker = self._brokers[broker_id]
                counts = [
                    (len(d.partitions()) if d.offline_reason is None else 1 << 30, i)
                    for i, d in enumerate(broker.log_dirs)
                ]
                index = min(counts)[1]
                directory = broker.log_dirs[index].path / f"{topic}-{partition}"
                replica = Replica(broker, index, directory)
                replica.log  # noqa: B018 (creates the directory and the empty segment)
                self._replicas[(broker_id, topic, partition)] = replica

    def replica(self, broker_id: int, topic: str, partition: int) -> Replica | None:
        key = (broker_id, topic, partition)
        found = self._replicas.get(key)
        if found is None:
            broker = self._brokers[broker_id]
            for index, log_dir in enumerate(broker.log_dirs):
                directory = log_dir.path / f"{topic}-{partition}"
                if directory.is_dir():
                    found = self._replicas[key] = Replica(broker, index, directory)
                    break
        return found

    def in_sync(self, topic: str, partition: int, broker_ids: list[int]) -> list[int]:
        out = []
        for broker_id in broker_ids:
            replica = self.replica(broker_id, topic, partition)
            if replica is not None and replica.online:
                out.append(broker_id)
        return out

    def leader(self, topic: str, partition: int, broker_ids: list[int]) -> int | None:
        """The partition's leader: it stays where it is while in sync (Kafka moves leadership
        back to the preferred replica only at its periodic rebalance, 5 minutes); otherwise the
        first in-sync replica in assignment order takes over. None: no replica in sync."""
        in_sync = self.in_sync(topic, partition, broker_ids)
        key = (topic, partition)
        current = self._leaders.get(key)
        if current not in in_sync:
            current = self._leaders[key] = in_sync[0] if in_sync else None
        return current

    def append(self, leader_id: int, topic: str, partition: int, records: bytes, replicas):
        """Append to the leader and every in-sync follower; returns the base offset.

        Raises NoSpace when the leader's disk is full (its dir is offline afterwards)."""
        leader = self.replica(leader_id, topic, partition)
        if leader is None:
            raise LookupError(f"broker {leader_id} holds no replica of {topic}-{partition}")
        data, base, end = leader.log.assign_offsets(records)
        self._write(leader, data, end)  # NoSpace goes to the caller: KAFKA_STORAGE_ERROR
        for broker_id in replicas:
            if broker_id == leader_id:
                continue
            follower = self.replica(broker_id, topic, partition)
            if follower is None or not follower.online:
                continue
            # A follower without space leaves the ISR; the produce still succeeds
            # (min.insync.replicas 1).
            with contextlib.suppress(NoSpace):
                self._write(follower, data, end)
        return base

    def _write(self, replica: Replica, data: bytearray, end: int) -> None:
        log_dir = replica.log_dir
        try:
            replica.log.append(data, end, log_dir.virtual_usable_bytes())
        except OSError as exc:
            log_dir.offline_reason = str(exc)
            self._on_storage_error(replica.broker.broker_id, replica.log_dir_index)
            log.warning(
                "broker %d: log dir %s is offline: %s", replica.broker.broker_id, log_dir.path, exc
            )
            raise NoSpace(replica.log.path, len(data), exc) from exc

    def catch_up(self, broker: ReplicaHost) -> None:
        """Copy to this broker's online replicas what the leader wrote while they were away."""
        me = broker.broker_id
        for topic, partitions in self._topic_registry.all().items():
            for partition, broker_ids in partitions.items():
                if me not in broker_ids:
                    continue
                replica = self.replica(me, topic, partition)
                if replica is None or not replica.online:
                    continue
                others = [self.replica(b, topic, partition) for b in broker_ids if b != me]
                online = [r for r in others if r is not None and r.online]
                source = max(online, key=lambda r: r.log.size, default=None)
                if source is None or source.log.size <= replica.log.size:
                    continue
                missing = source.log.read_from(replica.log.size)
                try:
                    self._write(replica, bytearray(missing), source.log.next_offset)
                except NoSpace:
                    continue

    def close(self) -> None:
        for replica in self._replicas.values():
            if replica._log is not None:
                replica._log.close()
        self._replicas.clear()
