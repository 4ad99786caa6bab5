"""The violation hold: a full broker that leaves (restarts) keeps the cluster throttled until it is
back, or until the hold expires, which is then reported (Strimzi kafka-quotas-plugin issue #40)."""

from __future__ import annotations

from kvq.model.limits import MinAvailableBytes
from kvq.model.observation import Observation
from kvq.model.throttle_factor_policy import StopOnViolation
from kvq.model.throttle_factor_source import ThrottleFactorSource
from kvq.model.volume import LogDirDescription

MINUTE = 60.0
VALIDITY = 5 * MINUTE
HOLD = 60 * MINUTE


def source(hold: float = HOLD) -> ThrottleFactorSource:
    policy = StopOnViolation(MinAvailableBytes(100))
    return ThrottleFactorSource(policy, VALIDITY, 1.0, 0.0, hold_seconds=hold)


def poll(s: ThrottleFactorSource, time: float, **available: int) -> float:
    """One successful poll of the brokers given as b<id>=<available bytes>; the factor after it."""
    dirs = tuple(
        LogDirDescription(int(name[1:]), "/data", 1000, free) for name, free in available.items()
    )
    s.observe(Observation(time, tuple(d.broker_id for d in dirs), dirs))
    return s.factor_at(time).value


def test_a_full_broker_that_restarts_keeps_the_cluster_throttled_until_it_is_back_and_below():
    s = source()
    assert poll(s, 0, b1=500, b2=50) == 0.0  # broker 2 is full: throttled
    for minute in range(1, 30):  # broker 2 restarts and takes 29 minutes of log recovery
        assert poll(s, minute * MINUTE, b1=500) == 0.0, minute
    assert [e.volume.broker_id for e in s.state.held] == [2]
    assert s.state.evictions_total == 0
    assert poll(s, 30 * MINUTE, b1=500, b2=50) == 0.0  # back, still full: fresh data violates
    assert s.state.held == ()
    assert poll(s, 31 * MINUTE, b1=500, b2=900) == 1.0  # back and below the limit: released


def test_within_the_validity_it_is_the_ordinary_cache_and_not_held():
    s = source()
    poll(s, 0, b1=500, b2=50)
    poll(s, VALIDITY - 1, b1=500)  # within the validity: cached, not held yet
    assert len(s.state.cached) == 1 and s.state.held == ()
    poll(s, VALIDITY, b1=500)  # from the validity on: held instead of evicted
    assert len(s.state.held) == 1 and s.state.evictions_total == 0


def test_a_departed_broker_that_did_not_violate_is_evicted_at_the_validity_as_before():
    s = source()
    poll(s, 0, b1=500, b2=900)
    assert poll(s, VALIDITY + 1, b1=500) == 1.0
    assert s.state.cached == () and s.state.evictions_total == 1
    assert s.state.hold_expired == ()


def test_the_hold_expires_loudly_and_the_report_stays_until_the_broker_is_seen_again():
    s = source()
    poll(s, 0, b1=500, b2=50)
    assert poll(s, HOLD - 1, b1=500) == 0.0  # still held
    assert poll(s, HOLD, b1=500) == 1.0  # the hold has passed: released...
    assert [e.volume.key for e in s.state.hold_expired] == [(2, "/data")]  # ...and reported
    assert s.state.evictions_total == 1
    poll(s, HOLD + 2 * MINUTE, b1=500)
    assert len(s.state.hold_expired) == 1
    poll(s, HOLD + 3 * MINUTE, b1=500, b2=900)
    assert s.state.hold_expired == ()


def test_a_broker_that_comes_back_without_that_log_dir_ends_the_hold():
    s = source()
    s.observe(
        Observation(
            0, (2,), (LogDirDescription(2, "/a", 1000, 50), LogDirDescription(2, "/b", 1000, 900))
        )
    )
    s.observe(Observation(MINUTE, (1,), (LogDirDescription(1, "/a", 1000, 900),)))
    s.observe(Observation(2 * MINUTE, (2,), (LogDirDescription(2, "/b", 1000, 900),)))
    assert s.factor_at(2 * MINUTE).value == 0.0  # within the validity: cached, violating
    s.observe(Observation(VALIDITY + 1, (2,), (LogDirDescription(2, "/b", 1000, 900),)))
    assert s.factor_at(VALIDITY + 1).value == 1.0  # its broker answered since: evicted, no report
    assert s.state.hold_expired == ()


def test_a_hold_of_zero_is_the_plugins_behaviour():
    s = source(hold=0.0)
    poll(s, 0, b1=500, b2=50)
    assert poll(s, VALIDITY + 1, b1=500) == 1.0
    assert s.state.held == () and s.state.hold_expired == ()
