"""The families the exporter publishes, built from the policy state."""

from kvq.contract.cluster_identity import ClusterIdentity
from kvq.contract.metric_samples import families
from kvq.model.limits import MinAvailableBytes, MinAvailableRatio
from kvq.model.observation import STAGE_DESCRIBE_LOG_DIRS, Observation
from kvq.model.stop_on_violation import StopOnViolation
from kvq.model.throttle_factor_source import ThrottleFactorSource
from kvq.model.volume import LogDirDescription
from kvq.settings.config import CLUSTER_LABEL_DEFAULT

LIMIT = MinAvailableRatio(0.1)
PROD = ClusterIdentity("prod", CLUSTER_LABEL_DEFAULT)


def publish(source, now, limit=LIMIT):
    return {
        f.name: {tuple(sorted(labels.items())): value for labels, value in f.samples}
        for f in families(source, now, PROD, limit, 60.0)
    }


def one(series, name):
    (value,) = series[name].values()
    return value


def make_source():
    return ThrottleFactorSource(StopOnViolation(LIMIT), 120, 0.0, 0)


def test_the_five_strimzi_metrics_and_per_volume_detail():
    s = make_source()
    s.observe(
        Observation(
            10, (0, 1), (LogDirDescription(0, "/a", 100, 5), LogDirDescription(1, "/a", 100, 50))
        )
    )
    series = publish(s, 11)
    assert one(series, "kafka_volume_quota_throttle_factor") == 0.0
    assert one(series, "kafka_volume_quota_limit_violated") == 1
    assert one(series, "kafka_volume_quota_fallback_throttle_factor_applied") == 0
    assert one(series, "kafka_volume_quota_active_brokers") == 2
    assert one(series, "kafka_volume_quota_active_log_dirs") == 2
    key = (("broker_id", "0"), ("cluster", "prod"), ("log_dir", "/a"))
    assert series["kafka_volume_quota_log_dir_available_ratio"][key] == 0.05
    assert series["kafka_volume_quota_log_dir_violating"][key] == 1
    assert one(series, "kafka_volume_quota_limit_ratio") == 0.1
    assert "kafka_volume_quota_limit_bytes" not in series
    assert one(series, "kafka_volume_quota_last_successful_poll_timestamp_seconds") == 10


def test_every_sample_carries_the_cluster_label():
    s = make_source()
    s.observe(Observation(1, (0,), (LogDirDescription(0, "/a", 100, 50),)))
    for family in families(s, 2, PROD, MinAvailableBytes(5), 60.0):
        assert family.samples, family.name
        assert all(labels["cluster"] == "prod" for labels, _ in family.samples)


def test_fallback_shows_in_factor_gauge_and_counter():
    s = make_source()
    s.observe(Observation(0, (0,), (LogDirDescription(0, "/a", 100, 50),)))
    s.observe(Observation.failed(200, STAGE_DESCRIBE_LOG_DIRS, "timeout"))
    series = publish(s, 200)
    assert one(series, "kafka_volume_quota_throttle_factor") == 0.0
    assert one(series, "kafka_volume_quota_fallback_active") == 1
    assert one(series, "kafka_volume_quota_fallback_throttle_factor_applied") == 1
    failures = series["kafka_volume_quota_poll_failures"]
    assert failures[(("cluster", "prod"), ("stage", "describe_log_dirs"))] == 1
    assert failures[(("cluster", "prod"), ("stage", "describe_cluster"))] == 0


def test_volumes_of_a_broker_gone_and_evicted_disappear():
    s = make_source()
    s.observe(
        Observation(
            0, (0, 1), (LogDirDescription(0, "/a", 100, 50), LogDirDescription(1, "/a", 100, 50))
        )
    )
    s.observe(Observation(60, (0,), (LogDirDescription(0, "/a", 100, 50),)))
    assert len(publish(s, 60)["kafka_volume_quota_log_dir_total_bytes"]) == 2
    assert one(publish(s, 60), "kafka_volume_quota_cached_log_dirs") == 1
    s.observe(Observation(121, (0,), (LogDirDescription(0, "/a", 100, 50),)))
    series = publish(s, 121)
    assert len(series["kafka_volume_quota_log_dir_total_bytes"]) == 1
    assert one(series, "kafka_volume_quota_log_dir_evictions") == 1


def test_unusable_log_dirs_are_counted_by_reason():
    s = make_source()
    s.observe(
        Observation(
            0, (0, 1), (LogDirDescription(0, "/a", -1, -1), LogDirDescription(1, "/a", 9, 9, 56))
        )
    )
    unusable = publish(s, 0)["kafka_volume_quota_unusable_log_dirs"]
    assert unusable == {
        (("cluster", "prod"), ("reason", "error")): 1,
        (("cluster", "prod"), ("reason", "unknown_size")): 1,
    }
