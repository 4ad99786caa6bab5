"""DepthAccumulator: the depth, peak and held floor of one volume, on numbers, as the backfill's
windows compute them (`kvq.model.throttle_factor_policy`: a policy that `accumulates`)."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(slots=True)
class DepthAccumulator:
    """A volume's accumulators as the backfill computes them, each since the last restart: its
    peaks (the running maximum of each of its samples over the current and the previous epoch
    of its calm time: the running sum of its calm seconds, in epochs of the policy's peak
    memory, so a sample is forgotten after between one and two memories of calm); its held
    floor (`climb` x time plus the running minimum of each floor less `climb` x its time, or
    the floor that holds at once if higher);
    the sum of its steps and the running minimum of that sum less the held floor (0 included).
    The depth is the sum less that minimum: the sum, kept at or above the held floor as it
    comes."""

    calm: float = 0.0
    epoch: int = 0
    epoch_peaks: tuple[float, ...] = ()
    """The running maxima of the samples in the current epoch of calm time since the restart."""
    earlier_peaks: tuple[float, ...] = ()
    """The maxima of the epoch before it (none if it had no sample, or began before the reset)."""
    climb_from: float = math.inf
    total: float = 0.0
    lowest: float = 0.0

    def take_peaks(
        self, samples: tuple[float, ...], reset: bool, calm: float = 0.0, memory: float = math.inf
    ) -> tuple[float, ...]:
        """The peaks with these samples taken in, `calm` seconds of calm added before."""
        self.calm += calm
        epoch = math.floor(self.calm / memory)
        if reset or not self.epoch_peaks or epoch > self.epoch + 1:
            self.earlier_peaks, self.epoch_peaks = (), samples
        elif epoch == self.epoch + 1:
            self.earlier_peaks, self.epoch_peaks = self.epoch_peaks, samples
        else:
            self.epoch_peaks = tuple(map(max, self.epoch_peaks, samples))
        self.epoch = epoch
        if not self.earlier_peaks:
            return self.epoch_peaks
        return tuple(map(max, self.earlier_peaks, self.epoch_peaks))

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
