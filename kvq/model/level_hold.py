"""LevelHold: the highest of a volume's level samples over its last seconds (the exporter's side;
the backfill takes the same maximum with a window over time: `spark.volume_history`)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field


@dataclass(slots=True)
class LevelHold:
    """A volume's level samples (`ThrottleFactorPolicy.level_sample`) of the last `seconds`,
    oldest first: a sample taken at time t is read until a later one's time less `seconds` is
    past t (the bound included, as a window over time includes it)."""

    seconds: float
    kept: deque[tuple[float, float]] = field(default_factory=deque)

    def take(self, time: float, sample: float) -> float:
        """Keep `sample`, taken at `time` (later than every one kept); the highest of those kept
        (this one's included)."""
        self.kept.append((time, sample))
        since = time - self.seconds
        while self.kept[0][0] < since:
            self.kept.popleft()
        return max(kept for _, kept in self.kept)
