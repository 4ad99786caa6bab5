"""The proposal's policy (StopOnViolation): 0.0 when any volume violates, else 1.0."""

from kvq.model.limits import MinAvailableBytes, MinAvailableRatio
from kvq.model.policy_run import PolicyRun
from kvq.model.stop_on_violation import StopOnViolation
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
