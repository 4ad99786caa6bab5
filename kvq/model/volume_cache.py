"""VolumeCache: keeps the last seen state of log dirs missing from a successful observation.

The proposal's "inconsistent state" example: a broker leaves between DescribeCluster and
DescribeLogDirs, or just left the active set. Its volumes are still on disk and may still be
full, so the last seen state keeps counting until it is as old as the validity duration;
then it is evicted (at the boundary, as the plugin's CachingVolumeObserver).

The violation hold (the Strimzi plugin's open issue #40): a volume that was *violating* when it
was last seen with sizes keeps violating while nobody can see it again, for at most the hold
duration since it was seen:
- its broker left: it is not evicted at the validity duration but held until its broker is seen
  again (answering without that log dir, or describing it with sizes);
- its log dir is described without sizes (an error code, e.g. KAFKA_STORAGE_ERROR 56 once Kafka
  took the dir offline because it filled up, or sizes of -1): it is held at once, *offline*, until
  it is described with sizes again or its broker answers without it. The proposal's rule alone
  would drop it (not a volume) and release the throttle exactly when the disk is full.
A hold that expires while the volume is still unseen is reported (`hold_expired`) until it is
seen again, because the throttle was released on a disk nobody has seen for that long. A log dir
that errors without having violated is dropped at once, as the proposal says (not a volume).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from kvq.model.volume import LogDirDescription, Volume


@dataclass(frozen=True, slots=True)
class CachedVolume:
    volume: Volume
    seen_at: float
    """When it was last seen with sizes."""
    violating: bool = False
    """Whether it violated the limit when it was last seen (decides the hold)."""
    broker_seen_since: bool = False
    """Whether its broker answered without this log dir in a later observation (ends any hold)."""
    offline: bool = False
    """Whether its log dir was described without sizes since (held at once, by the hold only)."""


@dataclass(frozen=True, slots=True)
class CacheMerge:
    """Volumes to judge: those just observed plus cached ones; what was evicted and held."""

    observed: tuple[Volume, ...]
    cached: tuple[CachedVolume, ...]
    """Not observed with sizes, judged from cache (held ones included)."""
    evicted: tuple[CachedVolume, ...]
    held: tuple[CachedVolume, ...] = ()
    """Kept violating by the hold: offline, or their broker away beyond the validity."""
    hold_expired: tuple[CachedVolume, ...] = ()
    """Released when their hold expired, not seen since (cleared when they are)."""

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
        A log dir described without sizes goes offline if it is holding (see `_unsized`), else
        it is dropped (it is described, just not a volume). A missing one stays while
        `now - seen_at < validity` (the Strimzi plugin's CachingVolumeObserver: expired at the
        boundary); after that it is evicted, unless it is held: it violated when last seen, its
        broker has not answered without it since, and `now - seen_at < hold`. An offline one
        stays only while held.
        """
        log_dirs = list(log_dirs)
        seen_brokers = set(d.broker_id for d in log_dirs) if brokers is None else set(brokers)
        observed, unsized = self._record(now, log_dirs)

        def seen_again(key: tuple[int, str]) -> bool:
            """Its broker answered, and not with this log dir described without sizes."""
            return key[0] in seen_brokers and key not in unsized

        for key in [k for k in self._hold_expired if seen_again(k)]:
            del self._hold_expired[key]
        cached: list[CachedVolume] = []
        held: list[CachedVolume] = []
        evicted: list[CachedVolume] = []
        for key in sorted(self._entries.keys() - {v.key for v in observed}):
            entry, kept, holding = self._age_missing(key, now, seen_again(key))
            (cached if kept else evicted).append(entry)
            if holding:
                held.append(entry)
        hold_expired = tuple(self._hold_expired[k] for k in sorted(self._hold_expired))
        return CacheMerge(tuple(observed), tuple(cached), tuple(evicted), tuple(held), hold_expired)

    def _record(
        self, now: float, log_dirs: list[LogDirDescription]
    ) -> tuple[list[Volume], set[tuple[int, str]]]:
        """Cache the volumes described at `now`; (those volumes, the keys described without
        sizes)."""
        observed: list[Volume] = []
        unsized: set[tuple[int, str]] = set()
        for log_dir in log_dirs:
            volume = log_dir.to_volume()
            if volume is None:
                unsized.add(log_dir.key)
                self._unsized(log_dir.key)
            else:
                observed.append(volume)
                self._entries[log_dir.key] = CachedVolume(volume, now, self.violates(volume))
        return observed, unsized

    def _age_missing(
        self, key: tuple[int, str], now: float, seen_again: bool
    ) -> tuple[CachedVolume, bool, bool]:
        """A cached volume this observation did not describe: (its entry, kept, kept only by its
        hold). One not kept is evicted, and remembered as hold-expired when its hold ended it."""
        entry = self._entries[key]
        if seen_again and not entry.broker_seen_since:
            entry = self._entries[key] = replace(entry, broker_seen_since=True)
        age = now - entry.seen_at
        holding = entry.violating and not entry.broker_seen_since
        if age < self.validity_seconds and not entry.offline:
            return entry, True, False
        if holding and age < self.hold_seconds:
            return entry, True, True
        del self._entries[key]
        if holding and (entry.offline or self.hold_seconds > self.validity_seconds):
            self._hold_expired[key] = entry
        return entry, False, False

    def _unsized(self, key: tuple[int, str]) -> None:
        """Its log dir is described without sizes: a holding entry goes (or stays) offline, held
        by the hold alone from now on; any other is dropped, not evicted (the proposal's rule).

        With a hold of zero nothing goes offline: the plugin's behaviour."""
        entry = self._entries.get(key)
        if entry is None or entry.offline:
            return
        if entry.violating and not entry.broker_seen_since and self.hold_seconds > 0:
            self._entries[key] = replace(entry, offline=True)
        else:
            del self._entries[key]
