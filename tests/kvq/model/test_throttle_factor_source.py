"""ThrottleFactorSource: validity/fallback rules and the proposal's inconsistent-state example."""

import pytest

from kvq.model.limits import MinAvailableBytes
from kvq.model.observation import STAGE_DESCRIBE_CLUSTER, STAGE_DESCRIBE_LOG_DIRS, Observation
from kvq.model.stop_on_violation import StopOnViolation
from kvq.model.throttle_factor_source import ThrottleFactorSource
from kvq.model.volume import LogDirDescription

MINUTE = 60.0
LIMIT = MinAvailableBytes(100)


def source(validity=2 * MINUTE, fallback=0.0, start=0.0):
    return ThrottleFactorSource(StopOnViolation(LIMIT), validity, fallback, start)


def healthy(time, brokers=(1, 2)):
    dirs = tuple(LogDirDescription(b, f"/data/{b}", 1000, 500) for b in brokers)
    return Observation(time, tuple(brokers), dirs)


def failed(time, stage=STAGE_DESCRIBE_LOG_DIRS):
    return Observation.failed(time, stage, "timeout")


def test_the_proposals_five_step_validity_example():
    """Validity 2 minutes, fallback 0.0 (section "Throttle Factor Validity Duration")."""
    s = source(validity=2 * MINUTE, fallback=0.0)
    # 1. minute 0 succeeded: calculated 1.0, use it
    s.observe(healthy(0))
    assert s.factor_at(0).value == 1.0
    # 2. minute 1 failed: continue using 1.0
    s.observe(failed(1 * MINUTE))
    assert s.factor_at(1 * MINUTE).value == 1.0
    # 3. minute 2 failed: continue using 1.0
    s.observe(failed(2 * MINUTE))
    assert s.factor_at(2 * MINUTE).value == 1.0
    assert s.state.fallback_applied_total == 0
    # 4. minute 3 failed: use the fallback 0.0
    s.observe(failed(3 * MINUTE))
    factor = s.factor_at(3 * MINUTE)
    assert (factor.value, factor.fallback) == (0.0, True)
    assert s.state.fallback_applied_total == 1
    # 5. minute 4 succeeded: calculated 1.0, use it
    s.observe(healthy(4 * MINUTE))
    factor = s.factor_at(4 * MINUTE)
    assert (factor.value, factor.fallback) == (1.0, False)
    assert s.state.fallback_applied_total == 1


def test_fallback_is_counted_once_however_often_it_is_read_or_polls_fail():
    s = source(validity=10, fallback=0.5)
    s.observe(healthy(0))
    for t in range(11, 100, 3):
        s.observe(failed(t))
        assert s.factor_at(t + 1).value == 0.5
    assert s.state.fallback_applied_total == 1
    s.observe(healthy(100))
    s.observe(failed(111))
    assert s.state.fallback_applied_total == 2


def test_expiry_is_judged_on_read_even_without_any_poll_finishing():
    """A hung poll must never keep a stale factor alive."""
    s = source(validity=10, fallback=0.0)
    s.observe(healthy(0))
    assert s.factor_at(10).value == 1.0
    factor = s.factor_at(10.001)
    assert (factor.value, factor.fallback, factor.since) == (0.0, True, 10)


def test_fallback_starts_at_expiry_whenever_it_is_noticed():
    s = source(validity=10, fallback=0.0)
    s.observe(healthy(0))
    s.observe(healthy(50))  # nobody read the factor in between: the gap still counts
    assert s.state.fallback_applied_total == 1
    assert s.factor_at(50).value == 1.0


def test_without_any_answer_the_fallback_applies_after_validity_from_start():
    s = source(validity=10, fallback=0.0, start=100)
    s.observe(failed(105, STAGE_DESCRIBE_CLUSTER))
    assert s.factor_at(110).value == 1.0
    assert s.factor_at(111).value == 0.0
    assert s.state.failures_by_stage == {STAGE_DESCRIBE_CLUSTER: 1}


def test_violation_throttles_and_limit_violated_counts_volumes_per_calculation():
    s = source()
    two_full = (
        LogDirDescription(1, "/a", 1000, 100),
        LogDirDescription(1, "/b", 1000, 50),
        LogDirDescription(2, "/a", 1000, 900),
    )
    s.observe(Observation(0, (1, 2), two_full))
    assert s.factor_at(0).value == 0.0
    assert s.state.limit_violated_total == 2
    s.observe(Observation(60, (1, 2), two_full))
    assert s.state.limit_violated_total == 4
    freed = (
        LogDirDescription(1, "/a", 1000, 900),
        LogDirDescription(1, "/b", 1000, 900),
        LogDirDescription(2, "/a", 1000, 900),
    )
    s.observe(Observation(120, (1, 2), freed))
    assert s.factor_at(120).value == 1.0
    assert s.state.limit_violated_total == 4


def test_since_tracks_when_the_value_changed_not_each_calculation():
    s = source()
    s.observe(Observation(0, (1,), (LogDirDescription(1, "/a", 1000, 10),)))
    s.observe(Observation(60, (1,), (LogDirDescription(1, "/a", 1000, 10),)))
    factor = s.factor_at(61)
    assert (factor.value, factor.since, factor.calculated_at) == (0.0, 0, 60)
    assert factor.expires_at == 60 + 2 * MINUTE


def test_the_proposals_inconsistent_state_example_stays_safe():
    """describeCluster says 1 and 2; broker 2 shuts down; describeLogDirs answers only for 1.

    The poll is a failed observation (not every active broker answered), so the last factor stays;
    on the next poll broker 2 is gone from the active set, and its last seen (full) volume keeps
    throttling from the cache until that state is older than the validity duration.
    """
    s = source(validity=2 * MINUTE, fallback=1.0)
    full_on_2 = (
        LogDirDescription(1, "/data/1", 1000, 500),
        LogDirDescription(2, "/data/2", 1000, 10),
    )
    s.observe(Observation(0, (1, 2), full_on_2))
    assert s.factor_at(0).value == 0.0

    only_1 = (LogDirDescription(1, "/data/1", 1000, 500),)
    s.observe(
        Observation.failed(
            60,
            STAGE_DESCRIBE_LOG_DIRS,
            "broker 2 did not answer",
            active_brokers=(1, 2),
            log_dirs=only_1,
        )
    )
    assert s.factor_at(60).value == 0.0

    s.observe(Observation(90, (1,), only_1))  # broker 2 left the active set
    assert s.factor_at(90).value == 0.0
    assert [c.volume.broker_id for c in s.state.cached] == [2]
    assert s.state.active_brokers == 1

    s.observe(Observation(121, (1,), only_1))  # 121 s after broker 2 was last seen: evicted
    assert s.factor_at(121).value == 1.0
    assert s.state.evictions_total == 1
    assert s.state.cached == ()


def test_unusable_log_dirs_never_violate_and_are_exposed():
    s = source()
    dirs = (LogDirDescription(1, "/a", -1, -1), LogDirDescription(2, "/a", 1000, 0, error_code=56))
    s.observe(Observation(0, (1, 2), dirs))
    assert s.factor_at(0).value == 1.0
    assert s.state.volumes == ()
    assert sorted(d.unusable_reason for d in s.state.unusable) == ["error", "unknown_size"]


def test_active_brokers_is_what_the_latest_poll_past_describe_cluster_considered():
    s = source()
    s.observe(healthy(0, brokers=(1, 2, 3)))
    s.observe(Observation.failed(1, STAGE_DESCRIBE_LOG_DIRS, "x", active_brokers=(1, 2)))
    assert s.state.active_brokers == 2
    s.observe(failed(2, STAGE_DESCRIBE_CLUSTER))
    assert s.state.active_brokers == 2


def test_unknown_failure_stage_is_rejected():
    with pytest.raises(ValueError, match="unknown failure stage"):
        Observation.failed(0, "somewhere", "x")
