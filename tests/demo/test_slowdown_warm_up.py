"""`make demo SCENARIO=slowdown KAFKA=apache`: the load warms up with a retention of a second
before the scenario starts (every topic's retention raised). What the volume held of the warm-up
is deleted a retention time after the start: neither the disk bytes per acknowledged byte nor the
bound count it."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from demo.producers import Sample
from demo.slowdown import (
    FULL,
    RESIDENCE_SECONDS,
    RETENTION_SECONDS,
    SETUP,
    WARM_UP,
    WARM_UP_SECONDS,
    Outcome,
    at_the_limit,
)
from devkit.producer_load import DeliveryLog

RATE, RATIO, TAIL = 100_000, 1.13, 2.0
"""Value bytes/s acknowledged, disk bytes per value byte, seconds of the warm-up the volume still
holds when the scenario starts (kept a retention time more)."""
ROOM = 15_000_000
START = WARM_UP_SECONDS


def used(at: float) -> float:
    """The load's bytes on broker 0's volume at `at` (the warm-up from 0, the scenario from
    START, never slowed, no space freed)."""
    if at < START:
        return RATIO * RATE * min(at, TAIL)
    kept = RATIO * RATE * (at - START)
    return kept + (RATIO * RATE * TAIL if at < START + RETENTION_SECONDS - 1.0 else 0.0)


def outcome(slowed: float, freed: float) -> Outcome:
    log = DeliveryLog()
    log.acked = [(k / 10, RATE // 10) for k in range(round((freed + 10) * 10))]
    producer = SimpleNamespace(user="alice", client_id="web", kind="librdkafka", log=log)
    limit = SETUP.limit
    watch = SimpleNamespace(
        samples=[
            Sample(k / 10, {FULL: round(limit + ROOM - used(k / 10))}, 0)
            for k in range(round((freed + 10) * 10))
        ]
    )
    run = SimpleNamespace(
        producers=[producer],
        watch=watch,
        load_started=START,
        limit=limit,
        setup=SETUP,
        marks={WARM_UP: 0.0},
    )
    return Outcome("graceful-slowdown", run, slowed=slowed, freed=freed)  # type: ignore[arg-type]


def test_the_warm_ups_bytes_are_left_out_of_the_disk_bytes_per_acknowledged_byte():
    """The warm-up's tail is deleted a retention time after the start, within the first
    RETENTION_SECONDS: the ratio is measured inside them, clear of it."""
    assert outcome(START + 10, START + 160).disk_per_acked_byte() == pytest.approx(RATIO, 1e-3)


def test_the_bound_is_the_room_before_the_load_wrote_anything_refilled_by_retention():
    run = outcome(START + 10, START + 160)
    any_policy, _, ratio = run.bound()
    assert any_policy == pytest.approx(at_the_limit(ROOM, 150.0) / ratio, 1e-3)
    assert any_policy == pytest.approx(ROOM * 150.0 / RESIDENCE_SECONDS / RATIO, 1e-3)
