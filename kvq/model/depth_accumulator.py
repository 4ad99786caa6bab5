"""DepthAccumulator: the depth, peak and held floor of one volume, on numbers, as the backfill's
windows compute them (`kvq.model.throttle_factor_policy`: a policy that `accumulates`)."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(slots=True)
class DepthAccumulator:
    """A volume's accumulators as the backfill computes them, each since the last restart: its
    peaks (the running maximum of each of its samples); its held floor (`climb` x time plus the
    running minimum of each floor less `climb` x its time, or the floor that holds at once if
    higher);
    the sum of its steps and the running minimum of that sum less the held floor (0 included).
    The depth is the sum less that minimum: the sum, kept at or above the held floor as it
    comes."""

    peaks: tuple[float, ...] = ()
    climb_from: float = math.inf
    total: float = 0.0
    lowest: float = 0.0

    def take_peaks(self, samples: tuple[float, ...], reset: bool) -> tuple[float, ...]:
        if reset or not self.peaks:
            self.peaks = samples
        else:
            self.peaks = tuple(map(max, self.peaks, samples))
        return self.peaks

    def take(
        self,
        step: float,
        restart: bool,
        floor: float,
        at_once: float,
        time: float,
        climb: float,
    ) -> float:
        start = floor - climb * time
        if restart:
            self.total = self.lowest = 0.0
            self.climb_from = start
        else:
            self.total += step
            self.climb_from = min(self.climb_from, start)
        held = max(climb * time + self.climb_from, at_once)
        self.lowest = min(self.lowest, self.total - held)
        return self.total - self.lowest
