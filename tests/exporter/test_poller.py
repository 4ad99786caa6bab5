"""Poller: how long it keeps checking between polls after a lift is the policy's to say."""

from dataclasses import dataclass
from typing import ClassVar

from exporter.poller import Poller
from kvq.model.graceful_slowdown import GracefulSlowdown
from kvq.model.limits import MinAvailableBytes
from kvq.model.observation import Observation
from kvq.model.stop_on_violation import StopOnViolation
from kvq.model.throttle_factor_source import ThrottleFactorSource
from kvq.model.volume import LogDirDescription

POLL, CHECK = 5.0, 1.0
LIMIT = MinAvailableBytes(100)


@dataclass(frozen=True, slots=True)
class UnwatchedStop(StopOnViolation):
    """The proposal's rule, asking for no checks after a lift."""

    polls_watched_after_lift: ClassVar[int] = 0


class Disk:
    """A volume source of one log dir whose available bytes the test sets."""

    def __init__(self) -> None:
        self.available = 1000
        self.time = 0.0

    def observe(self, poll: bool = False) -> Observation:
        return Observation(self.time, (0,), (LogDirDescription(0, "/d", 1000, self.available),))

    def taken_in(self, observation: Observation) -> None:
        pass


def lifted_at_one_poll(policy) -> tuple[Poller, Disk]:
    """A poller whose throttle was lifted by the poll at 5 s (a violation at the poll at 0 s)."""
    disk = Disk()
    throttle = ThrottleFactorSource(policy, 300.0, 1.0, start_time=0.0)
    poller = Poller(disk, throttle, lambda: disk.time, POLL, violation_interval_seconds=CHECK)
    disk.available = 50
    poller.poll_once()
    disk.time, disk.available = POLL, 1000
    poller.poll_once()
    assert throttle.factor_at(disk.time).value == 1.0
    return poller, disk


def test_checks_go_on_for_the_polls_the_policy_asks_to_watch_after_a_lift():
    policy = StopOnViolation(LIMIT)
    poller, disk = lifted_at_one_poll(policy)
    watched = policy.polls_watched_after_lift * POLL  # from the poll that throttled
    disk.time = watched - 0.5
    assert poller.check_interval() == CHECK
    disk.time = watched + 0.5
    assert poller.check_interval() == 0.0


def test_a_policy_that_asks_for_no_watch_gets_no_checks_after_a_lift():
    poller, disk = lifted_at_one_poll(UnwatchedStop(LIMIT))
    disk.time = POLL + 0.5
    assert poller.check_interval() == 0.0


def test_graceful_slowdown_watches_as_long_as_its_fill_rate_reads_back():
    assert GracefulSlowdown.polls_watched_after_lift == GracefulSlowdown.FILL_INTERVALS


def test_graceful_slowdown_is_checked_between_polls_before_any_throttle_and_after_a_lift():
    """A load step on a volume never throttled shows in its fill rate (a median of three
    intervals) two polls late: graceful-slowdown asks for checks whatever the factor."""
    disk = Disk()
    throttle = ThrottleFactorSource(GracefulSlowdown(LIMIT, 600.0), 300.0, 1.0, start_time=0.0)
    poller = Poller(disk, throttle, lambda: disk.time, POLL, violation_interval_seconds=CHECK)
    poller.poll_once()
    assert throttle.factor_at(disk.time).value == 1.0
    assert poller.check_interval() == CHECK
    poller, disk = lifted_at_one_poll(GracefulSlowdown(LIMIT, 600.0))
    disk.time = 10 * POLL  # long after the polls watched after the lift
    poller.poll_once()
    assert poller.check_interval() == CHECK


def test_the_proposals_rule_is_not_checked_before_a_throttle():
    disk = Disk()
    throttle = ThrottleFactorSource(StopOnViolation(LIMIT), 300.0, 1.0, start_time=0.0)
    poller = Poller(disk, throttle, lambda: disk.time, POLL, violation_interval_seconds=CHECK)
    poller.poll_once()
    assert poller.check_interval() == 0.0
