"""The violation hold: a full broker that leaves (restarts) keeps the cluster throttled until it is
back, or until the hold expires, which is then reported (Strimzi kafka-quotas-plugin issue #40)."""

from __future__ import annotations

from kvq.model.limits import MinAvailableBytes
from kvq.model.observation import Observation
from kvq.model.stop_on_violation import StopOnViolation
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


STORAGE_ERROR = 56


def offline(broker: int = 2, log_dir: str = "/data", code: int = STORAGE_ERROR):
    """A log dir Kafka took offline: error code, sizes -1 (what Kafka 4.1 answers)."""
    return LogDirDescription(broker, log_dir, -1, -1, code)


def observe(s: ThrottleFactorSource, time: float, *dirs: LogDirDescription) -> float:
    s.observe(Observation(time, tuple(sorted({d.broker_id for d in dirs})), dirs))
    return s.factor_at(time).value


def sized(broker: int, free: int, log_dir: str = "/data") -> LogDirDescription:
    return LogDirDescription(broker, log_dir, 1000, free)


def test_a_violating_log_dir_that_goes_offline_stays_violating_and_held_at_once():
    """Kafka takes a log dir that filled up (ENOSPC) offline: error 56, no sizes. The volume seen
    violating a poll before must keep the cluster throttled, the disk is full."""
    s = source()
    assert observe(s, 0, sized(1, 500), sized(2, 50)) == 0.0
    assert observe(s, 5, sized(1, 500), offline()) == 0.0
    assert [e.volume.key for e in s.state.held] == [(2, "/data")]  # held at once, not cached
    assert [v.key for v in s.state.violating] == [(2, "/data")]
    assert [d.unusable_reason for d in s.state.unusable] == ["error"]
    assert [v.key for v in s.state.volumes] == [(1, "/data")]  # ActiveLogDirs: sized ones only
    for minute in range(1, 60):  # offline far beyond the validity: still held
        assert observe(s, minute * MINUTE, sized(1, 500), offline()) == 0.0, minute
    assert s.state.evictions_total == 0 and s.state.hold_expired == ()


def test_any_error_code_or_missing_sizes_hold_a_violating_log_dir():
    for unsized in (offline(code=1), LogDirDescription(2, "/data", -1, -1)):
        s = source()
        observe(s, 0, sized(2, 50))
        assert observe(s, 5, unsized) == 0.0, unsized
        assert len(s.state.held) == 1


def test_a_log_dir_that_errors_without_violating_is_not_a_volume_at_once():
    """A failed disk that had space (even just above the limit) is the proposal's unusable log
    dir: not judged, not cached, nothing held."""
    s = source()
    assert observe(s, 0, sized(1, 500), sized(2, 101)) == 1.0  # limit 100: just above
    assert observe(s, 5, sized(1, 500), offline()) == 1.0
    assert (s.state.cached, s.state.held, s.state.evictions_total) == ((), (), 0)
    assert [d.unusable_reason for d in s.state.unusable] == ["error"]


def test_an_offline_log_dir_seen_again_with_space_is_released():
    s = source()
    observe(s, 0, sized(2, 50))
    observe(s, 5, offline())
    assert observe(s, 10 * MINUTE, sized(2, 50)) == 0.0  # back online, still full: fresh data
    assert s.state.held == ()
    observe(s, 11 * MINUTE, offline())
    assert observe(s, 12 * MINUTE, sized(2, 900)) == 1.0  # back with space: released
    assert (s.state.cached, s.state.held, s.state.evictions_total) == ((), (), 0)


def test_an_offline_log_dirs_hold_expires_loudly_until_it_is_seen_again():
    s = source()
    observe(s, 0, sized(1, 500), sized(2, 50))
    assert observe(s, HOLD - 1, sized(1, 500), offline()) == 0.0
    assert observe(s, HOLD, sized(1, 500), offline()) == 1.0  # the hold has passed: released...
    assert [e.volume.key for e in s.state.hold_expired] == [(2, "/data")]  # ...and reported
    assert s.state.hold_expired[0].offline and s.state.evictions_total == 1
    observe(s, HOLD + MINUTE, sized(1, 500))  # its broker away: not seen again either
    assert len(s.state.hold_expired) == 1
    observe(s, HOLD + 2 * MINUTE, sized(1, 500), offline())
    assert len(s.state.hold_expired) == 1
    observe(s, HOLD + 3 * MINUTE, sized(1, 500), sized(2, 900))
    assert s.state.hold_expired == ()


def test_a_departed_full_broker_that_comes_back_with_that_log_dir_offline_stays_held():
    """The restart case: a full broker leaves and comes back with the full dir offline."""
    s = source()
    observe(s, 0, sized(1, 500), sized(2, 50))
    assert observe(s, MINUTE, sized(1, 500)) == 0.0  # away, within the validity: cached
    assert s.state.held == ()
    assert observe(s, 2 * MINUTE, sized(1, 500), sized(2, 900, "/other"), offline()) == 0.0
    assert [e.volume.key for e in s.state.held] == [(2, "/data")]
    assert observe(s, 3 * MINUTE, sized(1, 500), sized(2, 900, "/other")) == 1.0  # answered
    assert s.state.hold_expired == () and s.state.evictions_total == 1  # without it: ends hold


def test_an_offline_log_dir_is_not_held_with_a_hold_of_zero():
    s = source(hold=0.0)
    observe(s, 0, sized(2, 50))
    assert observe(s, 5, offline()) == 1.0  # the plugin's behaviour: not a volume
    assert (s.state.cached, s.state.held, s.state.hold_expired) == ((), (), ())
