"""A clock a test sets: what the code under test gets as its injected `now()`."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Generic, TypeVar

Time = TypeVar("Time", datetime, float)


class SettableClock(Generic[Time]):
    """Returns `now` until the test moves it (no test waits for time to pass)."""

    def __init__(self, now: Time) -> None:
        self.now = now

    def __call__(self) -> Time:
        return self.now


def wall_clock(year: int, month: int, day: int, hour: int) -> SettableClock[datetime]:
    """A settable clock for code that reads UTC datetimes (the enforcer's journal)."""
    return SettableClock(datetime(year, month, day, hour, tzinfo=UTC))
