"""Topics: CreateTopics with a KRaft controller's checks, and where every replica lives.

A topic is a list of partitions, each an ordered replica list (the first replica in sync is the
leader, as Kafka's preferred leader). The registry is kept in ``DIR/topics.json`` so a restart on
the same data dir finds the topics again; the replica's bytes are in ``<log dir>/<topic>-<p>/``.
The checks and messages are ReplicationControlManager.createTopic's and Topic.validate's.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .kafka_version import CORDONED_LOG_DIRS, DEFAULT_VERSION, Version

INVALID_TOPIC_EXCEPTION = 17
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37
INVALID_REPLICATION_FACTOR = 38
INVALID_REPLICA_ASSIGNMENT = 39
INVALID_REQUEST = 42

MAX_NAME_LENGTH = 249
_LEGAL_NAME = re.compile(r"^[a-zA-Z0-9._-]+$")
DEFAULT_PARTITIONS = 1  # num.partitions
DEFAULT_REPLICATION_FACTOR = 1  # default.replication.factor


class TopicError(Exception):
    def __init__(self, code: int, message: str | None):
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class NewTopic:
    """One CreatableTopic as sent: ``-1`` means the broker default; ``assignments`` maps a
    partition index to its replica list (then both counts must be -1)."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    assignments: tuple[tuple[int, tuple[int, ...]], ...] = ()


def validate_name(name: str) -> None:
    if not name:
        raise TopicError(INVALID_TOPIC_EXCEPTION, "Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise TopicError(INVALID_TOPIC_EXCEPTION, 'Topic name cannot be "." or ".."')
    if len(name) > MAX_NAME_LENGTH:
        raise TopicError(
            INVALID_TOPIC_EXCEPTION,
            f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters, "
            f"topic name: {name}",
        )
    if not _LEGAL_NAME.match(name):
        raise TopicError(
            INVALID_TOPIC_EXCEPTION,
            f'Topic name "{name}" is illegal, it contains a character other than ASCII '
            "alphanumerics, '.', '_' and '-'",
        )


def place_replicas(
    topic: NewTopic,
    registered: Sequence[int],
    start: int = 0,
    kafka_version: Version = DEFAULT_VERSION,
) -> dict[int, list[int]]:
    """Partition -> replica list, checked as the KRaft controller checks a CreatableTopic.

    ``registered`` are the broker ids up now; ``start`` rotates the striped placement so that
    successive topics spread their leaders; ``kafka_version`` the release whose messages to
    answer with."""
    if topic.assignments:
        if topic.replication_factor != -1:
            raise TopicError(
                INVALID_REQUEST,
                "A manual partition assignment was specified, but replication factor was not "
                "set to -1.",
            )
        if topic.num_partitions != -1:
            raise TopicError(
                INVALID_REQUEST,
                "A manual partition assignment was specified, but numPartitions was not set to -1.",
            )
        placed: dict[int, list[int]] = {}
        factor = None
        for index, brokers in topic.assignments:
            if index in placed:
                raise TopicError(
                    INVALID_REPLICA_ASSIGNMENT,
                    f"Found multiple manual partition assignments for partition {index}",
                )
            _check_manual(brokers, registered, factor)
            factor = len(brokers)
            placed[index] = list(brokers)
        if sorted(placed) != list(range(len(placed))):
            raise TopicError(
                INVALID_REPLICA_ASSIGNMENT,
                "partitions should be a consecutive 0-based integer sequence",
            )
        return placed
    factor = (
        DEFAULT_REPLICATION_FACTOR if topic.replication_factor == -1 else topic.replication_factor
    )
    count = DEFAULT_PARTITIONS if topic.num_partitions == -1 else topic.num_partitions
    if factor <= 0:
        raise TopicError(
            INVALID_REPLICATION_FACTOR,
            "Replication factor must be larger than 0, or -1 to use the default value.",
        )
    if count <= 0:
        raise TopicError(
            INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value."
        )
    ordered = sorted(registered)
    if factor > len(ordered):
        raise TopicError(
            INVALID_REPLICATION_FACTOR,
            f"Unable to replicate the partition {factor} time(s): The target replication "
            f"factor of {factor} cannot be reached because only {len(ordered)} broker(s) "
            "are registered"
            + (
                " or some brokers have all their log directories cordoned."
                if kafka_version >= CORDONED_LOG_DIRS
                else "."
            ),
        )
    n = len(ordered)
    return {p: [ordered[(start + p + i) % n] for i in range(factor)] for p in range(count)}


def _check_manual(brokers: Sequence[int], registered: Sequence[int], factor: int | None) -> None:
    if not brokers:
        raise TopicError(
            INVALID_REPLICA_ASSIGNMENT,
            "The manual partition assignment includes an empty replica list.",
        )
    previous = None
    for broker_id in sorted(brokers):
        if broker_id not in registered:
            raise TopicError(
                INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes broker {broker_id}, but no such "
                "broker is registered.",
            )
        if broker_id == previous:
            raise TopicError(
                INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes the broker {broker_id} more than once.",
            )
        previous = broker_id
    if factor is not None and len(brokers) != factor:
        raise TopicError(
            INVALID_REPLICA_ASSIGNMENT,
            f"The manual partition assignment includes a partition with {len(brokers)} "
            f"replica(s), but this is not consistent with previous partitions, which have "
            f"{factor} replica(s).",
        )


class TopicRegistry:
    """topic -> partition -> replica broker ids, persisted as JSON after every creation."""

    def __init__(self, path: Path | None = None):
        self._path = path
        self._lock = threading.Lock()
        self._topics: dict[str, dict[int, list[int]]] = {}
        if path is not None and path.exists():
            raw = json.loads(path.read_text())
            self._topics = {
                name: {int(p): list(r) for p, r in parts.items()} for name, parts in raw.items()
            }

    def get(self, name: str) -> dict[int, list[int]] | None:
        return self._topics.get(name)

    def replicas(self, name: str, partition: int) -> list[int] | None:
        parts = self._topics.get(name)
        return None if parts is None else parts.get(partition)

    def all(self) -> dict[str, dict[int, list[int]]]:
        with self._lock:
            return {name: {p: list(r) for p, r in ps.items()} for name, ps in self._topics.items()}

    def partition_count(self) -> int:
        return sum(len(ps) for ps in self._topics.values())

    def add(self, name: str, placement: dict[int, list[int]]) -> None:
        with self._lock:
            if name in self._topics:
                raise TopicError(TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
            self._topics[name] = {p: list(r) for p, r in sorted(placement.items())}
            self._save()

    def _save(self) -> None:
        if self._path is None:
            return
        tmp = self._path.with_suffix(".tmp")
        data = {n: {str(p): r for p, r in ps.items()} for n, ps in self._topics.items()}
        tmp.write_text(json.dumps(data, indent=1))
        os.replace(tmp, self._path)
