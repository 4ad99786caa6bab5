"""PolicyRun: a policy applied to successive observations, the exporter's side of the seam
(the backfill evaluates the same declarations on Spark Columns: `spark.volume_history`)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kvq.model.depth_accumulator import DepthAccumulator
from kvq.model.level_hold import LevelHold
from kvq.model.policy_expressions import PLAIN
from kvq.model.reading_trail import ReadingTrail
from kvq.model.throttle_factor_policy import (
    UNTHROTTLED,
    ReadingWindows,
    ThrottleFactorPolicy,
    VolumeReading,
    cluster_factor,
)
from kvq.model.volume import Volume


@dataclass(frozen=True, slots=True)
class FactorCalculation:
    """The factor computed from one set of volumes and the volumes that violated the limit."""

    factor: float
    violating: tuple[Volume, ...]


class PolicyRun:
    """A policy applied to successive observations (the exporter's side of the seam): keeps the
    factor each volume got when last observed (a cached volume keeps it), and for a policy that
    needs them each volume's last usable readings, its depth and its gauges."""

    def __init__(self, policy: ThrottleFactorPolicy) -> None:
        self.policy = policy
        self._factors: dict[tuple[int, str], float] = {}
        self._readings: dict[tuple[int, str], tuple[VolumeReading, ...]] = {}
        self._depths: dict[tuple[int, str], DepthAccumulator] = {}
        self._trails: dict[tuple[int, str], ReadingTrail] = {}
        self._holds: dict[tuple[int, str], LevelHold] = {}
        self._freed_at: float | None = None
        """When space was last freed on a volume of the cluster (`_freed_lately`)."""
        self.columns: dict[tuple[int, str], tuple[float, ...]] = {}
        """Per judged volume: the policy's gauges and then its factor (only for a policy that
        has gauges), as last observed."""

    def calculate(
        self, observed: Iterable[Volume], cached: Iterable[Volume] = (), time: float = 0.0
    ) -> FactorCalculation:
        """The factor of `observed` (read at `time`) and `cached` (judged as last observed)."""
        observed, cached = tuple(observed), tuple(cached)
        policy, limit, history = self.policy, self.policy.limit, self.policy.history
        known, self._factors = self._factors, {}
        columns, self.columns = self.columns, {}
        gauged = bool(policy.gauges)
        factors: list[float] = []
        violating: list[Volume] = []
        readings = [self._reading(volume, time) for volume in observed]
        # Every volume's restart first: space freed on one is news to all of them.
        steps = [
            self._depth_step(volume.key, reading)
            for volume, reading in zip(observed, readings, strict=True)
        ]
        if any(bool(restart) for _, restart in steps):
            self._freed_at = time
        freed = self._freed_lately(time)
        for volume, reading, (step, restart) in zip(observed, readings, steps, strict=True):
            key = volume.key
            reading = reading._replace(cluster_freed=freed)
            previous = self._readings.get(key, ()) if history else ()
            depth = (
                self._depth(key, reading, previous, step, restart) if policy.accumulates else 0.0
            )
            factor = float(policy.volume_factor(reading, previous, depth, PLAIN))
            if gauged:
                gauges = policy.volume_gauges(reading, previous, PLAIN)
                self.columns[key] = (*map(float, gauges), factor)
            # A previous reading carries neither windows nor the cluster's news (in the backfill
            # neither).
            reading = reading._replace(windows=ReadingWindows(), cluster_freed=False)
            trail = self._trails.get(key)
            if trail is not None:
                trail.take(reading)
            if history:
                self._readings[key] = (reading, *previous)[:history]
            factors.append(factor)
            self._factors[key] = factor
            if limit.is_violated(volume.available_bytes, volume.available_ratio):
                violating.append(volume)
        for volume in cached:  # cached volumes were observed earlier, by this run
            key = volume.key
            factors.append(known[key])
            self._factors[key] = known[key]
            if gauged:
                self.columns[key] = columns[key]
            if limit.violated_by(volume):
                violating.append(volume)
        return FactorCalculation(cluster_factor(factors), tuple(violating))

    def _depth_step(self, key: tuple[int, str], reading: VolumeReading) -> tuple[Any, Any]:
        """The volume's `depth_step` at `reading` ((0.0, False) for a policy that does not
        accumulate)."""
        if not self.policy.accumulates:
            return 0.0, False
        previous = self._readings.get(key, ()) if self.policy.history else ()
        return self.policy.depth_step(reading, previous, PLAIN)

    def _freed_lately(self, time: float) -> bool:
        """Whether space was freed on a volume of the cluster (a restart) at `time` or within
        the policy's `freed_grace_seconds` before (`VolumeReading.cluster_freed`)."""
        if self._freed_at is None:  # only a policy that accumulates restarts
            return False
        return time - self._freed_at <= self.policy.freed_grace_seconds

    def _depth(
        self,
        key: tuple[int, str],
        reading: VolumeReading,
        previous: tuple[VolumeReading, ...],
        step: Any,
        restart: Any,
    ) -> float:
        """The volume's depth with `reading` (its `depth_step`: `step`, `restart`) taken in."""
        policy = self.policy
        samples = tuple(map(float, policy.peak_sample(reading, previous, PLAIN)))
        accumulated = self._depths.setdefault(key, DepthAccumulator())
        forgets = bool(restart) and bool(policy.forgets_peaks(reading, PLAIN))
        calm = float(policy.calm_seconds(reading, previous, samples, PLAIN))
        peaks = accumulated.take_peaks(samples, forgets, calm, policy.peak_memory_seconds)
        levels = self._levels(key, reading, peaks)
        floor, at_once = policy.depth_floor(reading, previous, peaks, PLAIN, levels)
        return accumulated.take(
            float(step),
            bool(restart),
            float(floor),
            float(at_once),
            reading.time,
            policy.floor_climb,
        )

    def decisive(self, observed: Iterable[Volume], time: float) -> bool:
        """Whether `observed`, read at `time`, shows a volume at or past its limit, a throttled
        one whose depth would restart (space freed: its factor back to 1.0 at once) or one
        closing on its limit fast (`closing_fast`), judged against the readings kept so far
        without taking them in: a check between polls that shows none of these lifts nothing,
        crosses nothing and hastens nothing (the exporter drops it, `exporter.poller`). A
        volume not throttled restarts on any growth; that is no reason."""
        policy = self.policy
        for volume in observed:
            if policy.limit.violated_by(volume):
                return True
            previous = self._readings.get(volume.key, ())
            if not previous:
                continue
            reading = self._reading(volume, time)._replace(cluster_freed=self._freed_lately(time))
            throttled = self._factors.get(volume.key, UNTHROTTLED) < UNTHROTTLED
            freed = (
                throttled and policy.accumulates and policy.depth_step(reading, previous, PLAIN)[1]
            )
            if bool(freed) or policy.closing_fast(reading, previous[0], throttled):
                return True
        return False

    def _levels(
        self, key: tuple[int, str], reading: VolumeReading, peaks: tuple[float, ...]
    ) -> tuple[float, float] | None:
        """The volume's level sample at `reading` and the highest of its last
        `level_hold_seconds` (None for a policy that holds none)."""
        seconds = self.policy.level_hold_seconds
        if not seconds:
            return None
        sample = float(self.policy.level_sample(reading, peaks, PLAIN))
        hold = self._holds.setdefault(key, LevelHold(seconds))
        return sample, hold.take(reading.time, sample)

    def _reading(self, volume: Volume, time: float) -> VolumeReading:
        """`volume` read at `time`, with the aggregates the policy's windows give it over the
        readings taken in before (`ReadingWindows`)."""
        reading = VolumeReading.of(volume, time)
        policy = self.policy
        if not (policy.growth_windows or policy.looks_back):
            return reading
        trail = self._trails.get(volume.key)
        if trail is None:
            trail = ReadingTrail(policy.growth_windows, policy.looks_back)
            self._trails[volume.key] = trail
        return reading._replace(windows=trail.windows(reading))
