"""ISO 8601 durations (`PT1M`, `PT5M`, `P1D`) as the proposal specifies them, read exactly as the
Strimzi plugin reads them: with Java's `Duration.parse` (days, hours, minutes, seconds with up to
nine decimals, letters in either case: `pt5s` is PT5S). What Java refuses is refused here too,
with a "did you mean" for the usual slips (`5s`, `30`, `PT5`, `P1W`)."""

from __future__ import annotations

import re
from datetime import timedelta

import isodate

LONGEST = timedelta(days=36500)
"""Longer durations are refused: they overflow clocks and timers (and mean "never" anyway)."""

_JAVA = re.compile(
    r"([-+]?)P(?:([-+]?[0-9]+)D)?"
    r"(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?",
    re.IGNORECASE,
)
"""java.time.Duration's own pattern (JDK 17), matched case-insensitively as Java does."""
_CALENDAR = re.compile(r"[-+]?P(?:[0-9]+Y)?(?:[0-9]+M)?(?:[0-9]+W)?(?:[0-9]+D)?(?:T.*)?", re.I)
_GO_STYLE = re.compile(
    r"(?:([0-9]+)d)?(?:([0-9]+)h)?(?:([0-9]+)m(?!s))?(?:([0-9]+(?:\.[0-9]+)?)s)?(?:([0-9]+)ms)?",
    re.IGNORECASE,
)
_NANOS = 10**9
EXAMPLES = "examples: PT30S, PT1M, PT5M, P1D"


def parse_duration(text: str) -> timedelta:
    """Parse a non-negative duration as Java's `Duration.parse` does.

    Raises ValueError saying what is allowed: years, months and weeks are not Java durations
    (years and months have no fixed length), negative durations and durations longer than
    LONGEST (100 years) are refused.
    """
    value = text.strip()
    nanos = _java_nanos(value)
    if nanos is None:
        raise ValueError(_why_not(value))
    if nanos < 0:
        raise ValueError("a duration cannot be negative")
    if nanos > LONGEST // timedelta(microseconds=1) * 1000:
        raise ValueError("too long: at most P36500D (100 years)")
    return timedelta(microseconds=nanos // 1000)


def _java_nanos(text: str) -> int | None:
    """The duration in nanoseconds, or None where `Duration.parse` throws."""
    match = _JAVA.fullmatch(text)
    if match is None:
        return None
    sign, days, time_part, hours, minutes, seconds, fraction = match.groups()
    if time_part is not None and time_part.upper() == "T":
        return None  # a T with nothing after it (Java: "PT", "P1DT")
    if days is None and time_part is None:
        return None  # a bare P
    whole = int(days or 0) * 86400 + int(hours or 0) * 3600 + int(minutes or 0) * 60
    second_nanos = int(seconds or 0) * _NANOS
    fraction_nanos = int((fraction or "").ljust(9, "0"))
    second_nanos += -fraction_nanos if (seconds or "").startswith("-") else fraction_nanos
    total = whole * _NANOS + second_nanos
    return -total if sign == "-" else total


def _why_not(text: str) -> str:
    """The message for text Java refuses: what is wrong and, where we can tell, the fix."""
    if _CALENDAR.fullmatch(text):
        before_time = text.upper().split("T")[0]
        if "Y" in before_time or "M" in before_time:
            return "years and months have no fixed length; use days (P30D) or hours"
        weeks = re.search(r"([0-9]+)W", before_time)
        if weeks:
            return f"weeks are not a Java duration; did you mean P{int(weeks[1]) * 7}D?"
    suggestion = suggest_duration(text)
    hint = f"; did you mean {suggestion}?" if suggestion else ""
    return f"not an ISO 8601 duration ({EXAMPLES}){hint}"


def suggest_duration(text: str) -> str | None:
    """The ISO 8601 spelling of a slip: `30` -> PT30S, `PT5` -> PT5S, `5s` -> PT5S,
    `1h30m` -> PT1H30M, `2d` -> P2D, `500ms` -> PT0.5S; None when there is no obvious one."""
    if re.fullmatch(r"[0-9]+(?:\.[0-9]+)?", text):
        return f"PT{text}S"
    missing_unit = re.fullmatch(r"PT([0-9]+(?:[.,][0-9]+)?)", text, re.IGNORECASE)
    if missing_unit:
        return f"PT{missing_unit[1]}S"
    match = _GO_STYLE.fullmatch(text)
    if not text or match is None:
        return None
    days, hours, minutes, seconds, millis = match.groups()
    if millis is not None:
        if seconds is not None:
            return None
        seconds = f"{int(millis) / 1000:.3f}".rstrip("0").rstrip(".")
    time = "".join(f"{n}{unit}" for n, unit in ((hours, "H"), (minutes, "M"), (seconds, "S")) if n)
    return "P" + (f"{days}D" if days else "") + (f"T{time}" if time else "")


def format_duration(value: timedelta) -> str:
    """Render a timedelta back as ISO 8601 (`PT1M`), for effective-config output."""
    if value == timedelta(0):
        return "PT0S"
    return isodate.duration_isoformat(value)
