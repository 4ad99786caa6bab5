"""The evaluation grid: the times at which the backfill states what the exporter published.

Grid times are whole multiples of the step since the epoch (whole seconds: promtool reads float
seconds and truncates to milliseconds, so fractional times could land one millisecond early), and
lie inside the archive's span: before the first or after the last observation the archive cannot
tell whether the exporter was running.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass


class EmptyGrid(ValueError):
    """The requested range holds no evaluation time inside the archive's span."""


def index_at_or_after(time: float, step: int) -> int:
    """The smallest k with k * step >= time (exact: corrected after the float division)."""
    k = math.ceil(time / step)
    if k * step < time:
        k += 1
    elif (k - 1) * step >= time:
        k -= 1
    return k


def index_at_or_before(time: float, step: int) -> int:
    """The largest k with k * step <= time."""
    k = math.floor(time / step)
    if k * step > time:
        k -= 1
    elif (k + 1) * step <= time:
        k += 1
    return k


@dataclass(frozen=True, slots=True)
class EvaluationGrid:
    """Grid times k * step for k in [first, last]; `ranges` restricts the output (gap filling)."""

    step: int
    first: int
    last: int
    ranges: tuple[tuple[int, int], ...] | None = None
    """Inclusive index ranges to emit; None: the whole grid."""

    @classmethod
    def over(
        cls,
        first_observation: float,
        last_observation: float,
        step: int,
        start: float | None = None,
        end: float | None = None,
    ) -> EvaluationGrid:
        """The grid of `step` seconds over [start, end] clipped to the archive's span."""
        if step < 1:
            raise ValueError("the step must be a whole number of seconds >= 1")
        low = first_observation if start is None else max(start, first_observation)
        high = last_observation if end is None else min(end, last_observation)
        grid = cls(step, index_at_or_after(low, step), index_at_or_before(high, step))
        if grid.first > grid.last:
            raise EmptyGrid(
                f"no evaluation time (multiple of {step}s) between {low} and {high}; the archive "
                f"spans {first_observation} to {last_observation} (seconds since the epoch)"
            )
        return grid

    def only(self, ranges: list[tuple[int, int]]) -> EvaluationGrid:
        """The same grid emitting only the given inclusive index ranges."""
        return EvaluationGrid(self.step, self.first, self.last, tuple(ranges))

    def time(self, index: int) -> int:
        return index * self.step

    def emitted(self, index: int) -> bool:
        if not self.first <= index <= self.last:
            return False
        return self.ranges is None or any(lo <= index <= hi for lo, hi in self.ranges)

    def indexes(self) -> Iterator[int]:
        """Every emitted index, in order."""
        return (k for k in range(self.first, self.last + 1) if self.emitted(k))

    def first_emitted(self) -> int:
        if self.ranges is None:
            return self.first
        return min(max(lo, self.first) for lo, _ in self.ranges)

    def last_emitted(self) -> int:
        if self.ranges is None:
            return self.last
        return max(min(hi, self.last) for _, hi in self.ranges)

    def __len__(self) -> int:
        return sum(1 for _ in self.indexes())
