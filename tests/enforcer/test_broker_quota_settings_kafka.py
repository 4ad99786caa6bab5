"""What the brokers say of their quotas (enforcer.broker_quota_settings), asked of real Kafka and
of devcluster alike: the quota window and how far back each broker averages its quota entities'
throttle times (metrics.num.samples x metrics.sample.window.ms), Kafka's defaults and set ones."""

from __future__ import annotations

import pytest

from devkit.kafka_cluster import KafkaCluster
from enforcer.quota_client import KafkaQuotaClient

pytestmark = [pytest.mark.e2e]


def said(admin_properties) -> tuple:
    client = KafkaQuotaClient(admin_properties)
    try:
        settings = client.quota_settings()
    finally:
        client.close()
    return settings.longest_window, settings.longest_sample, settings.longest_average


def test_kafkas_defaults_are_an_11_s_quota_window_and_a_minute_of_throttle_times(shared_kafka):
    assert said(shared_kafka.admin_properties) == (11.0, 1.0, 60.0)


def test_devcluster_says_kafkas_defaults_too(devcluster):
    cluster = devcluster(brokers=1, log_dirs_per_broker=1)
    assert said({"bootstrap.servers": cluster.bootstrap}) == (11.0, 1.0, 60.0)


def test_a_broker_set_to_sample_its_metrics_every_10_s_averages_over_20_s(tmp_path, kafka_dist):
    with KafkaCluster(
        tmp_path / "kafka",
        nodes=1,
        log_dirs_per_node=1,
        log_dir_bytes=16 << 20,
        dist=kafka_dist,
        broker_properties={"quota.window.num": "3", "metrics.sample.window.ms": "10000"},
    ) as kafka:
        assert said(kafka.admin_properties) == (3.0, 1.0, 20.0)
