"""The proposal's policy (StopOnViolation): 0.0 when any volume violates, else 1.0."""

from dataclasses import dataclass
from typing import ClassVar

from kvq.model.limits import MinAvailableBytes, MinAvailableRatio
from kvq.model.throttle_factor_policy import UNTHROTTLED, PolicyRun, StopOnViolation
from kvq.model.volume import Volume


def test_no_volumes_means_no_throttling():
    result = PolicyRun(StopOnViolation(MinAvailableBytes(10))).calculate([])
    assert (result.factor, result.violating) == (1.0, ())


def test_all_volumes_healthy_gives_factor_one():
    volumes = [Volume(0, "/a", 100, 50), Volume(1, "/a", 100, 60)]
    assert PolicyRun(StopOnViolation(MinAvailableBytes(10))).calculate(volumes).factor == 1.0


def test_one_violating_volume_anywhere_stops_production():
    full = Volume(2, "/b", 100, 4)
    volumes = [Volume(0, "/a", 100, 50), full, Volume(1, "/a", 100, 60)]
    result = PolicyRun(StopOnViolation(MinAvailableRatio(0.05))).calculate(volumes)
    assert result.factor == 0.0
    assert result.violating == (full,)


def test_multiple_log_dirs_on_one_disk_are_each_judged():
    """The proposal: a disk with several log dirs is described several times; each violates."""
    shared_disk = [Volume(0, "/disk/a", 1000, 10), Volume(0, "/disk/b", 1000, 10)]
    result = PolicyRun(StopOnViolation(MinAvailableBytes(100))).calculate(shared_disk)
    assert result.factor == 0.0
    assert len(result.violating) == 2


@dataclass(frozen=True)
class SlowDownWhileShrinking:
    """A policy with history, as the next one will be: 0.5 while a volume shrinks, else 1.0."""

    limit: MinAvailableBytes
    history: ClassVar[int] = 1
    accumulates: ClassVar[bool] = False
    gauges: ClassVar[tuple[str, ...]] = ()

    def volume_factor(self, reading, previous, depth, ops):
        if not previous:
            return UNTHROTTLED
        shrinking = reading.available_bytes < previous[0].available_bytes
        return ops.choose(shrinking, 0.5, UNTHROTTLED)


def test_a_policy_run_hands_each_volume_its_previous_reading_and_cached_volumes_keep_their_factor():
    run = PolicyRun(SlowDownWhileShrinking(MinAvailableBytes(10)))
    a, b = Volume(0, "/a", 100, 90), Volume(1, "/a", 100, 90)
    assert run.calculate([a, b], time=0.0).factor == 1.0  # no previous reading yet
    shrunk = Volume(0, "/a", 100, 80)
    assert run.calculate([shrunk, b], time=60.0).factor == 0.5
    # /a of broker 0 missing from this observation: judged from cache, with the factor it got
    assert run.calculate([b], cached=[shrunk], time=120.0).factor == 0.5
    # seen again, unchanged since its previous reading (the one at 60 s): no longer shrinking
    assert run.calculate([shrunk, b], time=180.0).factor == 1.0
