"""ISO 8601 durations as the proposal specifies (PT5M, PT1M, PT0S)."""

from datetime import timedelta

import pytest

from kvq.settings.durations import format_duration, parse_duration


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("PT5M", timedelta(minutes=5)),
        ("PT1M", timedelta(minutes=1)),
        ("PT0S", timedelta(0)),
        ("PT0.5S", timedelta(milliseconds=500)),
        ("P1D", timedelta(days=1)),
        ("PT1H30M", timedelta(hours=1, minutes=30)),
        ("P36500D", timedelta(days=36500)),
    ],
)
def test_parses_fixed_durations(text, expected):
    assert parse_duration(text) == expected
    assert parse_duration(format_duration(expected)) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("5m", "not an ISO 8601 duration"),
        ("300", "not an ISO 8601 duration"),
        ("P1M", "no fixed length"),
        ("P1Y", "no fixed length"),
        ("-PT1S", "negative"),
        ("P9999999999D", "at most P36500D"),
        ("PT99999999999999999999S", "at most P36500D"),
        ("P99999999W", "at most P36500D"),
    ],
)
def test_rejects_with_what_is_allowed(text, message):
    with pytest.raises(ValueError, match=message):
        parse_duration(text)
