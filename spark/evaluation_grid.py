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
from datetime import UTC, datetime

MAX_GRID_TIMES = 1_000_000
"""Grid times per cluster and run (a year at PT1M is 525,600): past it the work (every series at
every time) runs for hours and the driver's state outgrows its memory, and an archive spanning
that long usually holds a poll time written by a wrong clock. --start/--end or --step bound it."""


class EmptyGrid(ValueError):
    """The requested range holds no evaluation time inside the archive's span."""


class GridTooLarge(ValueError):
    """The requested range holds more than MAX_GRID_TIMES evaluation times."""


def utc_text(seconds: float) -> str:
    """`2026-10-01T00:00:00Z` for seconds since the epoch; the number itself when out of range."""
    try:
        moment = datetime.fromtimestamp(seconds, UTC)
    except (ValueError, OverflowError, OSError):
        return repr(seconds)
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


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
        max_times: int = MAX_GRID_TIMES,
    ) -> EvaluationGrid:
        """The grid of `step` seconds over [start, end] clipped to the archive's span; its size is
        counted before anything is built from it (raises GridTooLarge past `max_times`)."""
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
        count = grid.last - grid.first + 1
        if count > max_times:
            raise GridTooLarge(
                f"{count} grid times every {step}s from {utc_text(grid.time(grid.first))} to "
                f"{utc_text(grid.time(grid.last))}, more than {max_times} per run"
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

    def _spans(self) -> list[tuple[int, int]]:
        """The emitted indexes as disjoint inclusive ranges, in order."""
        if self.ranges is None:
            return [(self.first, self.last)]
        spans: list[tuple[int, int]] = []
        for lo, hi in sorted(self.ranges):
            lo, hi = max(lo, self.first), min(hi, self.last)
            if lo > hi:
                continue
            if spans and lo <= spans[-1][1] + 1:
                spans[-1] = (spans[-1][0], max(hi, spans[-1][1]))
            else:
                spans.append((lo, hi))
        return spans

    def indexes(self) -> Iterator[int]:
        """Every emitted index, in order (one pass over each range, however many there are)."""
        return (k for lo, hi in self._spans() for k in range(lo, hi + 1))

    def first_emitted(self) -> int:
        if self.ranges is None:
            return self.first
        return min(max(lo, self.first) for lo, _ in self.ranges)

    def last_emitted(self) -> int:
        if self.ranges is None:
            return self.last
        return max(min(hi, self.last) for _, hi in self.ranges)

    def __len__(self) -> int:
        return sum(hi - lo + 1 for lo, hi in self._spans())
