"""ReadingTrail: one volume's usable readings by time, as a policy's windows read them (the
exporter's side; the backfill computes the same aggregates with windows over time:
`spark.volume_history`)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from kvq.model.throttle_factor_policy import (
    WINDOW_SLACK_SECONDS,
    EarlierReading,
    GrowthWindow,
    ReadingWindows,
    VolumeReading,
    used_bytes,
)


@dataclass(slots=True)
class ReadingTrail:
    """A volume's usable readings of the last `span` seconds (the longest of the policy's
    windows, a growth window's slack included) and the latest one before them, oldest first:
    enough for every window of any later reading (a reading a window skips is older than one it
    reads), and every reading since the first while none is that old (a look back with nothing
    old enough reads the earliest)."""

    growth_windows: tuple[float, ...]
    looks_back: tuple[float, ...]
    kept: deque[VolumeReading] = field(default_factory=deque)

    @property
    def span(self) -> float:
        growth = (seconds + WINDOW_SLACK_SECONDS for seconds in self.growth_windows)
        return max((*growth, *self.looks_back), default=0.0)

    def windows(self, reading: VolumeReading) -> ReadingWindows:
        """`reading`'s aggregates over the readings kept before it (`ReadingWindows`)."""
        return ReadingWindows(
            tuple(self._growth(reading, seconds) for seconds in self.growth_windows),
            tuple(self._earlier(reading, seconds) for seconds in self.looks_back),
        )

    def take(self, reading: VolumeReading) -> None:
        """Keep `reading` (newer than every one kept) and forget what no window reads again."""
        self.kept.append(reading)
        since = reading.time - self.span
        while len(self.kept) > 1 and self.kept[1].time <= since:
            self.kept.popleft()

    def _growth(self, reading: VolumeReading, seconds: float) -> GrowthWindow:
        edge = reading.time - seconds  # the backfill's bounds, bit for bit
        reach = reading.time - (seconds + WINDOW_SLACK_SECONDS)
        start, grown = reading, 0
        if reading.grown_bytes is not None:  # else this reading starts a run of its own
            for earlier in reversed(self.kept):
                outside = earlier.time < edge
                nearer = earlier.time >= reach and edge - earlier.time < start.time - edge
                if outside and not nearer:
                    break  # older than the window, and not the reading nearest its edge
                grown += start.grown_bytes
                start = earlier
                if outside or earlier.grown_bytes is None:  # None: the growth before it not read
                    break
        if start is reading and self.kept:  # no earlier reading in the window: the last one
            last = self.kept[-1]
            return GrowthWindow(reading.grown_bytes or 0, last.time, used_bytes(last))
        return GrowthWindow(grown, start.time, used_bytes(start))

    def _earlier(self, reading: VolumeReading, seconds: float) -> EarlierReading:
        at_most = reading.time - seconds
        chosen = self.kept[0] if self.kept else reading
        for earlier in reversed(self.kept):
            if earlier.time <= at_most:
                chosen = earlier
                break
        return EarlierReading(chosen.time, used_bytes(chosen))
