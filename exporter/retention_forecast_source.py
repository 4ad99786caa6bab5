"""RetentionForecastSource: per log dir, what retention frees by each of the next two minutes
at least, asked of Kafka at each poll (`kvq.model.retention_forecast`).

Per poll: Metadata (each partition's leader), then ListOffsets to every leader at once for its
partitions' log start and log end, and for the first offsets at or after the two times that
bound each time ahead (`TopicRetention.probes`): one request per timestamp, as Kafka takes one
timestamp per partition per request (26 to 50 per leader, fewer where times share one). The
topics' retention configs are read at every poll (one DescribeConfigs of the topics the log
dirs hold), the brokers' retention check interval, which changes only with a restart, every
`CONFIGS_SECONDS`. What could not be read (a leader away, a topic's configs
refused) is not foreseen: its replicas free nothing in the forecast until it is read.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Protocol

from exporter.cluster_client import ClusterError
from exporter.retention_check_audit import KAFKA_DEFAULT_MS, RETENTION_CHECK, check_interval_ms
from kvq.model.retention_forecast import (
    AHEAD_SECONDS,
    PartitionOffsets,
    TopicRetention,
    volume_freed_bytes,
)
from kvq.model.volume import LogDirDescription

log = logging.getLogger("kvq.exporter")

CONFIGS_SECONDS = 60.0
"""How often the brokers' retention check interval is read again."""
EARLIEST, LATEST = -2, -1
"""ListOffsets' timestamps for a partition's log start and log end."""
TOPIC_KEYS = (
    "cleanup.policy",
    "retention.ms",
    "segment.ms",
    "segment.bytes",
    "file.delete.delay.ms",
    "remote.storage.enable",
)

Partition = tuple[str, int]


class ForecastClient(Protocol):
    def partition_leaders(self) -> dict[Partition, int]: ...

    def topic_configs(
        self, topics: Iterable[str], keys: Iterable[str]
    ) -> dict[str, dict[str, str | None] | ClusterError]: ...

    def broker_configs(
        self, broker_ids: Iterable[int], key: str
    ) -> dict[int, str | ClusterError]: ...

    def list_offsets(
        self, asked: Mapping[int, Mapping[Partition, int]]
    ) -> dict[Partition, int]: ...


def topic_retention(configs: Mapping[str, str | None]) -> TopicRetention | None:
    """A topic's retention from its configs (None: a value that is not a number)."""
    try:
        return TopicRetention(
            retention_ms=int(configs.get("retention.ms") or -1),
            segment_ms=int(configs.get("segment.ms") or 0),
            segment_bytes=int(configs.get("segment.bytes") or 0),
            delete_delay_ms=int(configs.get("file.delete.delay.ms") or 0),
            deletes="delete" in (configs.get("cleanup.policy") or "").split(",")
            and (configs.get("remote.storage.enable") or "false").lower() != "true",
        )
    except ValueError:
        return None


class RetentionForecastSource:
    """`forecast(log_dirs)`: per (broker, log dir), the bytes retention frees by each of
    `aheads` seconds after now at least. `clock`: seconds since the epoch."""

    def __init__(
        self,
        client: ForecastClient,
        clock: Callable[[], float],
        aheads: Sequence[int] = AHEAD_SECONDS,
    ) -> None:
        self.client = client
        self.clock = clock
        self.aheads = tuple(aheads)
        self._retention: dict[str, TopicRetention] = {}
        self._check_ms = KAFKA_DEFAULT_MS
        self._checks_read_at: float | None = None

    def forecast(
        self, log_dirs: Sequence[LogDirDescription]
    ) -> dict[tuple[int, str], tuple[int, ...]]:
        sizes = {d.key: d.replica_sizes for d in log_dirs if d.replica_sizes is not None}
        partitions = {(t, p) for replicas in sizes.values() for t, p, _ in replicas}
        try:
            self._read_configs({t for t, _ in partitions}, {b for b, _ in sizes})
            leaders = self.client.partition_leaders()
        except ClusterError as exc:
            log.debug("retention forecast skipped: %s", exc)
            return {}
        foreseen = {
            (t, p): leaders[(t, p)]
            for t, p in partitions
            if (t, p) in leaders and t in self._retention and self._retention[t].foreseeable
        }
        offsets = self._offsets(foreseen, round(self.clock() * 1000))
        return {
            key: volume_freed_bytes(replicas, self._retention, offsets, self.aheads)
            for key, replicas in sizes.items()
        }

    def _offsets(
        self, leaders: Mapping[Partition, int], now_ms: int
    ) -> dict[Partition, PartitionOffsets]:
        """Each partition's log start and end, and its offsets at the probes of every time ahead
        (those whose every answer came). A request per timestamp of a partition, each carrying
        every partition's next one: a timestamp two times ahead share (one's bound by time is
        another's by size where `segment.ms` is their distance) is asked once."""
        probes = {
            partition: [
                self._retention[partition[0]].probes(now_ms, ahead * 1000, self._check_ms)
                for ahead in self.aheads
            ]
            for partition in leaders
        }
        timestamps = {
            partition: sorted(
                {EARLIEST, LATEST, *(t for pair in pairs for t in pair if t is not None)}
            )
            for partition, pairs in probes.items()
        }
        answered: dict[tuple[Partition, int], int] = {}
        for index in range(max((len(t) for t in timestamps.values()), default=0)):
            asked: dict[int, dict[Partition, int]] = {}
            for partition, leader in leaders.items():
                if index < len(timestamps[partition]):
                    asked.setdefault(leader, {})[partition] = timestamps[partition][index]
            for partition, offset in self.client.list_offsets(asked).items():
                answered[(partition, asked[leaders[partition]][partition])] = offset
        found: dict[Partition, PartitionOffsets] = {}
        for partition, pairs in probes.items():
            if not all((partition, t) in answered for t in timestamps[partition]):
                continue
            found[partition] = PartitionOffsets(
                answered[(partition, EARLIEST)],
                answered[(partition, LATEST)],
                tuple(
                    (
                        None if by_time is None else answered[(partition, by_time)],
                        answered[(partition, by_size)],
                    )
                    for by_time, by_size in pairs
                ),
            )
        return found

    def _read_configs(self, topics: set[str], brokers: set[int]) -> None:
        """The topics' retention, at every forecast: read a minute late, a retention time raised
        meanwhile would foresee deletions Kafka no longer makes (operators raise and lower it
        when a disk fills). The brokers' longest retention check interval (Kafka's default for
        a broker that does not say) every `CONFIGS_SECONDS`."""
        retention: dict[str, TopicRetention] = {}
        for topic, configs in self.client.topic_configs(topics, TOPIC_KEYS).items():
            read = None if isinstance(configs, ClusterError) else topic_retention(configs)
            if read is not None:
                retention[topic] = read
        self._retention = retention
        now = self.clock()
        if self._checks_read_at is not None and now - self._checks_read_at < CONFIGS_SECONDS:
            return
        self._checks_read_at = now
        answers = self.client.broker_configs(brokers, RETENTION_CHECK)
        intervals = [check_interval_ms(v) if isinstance(v, str) else None for v in answers.values()]
        self._check_ms = max((ms or KAFKA_DEFAULT_MS for ms in intervals), default=KAFKA_DEFAULT_MS)
