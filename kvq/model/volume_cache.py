"""VolumeCache: keeps the last seen state of log dirs missing from a successful observation.

The proposal's "inconsistent state" example: a broker leaves between DescribeCluster and
DescribeLogDirs, or just left the active set. Its volumes are still on disk and may still be
full, so the last seen state keeps counting until it is as old as the validity duration;
then it is evicted (at the boundary, as the plugin's CachingVolumeObserver).

The violation hold (the Strimzi plugin's open issue #40): a volume that was *violating* when its
broker was last seen is not evicted at the validity duration. It stays, and keeps violating, until
its broker is seen again or the hold duration has passed since it was seen; a hold that expires
while the broker is still away is reported (`hold_expired`) until the broker is back, because the
throttle was released on a disk nobody has seen for that long.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kvq.model.volume import LogDirDescription, Volume


@dataclass(frozen=True, slots=True)
class CachedVolume:
    volume: Volume
    seen_at: float
    violating: bool = False
    """Whether it violated the limit when it was last seen (decides the hold)."""
    broker_seen_since: bool = False
    """Whether its broker was seen in a later successful observation (ends any hold)."""


@dataclass(frozen=True, slots=True)
class CacheMerge:
    """Volumes to judge: those just observed plus cached ones; what was evicted and held."""

    observed: tuple[Volume, ...]
    cached: tuple[CachedVolume, ...]
    """Missing from the observation, judged from cache (held ones included)."""
    evicted: tuple[CachedVolume, ...]
    held: tuple[CachedVolume, ...] = ()
    """Cached beyond the validity duration because they violated when their broker left."""
    hold_expired: tuple[CachedVolume, ...] = ()
    """Released when their hold expired, their broker not seen since (cleared when it is)."""

    @property
    def volumes(self) -> tuple[Volume, ...]:
        return self.observed + tuple(c.volume for c in self.cached)


class VolumeCache:
    """Last seen volume per (broker, log dir), merged into each successful observation."""

    def __init__(
        self,
        validity_seconds: float,
        hold_seconds: float = 0.0,
        violates: Callable[[Volume], bool] = lambda volume: False,
    ) -> None:
        self.validity_seconds = validity_seconds
        self.hold_seconds = hold_seconds
        self.violates = violates
        self._entries: dict[tuple[int, str], CachedVolume] = {}
        self._hold_expired: dict[tuple[int, str], CachedVolume] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def merge(
        self,
        now: float,
        log_dirs: Iterable[LogDirDescription],
        brokers: Iterable[int] | None = None,
    ) -> CacheMerge:
        """Record a successful observation at `now` and return what the policy must judge.

        `brokers`: the brokers this observation saw (default: those that described a log dir;
        in a successful observation every active broker did).
        A log dir observed as unusable replaces its cached state (it is described, just not a
        volume). A missing one stays while `now - seen_at < validity` (the Strimzi plugin's
        CachingVolumeObserver: expired at the boundary); after that it is evicted, unless it is
        held: it violated when last seen, its broker has not been seen since, and
        `now - seen_at < hold`.
        """
        log_dirs = list(log_dirs)
        seen_brokers = set(d.broker_id for d in log_dirs) if brokers is None else set(brokers)
        observed: list[Volume] = []
        described: set[tuple[int, str]] = set()
        for log_dir in log_dirs:
            described.add(log_dir.key)
            volume = log_dir.to_volume()
            if volume is None:
                self._entries.pop(log_dir.key, None)
            else:
                observed.append(volume)
                self._entries[log_dir.key] = CachedVolume(volume, now, self.violates(volume))
        for key in [k for k, e in self._hold_expired.items() if e.volume.broker_id in seen_brokers]:
            del self._hold_expired[key]
        cached: list[CachedVolume] = []
        held: list[CachedVolume] = []
        evicted: list[CachedVolume] = []
        for key in sorted(self._entries.keys() - described):
            entry = self._entries[key]
            if entry.volume.broker_id in seen_brokers and not entry.broker_seen_since:
                entry = self._entries[key] = CachedVolume(
                    entry.volume, entry.seen_at, entry.violating, broker_seen_since=True
                )
            age = now - entry.seen_at
            holding = entry.violating and not entry.broker_seen_since
            if age < self.validity_seconds:
                cached.append(entry)
            elif holding and age < self.hold_seconds:
                cached.append(entry)
                held.append(entry)
            else:
                evicted.append(self._entries.pop(key))
                if holding and self.hold_seconds > self.validity_seconds:
                    self._hold_expired[key] = entry
        hold_expired = tuple(self._hold_expired[k] for k in sorted(self._hold_expired))
        return CacheMerge(tuple(observed), tuple(cached), tuple(evicted), tuple(held), hold_expired)
