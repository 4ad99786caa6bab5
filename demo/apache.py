"""Real Apache Kafka under the demo (`make demo KAFKA=apache`): its volumes, filled with real bytes.

The stack starts a 3-node KRaft cluster (devkit/kafka_cluster.py) whose data log dirs are small
tmpfs file systems. A volume is filled by producing to a topic whose only replica sits on it, and
freed by deleting that topic; what is left is read as Kafka reads it (`statvfs`, Java's
`FileStore.getUsableSpace()`).
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import confluent_kafka.admin as ck

from devkit.kafka_cluster import KafkaCluster
from devkit.processes import wait_until
from devkit.producer_load import LoadProducer

BROKER_PROPERTIES = {
    # Kafka deletes a deleted topic's files 60 s later by default (log.segment.delete.delay.ms):
    # here a second later, so deleting the topic frees the volume at once.
    "log.segment.delete.delay.ms": "1000",
    # ... and its first deletion pass runs this long after the broker started (default 30 s).
    "log.initial.task.delay.ms": "1000",
}
FILL_MESSAGE_BYTES = 10_000
FILL_CHUNK_BYTES = 1 << 20
"""Produced and flushed at a time, then the volume is read again: the fill stops within one
message (plus batch overhead) of its target."""


def usable_bytes(path: Path) -> int:
    """What Kafka reports as a log dir's usable bytes: f_bavail x f_frsize of its file system."""
    stats = os.statvfs(path)
    return stats.f_bavail * stats.f_frsize


def total_bytes(path: Path) -> int:
    stats = os.statvfs(path)
    return stats.f_blocks * stats.f_frsize


def resize(path: Path, size_bytes: int) -> None:
    """Grow (or shrink) the tmpfs mounted at ``path``: an operator's real fix, Kafka keeps
    running and sees the new size in its next DescribeLogDirs."""
    done = subprocess.run(
        ["mount", "-o", f"remount,size={size_bytes}", str(path)], capture_output=True, text=True
    )
    if done.returncode != 0:
        raise RuntimeError(f"mount -o remount,size={size_bytes} {path}: {done.stderr.strip()}")


def admin_client(kafka: KafkaCluster) -> ck.AdminClient:
    """librdkafka's admin client on the PLAINTEXT listener (no ACLs: everyone is allowed)."""
    return ck.AdminClient({"bootstrap.servers": kafka.bootstrap, "log_level": 0})


def create_topics(kafka: KafkaCluster, assignments: dict[str, list[list[int]]]) -> None:
    """Topics with explicit replica assignments, waited for."""
    admin = admin_client(kafka)
    futures = admin.create_topics(
        [ck.NewTopic(name, len(a), replica_assignment=a) for name, a in assignments.items()]
    )
    for future in futures.values():
        future.result(60)


def delete_topics(kafka: KafkaCluster, names: list[str]) -> None:
    admin = admin_client(kafka)  # referenced until the results are in: its handle serves them
    for future in admin.delete_topics(names).values():
        future.result(60)


def replica_log_dir(kafka: KafkaCluster, broker: int, topic: str, partition: int = 0) -> int:
    """Index (in the broker's log.dirs) of the log dir holding the partition's replica: Kafka
    picks it (the dir with the fewest partitions) when the replica is created."""

    def where() -> int | None:
        for index, path in enumerate(kafka.log_dirs(broker)):
            if (path / f"{topic}-{partition}").is_dir():
                return index
        return None

    found = wait_until(lambda: where() is not None, 60, what=f"{topic}-{partition} on {broker}")
    assert found
    index = where()
    assert index is not None
    return index


@dataclass
class VolumeFill:
    """One topic, one partition, its only replica on ``broker``: producing to it fills the log dir
    Kafka put it in, with real bytes; deleting the topic frees them."""

    kafka: KafkaCluster
    broker: int
    topic: str = "demo-fill"
    index: int = -1

    def create(self) -> int:
        """Create the topic; returns the index of the log dir its replica landed in."""
        create_topics(self.kafka, {self.topic: [[self.broker]]})
        self.index = replica_log_dir(self.kafka, self.broker, self.topic)
        return self.index

    @property
    def path(self) -> Path:
        return self.kafka.log_dirs(self.broker)[self.index]

    def fill_until(self, keep_bytes: int, timeout: float = 120.0) -> int:
        """Produce until at most ``keep_bytes`` stay usable on the volume; returns usable bytes."""
        producer = LoadProducer(self.kafka.bootstrap, client_id="demo-fill", acks="1")
        value = b"f" * FILL_MESSAGE_BYTES
        deadline = time.monotonic() + timeout
        try:
            while (usable := usable_bytes(self.path)) > keep_bytes:
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"not ready after {timeout:.0f}s: {self.path} filled to {keep_bytes} "
                        f"usable bytes ({usable} still usable)"
                    )
                chunk = min(usable - keep_bytes, FILL_CHUNK_BYTES)
                for _ in range(max(1, chunk // FILL_MESSAGE_BYTES)):
                    while not producer.send(self.topic, value):
                        pass
                producer.producer.flush(30)
                if producer.log.errors:
                    raise RuntimeError(f"filling {self.path} failed: {dict(producer.log.errors)}")
        finally:
            producer.close()
        return usable

    def free(self) -> None:
        """Delete the topic: Kafka removes its files (log.segment.delete.delay.ms later)."""
        delete_topics(self.kafka, [self.topic])
