"""VolumeCache: keeps the last seen state of log dirs missing from a successful observation.

The proposal's "inconsistent state" example: a broker leaves between DescribeCluster and
DescribeLogDirs, or just left the active set. Its volumes are still on disk and may still be
full, so the last seen state keeps counting until it is older than the validity duration;
then it is evicted.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kvq.model.volume import LogDirDescription, Volume


@dataclass(frozen=True, slots=True)
class CachedVolume:
    volume: Volume
    seen_at: float


@dataclass(frozen=True, slots=True)
class CacheMerge:
    """Volumes to judge: those just observed plus fresh cached ones; how many were evicted."""

    observed: tuple[Volume, ...]
    cached: tuple[CachedVolume, ...]
    evicted: tuple[CachedVolume, ...]

    @property
    def volumes(self) -> tuple[Volume, ...]:
        return self.observed + tuple(c.volume for c in self.cached)


class VolumeCache:
    """Last seen volume per (broker, log dir), merged into each successful observation."""

    def __init__(self, validity_seconds: float) -> None:
        self.validity_seconds = validity_seconds
        self._entries: dict[tuple[int, str], CachedVolume] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def merge(self, now: float, log_dirs: Iterable[LogDirDescription]) -> CacheMerge:
        """Record a successful observation at `now` and return what the policy must judge.

        A log dir observed as unusable replaces its cached state (it is described, just not a
        volume). A missing one stays while `now - seen_at <= validity`, and is evicted after.
        """
        observed: list[Volume] = []
        described: set[tuple[int, str]] = set()
        for log_dir in log_dirs:
            described.add(log_dir.key)
            volume = log_dir.to_volume()
            if volume is None:
                self._entries.pop(log_dir.key, None)
            else:
                observed.append(volume)
                self._entries[log_dir.key] = CachedVolume(volume, now)
        cached: list[CachedVolume] = []
        evicted: list[CachedVolume] = []
        for key in sorted(self._entries.keys() - described):
            entry = self._entries[key]
            if now - entry.seen_at > self.validity_seconds:
                evicted.append(self._entries.pop(key))
            else:
                cached.append(entry)
        return CacheMerge(tuple(observed), tuple(cached), tuple(evicted))
