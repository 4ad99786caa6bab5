"""`make demo SCENARIO=slowdown KAFKA=apache`: each run's share of the bound, taken apart
(`demo.slowdown.ShareLedger`): on a volume that keeps each byte RESIDENCE_SECONDS, what an episode
of two residences or more writes is twice the room, less the headroom at its end and a residence
before, plus what its first seconds wrote."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from demo.producers import Sample
from demo.slowdown import FULL, RESIDENCE_SECONDS, SETUP, WARM_UP, Outcome
from devkit.producer_load import DeliveryLog

RATE, RATIO, ROOM = 100_000, 1.13, 15_000_000
"""Value bytes/s acknowledged at the full rate, disk bytes per value byte, bytes above the limit
before the load wrote anything."""
STEP = 0.1


def share_of_rate(at: float, slowed: float) -> float:
    """A throttle's shape: full until `slowed`, a deep approach, then riding at various rates."""
    since = at - slowed
    if since < 0:
        return 1.0
    if since < 30:
        return 0.8 - 0.015 * since
    return (0.6, 0.9, 0.75)[int(since // 40) % 3]


def outcome(slowed: float, freed: float) -> Outcome:
    """A run on a volume that holds exactly what was written over the last RESIDENCE_SECONDS."""
    log = DeliveryLog()
    ticks = round((freed + 10) / STEP)
    log.acked = [
        (k * STEP, round(RATE * STEP * share_of_rate(k * STEP, slowed))) for k in range(ticks)
    ]
    limit = SETUP.limit

    def usable(at: float) -> int:
        held = log.acked_bytes(max(at - RESIDENCE_SECONDS, 0.0), at)
        return round(limit + ROOM - RATIO * held)

    # Nothing leaves before a residence: the disk bytes per acknowledged byte come out as RATIO.
    samples = [Sample(k * STEP, {FULL: usable(k * STEP)}, 0) for k in range(ticks)]
    watch = SimpleNamespace(
        samples=samples, lowest=lambda: (min(s.usable[FULL] for s in samples), FULL)
    )
    run = SimpleNamespace(
        producers=[SimpleNamespace(user="alice", client_id="web", kind="librdkafka", log=log)],
        watch=watch,
        load_started=0.0,
        limit=limit,
        setup=SETUP,
        marks={WARM_UP: 0.0},
    )
    return Outcome("graceful-slowdown", run, slowed=slowed, freed=freed)  # type: ignore[arg-type]


@pytest.mark.parametrize("slowed", [10.0, 20.0])
def test_the_ledger_adds_up_to_the_share_of_the_bound(slowed):
    run = outcome(slowed, slowed + 150.0)
    ledger = run.ledger()
    any_policy, _, _ = run.bound()
    assert ledger is not None
    assert ledger.first_seconds == pytest.approx(150.0 - 2 * RESIDENCE_SECONDS)
    assert ledger.share() == pytest.approx(run.episode_bytes / any_policy, abs=0.01)


def test_the_ledger_names_the_headroom_at_the_end_and_a_residence_before():
    slowed = 10.0
    run = outcome(slowed, slowed + 150.0)
    ledger = run.ledger()
    assert ledger is not None
    assert ledger.at_end == run.usable_at(slowed + 150.0) - SETUP.limit
    assert (
        ledger.residence_before == run.usable_at(slowed + 150.0 - RESIDENCE_SECONDS) - SETUP.limit
    )
    assert ledger.row().startswith(f"{ledger.share():.0%}: 2 x room 15.0 MB, less headroom")


def test_an_episode_shorter_than_two_residences_has_no_ledger():
    assert outcome(10.0, 10.0 + 2 * RESIDENCE_SECONDS - 1).ledger() is None


def test_a_sample_taken_while_the_volume_grew_is_not_the_episodes_end():
    """On Kafka the tmpfs is remounted larger before `freed` is marked: a watch sample taken in
    between already sees the space freed, and neither the ledger nor the run's own bound reads it
    as the headroom left at the end."""
    slowed, freed = 10.0, 160.0
    steady = outcome(slowed, freed)
    grew = outcome(slowed, freed)
    samples = grew.run.watch.samples
    at_end = max(i for i, s in enumerate(samples) if s.at <= freed)
    grown = samples[at_end]
    samples[at_end] = Sample(grown.at, {FULL: grown.usable[FULL] + (32 << 20)}, 0)
    grew.growing = samples[at_end - 1].at + STEP / 2
    ledger, expected = grew.ledger(), steady.ledger()
    assert ledger is not None and expected is not None
    assert ledger.at_end == samples[at_end - 1].usable[FULL] - SETUP.limit
    assert ledger.share() == pytest.approx(expected.share(), abs=0.001)
    assert grew.bound() == pytest.approx(steady.bound(), rel=1e-3)
