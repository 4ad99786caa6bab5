"""The producers scenario stops at a filled volume, saying how long the loop took against how
long the limit left the load, instead of waiting on for a broker whose log dir went offline."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from demo.producers import DEVCLUSTER, INTERVALS, DiskWatch, NotProtected, Sample, stop_if_filled
from demo.scenario import Timeline

FULL = (0, 0)


def run_with(samples: list[Sample], crossed: float) -> SimpleNamespace:
    watch = DiskWatch(SimpleNamespace(kafka=None))  # type: ignore[arg-type]  # never started
    watch.samples = samples
    timeline = Timeline(started=0.0)
    return SimpleNamespace(
        watch=watch, timeline=timeline, setup=DEVCLUSTER, marks={"crossed": crossed}
    )


def falling(to: int, errors_from: float | None = None) -> list[Sample]:
    """Broker 0's volume losing 600 kB/s from the limit on (at 0 s) down to `to` bytes."""
    samples: list[Sample] = []
    usable = DEVCLUSTER.limit
    while usable > to:
        at = len(samples) / 10
        usable = max(to, usable - 60_000)
        errors = int(errors_from is not None and at >= errors_from)
        samples.append(Sample(at, {FULL: usable, (1, 0): 40_000_000}, storage_errors=errors))
    return samples


def test_a_volume_at_zero_stops_the_run_naming_the_loops_time_and_the_limits():
    run = run_with(falling(to=0), crossed=0.0)
    with pytest.raises(NotProtected) as caught:
        stop_if_filled(run)  # type: ignore[arg-type]
    message = str(caught.value)
    assert message.startswith("a volume filled 19.9 s after broker 0's crossed the limit")
    assert "which leaves 20 s at 600 kB/s" in message
    assert f"add up to {sum(INTERVALS.values()):.0f} s" in message
    assert "a volume filled (0 usable bytes or a storage error)" in run.timeline.render()


def test_a_storage_error_counts_as_filled_even_with_bytes_left():
    run = run_with(falling(to=1_000_000, errors_from=5.0), crossed=0.0)
    with pytest.raises(NotProtected, match=r"filled 5\.0 s after"):
        stop_if_filled(run)  # type: ignore[arg-type]


def test_a_volume_held_above_zero_lets_the_run_go_on():
    run = run_with(falling(to=9_000_000), crossed=0.0)
    stop_if_filled(run)  # type: ignore[arg-type]
    assert run.timeline.events == []


def test_the_limit_lasts_the_load_four_times_the_loops_configured_waits():
    """On a loaded CI runner the exporter has missed polls for seconds (crossing to factor 0 took
    8.7 s against its 1 s poll): the devcluster run's limit leaves room for that."""
    assert DEVCLUSTER.limit / DEVCLUSTER.rate >= 4 * sum(INTERVALS.values())
