"""What retention will have deleted by times ahead, foreseen from Kafka itself.

Kafka deletes a partition's oldest segment once its newest record is `retention.ms` old, at the
broker's next retention check (`log.retention.check.interval.ms`), and frees its space
`file.delete.delay.ms` later (the file lingers, renamed). ListOffsets by timestamp gives a
partition's first offset with a record at or after a time: every segment wholly before it holds
only older records. So by `now + ahead`, with `T = now + ahead - retention - check - delay`:
- every segment wholly before the first offset at or after T is deleted and its space freed;
- the segment holding that offset began at most a segment (`segment.bytes`) before it, and, a
  segment being rolled once its records span `segment.ms`, at or after (within a batch) the
  first offset at or after `T - segment.ms`.
So the space freed by then is at least what lies before the later of those two offsets: a lower
bound (`bench.retention_forecast` measured it on real Kafka: never more than Kafka deleted),
whatever the segments' sizes, in bytes at the partition's bytes per offset. No history is
kept: retention times are days, and an exporter's restart would forget them.

Nothing is foreseen for a topic that does not delete by time (compacted, `retention.ms=-1`) or
keeps its data in remote storage (its local retention waits on uploads no reply shows), nor from
`retention.bytes`: what is not foreseen is met when it happens, as without a forecast.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

NEVER = -1
"""retention.ms (or an offset) that means none."""
AHEAD_SECONDS = tuple(range(5, 125, 5))
"""The times ahead of each poll the forecast says what retention will have freed by: 5 s apart
(between two of them it foresees nothing; 15-60 s apart cost the model's 40 principals 12
points of the bound, docs/policy-study.md), for the next two minutes. What a log dir's
`retention_freed` holds, one per time, and the archive's keys."""


@dataclass(frozen=True, slots=True)
class TopicRetention:
    """What a topic's configs say about when Kafka deletes its records by time."""

    retention_ms: int
    segment_ms: int
    segment_bytes: int
    delete_delay_ms: int
    deletes: bool = True
    """cleanup.policy includes `delete` (and the topic keeps its data locally)."""

    @property
    def foreseeable(self) -> bool:
        return self.deletes and self.retention_ms >= 0

    def probes(self, now_ms: int, ahead_ms: int, check_ms: int) -> tuple[int | None, int]:
        """The two times (ms since the epoch) whose first offsets bound what is freed by
        `now_ms + ahead_ms`: the segment holding the first offset at or after the second began
        at or after the first's (`segment.ms`), and at most a segment's bytes before it. The
        first is None where segments roll by time no sooner than retention deletes them (Kafka's
        defaults, a week each): it would lie before the log's start."""
        written_before = now_ms + ahead_ms - self.retention_ms - check_ms - self.delete_delay_ms
        by_time = written_before - self.segment_ms if self.segment_ms < self.retention_ms else None
        return by_time, written_before


@dataclass(frozen=True, slots=True)
class PartitionOffsets:
    """A partition's offsets as its leader answered ListOffsets."""

    log_start: int
    log_end: int
    probed: tuple[tuple[int | None, int], ...]
    """Per time ahead, the first offsets at or after its two `TopicRetention.probes`
    (`NEVER`: no record that late, so the log end; None: not asked)."""

    def freed_bytes(self, size: int, retention: TopicRetention) -> tuple[int, ...]:
        """Per time ahead, the bytes of a replica of `size` bytes freed by then at least."""
        count = self.log_end - self.log_start
        if count <= 0 or size <= 0:
            return tuple(0 for _ in self.probed)
        per_offset = size / count
        segment_offsets = retention.segment_bytes / per_offset
        freed = []
        for by_time, by_size in self.probed:
            by_roll = self.log_start if by_time is None else self._at(by_time)
            before = max(by_roll, self._at(by_size) - segment_offsets)
            freed.append(round(min(max(before - self.log_start, 0.0), count) * per_offset))
        return tuple(freed)

    def _at(self, offset: int) -> int:
        return self.log_end if offset == NEVER else offset


UNKNOWN = -1
"""A time ahead past the log dir's shortest retention time: what is freed by then includes what
is written from now on, which no reply shows."""


def volume_freed_bytes(
    replica_sizes: Mapping[tuple[str, int, bool], int],
    retention: Mapping[str, TopicRetention],
    offsets: Mapping[tuple[str, int], PartitionOffsets],
    aheads: Sequence[int],
) -> tuple[int, ...]:
    """Per time ahead (seconds), what retention frees by then in one log dir at least: the sum
    over its replicas (a replica being moved in, `future`, frees what its source frees; counted
    there) of what each frees, for the partitions whose topic and offsets are known; `UNKNOWN`
    past the shortest retention time of its topics that delete by time (a policy spending the
    headroom until then would count on what is written now staying, which retention deletes
    from then on)."""
    total = [0] * len(aheads)
    shortest: int | None = None
    for (topic, partition, future), size in replica_sizes.items():
        topic_retention = retention.get(topic)
        partition_offsets = offsets.get((topic, partition))
        if future or topic_retention is None or not topic_retention.foreseeable:
            continue
        if shortest is None or topic_retention.retention_ms < shortest:
            shortest = topic_retention.retention_ms
        if partition_offsets is None:
            continue
        for k, freed in enumerate(partition_offsets.freed_bytes(size, topic_retention)):
            total[k] += freed
    return tuple(
        UNKNOWN if shortest is not None and 1000 * ahead > shortest else freed
        for ahead, freed in zip(aheads, total, strict=True)
    )
