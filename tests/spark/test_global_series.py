"""The driver's cluster-wide series (`spark.global_series`): the same lines, written run by run."""

from __future__ import annotations

import pytest

import spark.global_series as global_series
from kvq.contract.metric_families import backfilled
from kvq.model.limits import MinAvailableBytes
from spark.global_series import global_lines, timestamp_suffixes
from spark.openmetrics_text import format_value, joined_texts
from spark.poll_history import GridState

LIMIT = MinAvailableBytes(1_000)
FAMILIES = {family.short: family for family in backfilled(LIMIT)}


def state(t: int, factor: float, last_success: float | None) -> GridState:
    return GridState(t, factor, 0, 0, 0, 0, 3, 6, 0, 0, 0, 0, 0, 0, 0, last_success)


def one_line_at_a_time(family, states, prefix="") -> list[str]:
    """What the lines must be: one per state with a value, in time order."""
    name = family.sample_name + '{cluster="c"} '
    field = {
        "throttle_factor": "throttle_factor",
        "last_successful_poll_timestamp_seconds": ("last_success"),
    }[family.short]
    return [
        f"{prefix}{name}{format_value(getattr(s, field))} {s.t}\n"
        for s in states
        if getattr(s, field) is not None
    ]


@pytest.mark.parametrize("short", ["throttle_factor", "last_successful_poll_timestamp_seconds"])
def test_each_state_gives_its_line_in_time_order_runs_and_gaps_alike(monkeypatch, short):
    monkeypatch.setattr(global_series, "LINES_PER_TEXT", 3)  # runs longer than a text
    factors = [1.0] * 7 + [0.5, 0.25, 0.25, 1.0]
    successes = [None, None, 60.0, 60.0, 60.0, 60.0, 60.0, 420.0, 480.0, None, 600.0]
    states = [state(60 * i, f, s) for i, (f, s) in enumerate(zip(factors, successes, strict=True))]
    family = FAMILIES[short]

    texts = list(
        global_lines(
            family, states, LIMIT, 30.0, {"cluster": "c"}, timestamp_suffixes(states), "s\t"
        )
    )

    assert "".join(texts).splitlines(keepends=True) == one_line_at_a_time(family, states, "s\t")
    assert all(text.count("\n") <= 3 for text in texts)


def test_texts_are_joined_into_writes_of_about_the_size_asked_in_order():
    texts = [f"{i}\n" * 10 for i in range(100)]

    joined = list(joined_texts(texts, size=50))

    assert "".join(joined) == "".join(texts)
    # each at least the size, less than it plus one text (at most 30 characters here)
    assert all(50 <= len(text) < 50 + 30 for text in joined[:-1])
    assert list(joined_texts([])) == []
