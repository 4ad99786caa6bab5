"""ISO 8601 durations (`PT1M`, `PT5M`, `P1D`) as the proposal specifies them (isodate)."""

from __future__ import annotations

from datetime import timedelta

import isodate

LONGEST = timedelta(days=36500)
"""Longer durations are refused: they overflow clocks and timers (and mean "never" anyway)."""


def parse_duration(text: str) -> timedelta:
    """Parse a fixed-length, non-negative ISO 8601 duration.

    Raises ValueError saying what is allowed: years and months have no fixed length, so they are
    refused, as are negative durations and durations longer than LONGEST (100 years).
    """
    value = text.strip()
    try:
        parsed = isodate.parse_duration(value)
    except OverflowError:
        raise ValueError("too long: at most P36500D (100 years)") from None
    except (isodate.ISO8601Error, ValueError):
        raise ValueError("not an ISO 8601 duration (examples: PT30S, PT1M, PT5M, P1D)") from None
    if isinstance(parsed, isodate.Duration):
        if parsed.years or parsed.months:
            raise ValueError("years and months have no fixed length; use days (P30D) or hours")
        parsed = parsed.tdelta
    if parsed < timedelta(0):
        raise ValueError("a duration cannot be negative")
    if parsed > LONGEST:
        raise ValueError("too long: at most P36500D (100 years)")
    return parsed


def format_duration(value: timedelta) -> str:
    """Render a timedelta back as ISO 8601 (`PT1M`), for effective-config output."""
    if value == timedelta(0):
        return "PT0S"
    return isodate.duration_isoformat(value)
