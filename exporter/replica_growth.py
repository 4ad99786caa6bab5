"""ReplicaGrowth: each log dir's `grown_bytes`, from the partition replica sizes of every read.

DescribeLogDirs (v4, all topics) gives each partition replica's size in each log dir. Between two
reads a replica grows by what was written to it, less any segment retention deleted in between;
so the growth is summed replica by replica (`max(now - before, 0)`), never netted across
replicas, and at every read: the exporter's checks between polls (about every second) as well as
its polls. A check the exporter drops is not lost: its growth is kept and handed out with the
next observation taken in, so a log dir's `grown_bytes` is what its replicas grew by since the
last observation taken in that described it, over every read in between.

What counts as growth:
- a replica new to the log dir (a new partition, a reassignment or a move between log dirs onto
  it, a future replica) counts from its first size: its copy is not writes; its growth from
  there on counts (it fills the disk all the same);
- a replica gone from the log dir is forgotten;
- a log dir described with an error, or missing from a read (its broker away), breaks the chain:
  its sizes and growth are forgotten, and its `grown_bytes` is None until an observation taken in
  described it again (the next one then starts the count).
Drops are never read from the replicas: a deleted segment's file lingers for
`log.segment.delete.delay.ms`; the volume's totals show the space when it is really free.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from kvq.model.observation import Observation
from kvq.model.volume import LogDirDescription

Replica = tuple[str, int, bool]
"""(topic, partition, future): one partition replica in a log dir."""


@dataclass(slots=True)
class _LogDirGrowth:
    sizes: Mapping[Replica, int]
    grown: int = 0
    """Growth since the last observation taken in (this one's read included)."""
    counted: bool = False
    """Whether an observation taken in described this log dir since the chain began: only
    then is `grown` the growth since the policy's previous reading of it."""


def replica_growth(before: Mapping[Replica, int], now: Mapping[Replica, int]) -> int:
    """The sum of each replica's growth from `before` to `now`; a replica new in `now` counts
    from its size there."""
    return sum(max(size - before.get(replica, size), 0) for replica, size in now.items())


@dataclass
class ReplicaGrowth:
    """Per log dir, the replica sizes of the last read and the growth since the last
    observation taken in."""

    _dirs: dict[tuple[int, str], _LogDirGrowth] = field(default_factory=dict)

    def read(self, log_dirs: Iterable[LogDirDescription]) -> tuple[LogDirDescription, ...]:
        """Take in one read's log dirs (with `replica_sizes`); give them back with their
        `grown_bytes` set and their sizes dropped. Log dirs not described, or described without
        sizes, lose their chain."""
        described: list[LogDirDescription] = []
        seen: set[tuple[int, str]] = set()
        for log_dir in log_dirs:
            described.append(self._read_one(log_dir))
            seen.add(log_dir.key)
        for key in set(self._dirs) - seen:
            del self._dirs[key]
        return tuple(described)

    def _read_one(self, log_dir: LogDirDescription) -> LogDirDescription:
        sizes = log_dir.replica_sizes
        if sizes is None or log_dir.unusable_reason is not None:
            self._dirs.pop(log_dir.key, None)
            return replace(log_dir, grown_bytes=None, replica_sizes=None)
        known = self._dirs.get(log_dir.key)
        if known is None:
            self._dirs[log_dir.key] = known = _LogDirGrowth(sizes)
        else:
            known.grown += replica_growth(known.sizes, sizes)
            known.sizes = sizes
        grown = known.grown if known.counted else None
        return replace(log_dir, grown_bytes=grown, replica_sizes=None)

    def taken_in(self, observation: Observation) -> None:
        """The exporter took `observation` in (a poll, or a decisive check): the growth of the
        log dirs it described with sizes is handed out; each counts afresh from here. A failed
        observation feeds no policy: nothing is handed out."""
        if not observation.succeeded:
            return
        for log_dir in observation.log_dirs:
            known = self._dirs.get(log_dir.key)
            if known is not None and log_dir.unusable_reason is None:
                known.grown, known.counted = 0, True
