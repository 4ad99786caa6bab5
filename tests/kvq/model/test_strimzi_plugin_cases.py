"""The Strimzi kafka-quotas-plugin's own test cases for the volume, limit and factor logic, ported.

From AvailableBytesThrottleFactorPolicyTest, AvailableRatioThrottleFactorPolicyTest,
PolicyBasedThrottleTest, FixedDurationExpiryPolicyTest and CachingVolumeObserverTest
(strimzi/kafka-quotas-plugin): the same inputs must give the same factor, volumes and counters.
"""

from __future__ import annotations

import pytest

from kvq.model.limits import MinAvailableBytes, MinAvailableRatio
from kvq.model.observation import STAGE_DESCRIBE_LOG_DIRS, Observation
from kvq.model.policy_run import PolicyRun
from kvq.model.stop_on_violation import StopOnViolation
from kvq.model.throttle_factor_source import ThrottleFactorSource
from kvq.model.volume import LogDirDescription, Volume
from kvq.model.volume_cache import VolumeCache

BYTES_LIMIT = 100
MINUTE = 60.0


def with_available_bytes(available: int) -> Volume:
    return Volume(0, "/var/lib/data", 1000, available)


def with_available_ratio(ratio: float) -> Volume:
    available = 100
    return Volume(0, "/var/lib/data", int(available / ratio), available)


@pytest.mark.parametrize(
    ("volumes", "factor"),
    [
        ([with_available_bytes(1000)], 1.0),  # shouldNotThrottleIfHasAvailableBytesAboveLimit
        ([with_available_bytes(BYTES_LIMIT)], 0.0),  # ...AtLimit
        ([with_available_bytes(BYTES_LIMIT - 1)], 0.0),  # ...BelowLimit
        ([with_available_bytes(BYTES_LIMIT + 10), with_available_bytes(BYTES_LIMIT - 1)], 0.0),
    ],
)
def test_available_bytes_policy(volumes, factor):
    policy = StopOnViolation(MinAvailableBytes(BYTES_LIMIT))
    assert PolicyRun(policy).calculate(volumes).factor == factor


def test_available_bytes_policy_counts_no_violation_above_the_limit():
    calculation = PolicyRun(StopOnViolation(MinAvailableBytes(BYTES_LIMIT))).calculate(
        [with_available_bytes(BYTES_LIMIT + 1)]
    )
    assert calculation.violating == ()


@pytest.mark.parametrize(
    ("volumes", "factor"),
    [
        ([with_available_ratio(0.11)], 1.0),  # shouldNotThrottleIfHasAvailableBytesAboveLimit
        ([with_available_ratio(0.1)], 0.0),  # ...AtLimit
        ([with_available_ratio(0.09)], 0.0),  # ...BelowLimit
        ([with_available_ratio(0.5), with_available_ratio(0.1)], 0.0),  # ...AnyVolume...
        # shouldThrottleIfAnyVolumeHasZeroCapacity
        ([with_available_ratio(0.5), Volume(0, "/var/lib/data", 0, 100)], 0.0),
    ],
)
def test_available_ratio_policy(volumes, factor):
    assert PolicyRun(StopOnViolation(MinAvailableRatio(0.1))).calculate(volumes).factor == factor


@pytest.mark.parametrize("limit", [MinAvailableBytes(BYTES_LIMIT), MinAvailableRatio(0.1)])
def test_a_log_dir_reporting_total_zero_usable_zero_throttles_under_either_limit(limit):
    """The plugin keeps any log dir with sizes present; capacity 0 gives ratio 0."""
    s = ThrottleFactorSource(StopOnViolation(limit), 5 * MINUTE, 1.0, 0.0)
    s.observe(Observation(1.0, (0,), (LogDirDescription(0, "/var/lib/data", 0, 0),)))
    assert s.factor_at(1.0).value == 0.0
    assert s.state.limit_violated_total == 1
    assert s.state.unusable == ()


def throttle(validity: float = 5 * MINUTE, fallback: float = 0.0, checking: bool = True):
    """PolicyBasedThrottle with a policy that always gives 1.0 (an arbitrary healthy volume)."""
    policy = StopOnViolation(MinAvailableBytes(1))
    return ThrottleFactorSource(policy, validity, fallback, 0.0, checking=checking)


def success(time: float) -> Observation:
    return Observation(time, (1,), (LogDirDescription(1, "/tmp", 1000, 1000),))


def failure(time: float) -> Observation:
    return Observation.failed(time, STAGE_DESCRIBE_LOG_DIRS, "interrupted")


def test_initial_factor_is_one():
    assert throttle().factor_at(0.0).value == 1.0


@pytest.mark.parametrize(
    ("elapsed", "expired"),
    [(0.0, False), (5 * MINUTE - 1e-6, False), (5 * MINUTE, False), (5 * MINUTE + 1e-6, True)],
)
def test_fixed_duration_expiry_boundaries(elapsed, expired):
    """FixedDurationExpiryPolicyTest: not expired at the boundary, expired just after it."""
    s = throttle(validity=5 * MINUTE)
    s.observe(success(0.0))
    assert s.factor_at(elapsed).fallback is expired


def test_fallback_when_factor_expired_on_a_staleness_check_and_on_a_failed_result():
    checked = throttle(validity=30.0)
    assert checked.factor_at(MINUTE).value == 0.0  # testFallbackWhenFactorExpired
    observed = throttle(validity=30.0)
    observed.observe(failure(MINUTE))  # ...ExpiredAndFailedVolumeUsageResult
    assert observed.factor_at(MINUTE).value == 0.0
    assert observed.state.fallback_applied_total == 1  # shouldIncrement...WhenPreviousFactorExpires


def test_current_factor_continues_on_a_failed_result_and_counts_no_fallback():
    s = throttle(validity=MINUTE)
    s.observe(failure(MINUTE))  # shouldNotCountFallbackFactorAppliedWhenFactorIsValid
    assert s.factor_at(MINUTE).value == 1.0
    assert s.state.fallback_applied_total == 0


def test_valid_from_moves_to_the_successful_observation():
    s = throttle(validity=30.0)
    s.observe(success(MINUTE))
    factor = s.factor_at(MINUTE)
    assert factor.calculated_at == MINUTE and factor.expires_at == MINUTE + 30.0


def test_fallback_is_counted_on_each_expiry():
    s = throttle(validity=30.0)
    s.observe(failure(1 * MINUTE))  # expiry one
    s.observe(success(2 * MINUTE))  # back to normal
    s.observe(failure(3 * MINUTE))  # expiry two
    assert s.state.fallback_applied_total == 2


def test_check_interval_zero_disables_the_check_no_fallback_ever():
    """StaticQuotaCallback: interval 0 uses UnlimitedThrottleFactorSource (factor 1.0 for good)."""
    s = throttle(validity=30.0, fallback=0.0, checking=False)
    s.observe(failure(MINUTE))
    for now in (0.0, MINUTE, 24 * 60 * MINUTE):
        factor = s.factor_at(now)
        assert (factor.value, factor.fallback) == (1.0, False)
    assert s.state.fallback_applied_total == 0


DATA = "/var/lib/data"


def described(broker: int, available: int, log_dir: str = DATA) -> LogDirDescription:
    return LogDirDescription(broker, log_dir, 1000, available)


def test_cache_passes_the_first_observation_through_unaltered():
    merge = VolumeCache(MINUTE).merge(0.0, [])
    assert (merge.volumes, merge.evicted) == ((), ())


def test_cache_merges_the_cached_observation_of_a_missing_broker():
    cache = VolumeCache(MINUTE)
    cache.merge(0.0, [described(0, 1000), described(1, 1000)])
    merge = cache.merge(1.0, [described(1, 500)])
    assert set(merge.volumes) == {Volume(0, DATA, 1000, 1000), Volume(1, DATA, 1000, 500)}


def test_cache_forwards_a_fresh_observation():
    cache = VolumeCache(MINUTE)
    cache.merge(0.0, [described(0, 1000), described(1, 1000)])
    merge = cache.merge(1.0, [described(0, 500), described(1, 500)])
    assert set(merge.volumes) == {Volume(0, DATA, 1000, 500), Volume(1, DATA, 1000, 500)}


@pytest.mark.parametrize(
    ("elapsed", "kept"),
    [(MINUTE - 1e-6, True), (MINUTE, False), (MINUTE + 1e-6, False)],
    ids=["just before expiry", "exactly at the boundary", "after the boundary"],
)
def test_cache_entry_expiry_boundary(elapsed, kept):
    """shouldUseOldCacheEntryJustBeforeExpiry / shouldExpireOldCacheEntriesOnUpdate...Boundary."""
    cache = VolumeCache(MINUTE)
    cache.merge(0.0, [described(0, 1000), described(1, 1000)])
    merge = cache.merge(elapsed, [described(1, 500)])
    expected = {Volume(1, DATA, 1000, 500)} | ({Volume(0, DATA, 1000, 1000)} if kept else set())
    assert set(merge.volumes) == expected
    assert len(merge.evicted) == (0 if kept else 1)  # shouldRecordCountOfEvictions...


def test_cache_counts_its_entries_and_fewer_after_an_eviction():
    """shouldCountNumberOfEntriesInCache / shouldReduceCountOfEntriesInCacheOnEviction."""
    cache = VolumeCache(MINUTE)
    cache.merge(0.0, [described(0, 1000), described(0, 1000, "/var/lib/data2"), described(1, 1000)])
    assert len(cache) == 3
    cache.merge(MINUTE + 1e-6, [described(1, 500)])
    assert len(cache) == 1
