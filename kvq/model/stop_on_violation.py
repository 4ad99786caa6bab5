"""StopOnViolation: the proposal's policy, the default (`kvq.throttle.policy=stop-on-violation`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

from kvq.model.limits import Limit
from kvq.model.policy_expressions import Expressions
from kvq.model.throttle_factor_policy import THROTTLED, UNTHROTTLED, VolumeReading


@dataclass(frozen=True, slots=True)
class StopOnViolation:
    """The proposal's rule: message production stops (factor 0.0) while any volume violates the
    limit, else it runs unthrottled (1.0)."""

    limit: Limit
    history: ClassVar[int] = 0
    growth_windows: ClassVar[tuple[float, ...]] = ()
    looks_back: ClassVar[tuple[float, ...]] = ()
    reads_forecast: ClassVar[bool] = False
    accumulates: ClassVar[bool] = False
    peaks: ClassVar[int] = 0
    level_hold_seconds: ClassVar[float] = 0.0
    freed_grace_seconds: ClassVar[float] = 0.0
    polls_watched_after_lift: ClassVar[int] = 3
    """As graceful-slowdown's: a lift lets the whole held load back at once onto a volume just
    freed, and a check that shows it past the limit again throttles a check interval after the
    crossing, not a poll interval."""
    checks_unthrottled: ClassVar[bool] = False
    """The proposal's cadence until a throttle: the limit crossed shows at the next poll."""
    gauges: ClassVar[tuple[str, ...]] = ()

    def depth_step(
        self, reading: VolumeReading, previous: tuple[VolumeReading, ...], ops: Expressions
    ) -> tuple[Any, Any]:
        return 0.0, False

    def peak_sample(
        self, reading: VolumeReading, previous: tuple[VolumeReading, ...], ops: Expressions
    ) -> tuple[Any, ...]:
        return ()

    def forgets_peaks(self, reading: VolumeReading, ops: Expressions) -> Any:
        return True

    def calm_seconds(
        self,
        reading: VolumeReading,
        previous: tuple[VolumeReading, ...],
        samples: tuple[Any, ...],
        ops: Expressions,
    ) -> Any:
        return 0.0

    @property
    def peak_memory_seconds(self) -> float:
        return math.inf

    def level_sample(self, reading: VolumeReading, peaks: tuple[Any, ...], ops: Expressions) -> Any:
        return 0.0

    def depth_floor(
        self,
        reading: VolumeReading,
        previous: tuple[VolumeReading, ...],
        peaks: tuple[Any, ...],
        ops: Expressions,
        levels: tuple[Any, Any] | None = None,
    ) -> tuple[Any, Any]:
        return 0.0, 0.0

    @property
    def floor_climb(self) -> float:
        return 0.0

    def closing_fast(self, reading: VolumeReading, last: VolumeReading, throttled: bool) -> bool:
        return False

    def volume_factor(
        self,
        reading: VolumeReading,
        previous: tuple[VolumeReading, ...],
        depth: Any,
        ops: Expressions,
    ) -> Any:
        violated = self.limit.is_violated(reading.available_bytes, reading.available_ratio)
        return ops.choose(violated, THROTTLED, UNTHROTTLED)

    def volume_gauges(
        self, reading: VolumeReading, previous: tuple[VolumeReading, ...], ops: Expressions
    ) -> tuple[Any, ...]:
        return ()
