"""The Java producer of the demo and bench (Kafka's ProducerPerformance) on the run's real Kafka
cluster: what it got acknowledged, and every throttle time a broker returned to it, which the Java
client waits out before it sends to that broker again (KIP-219)."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from devkit.java_producer import JavaPerfProducer
from kvq.kafka.client_settings import librdkafka_config
from tests.quota_backends import kafka_quotas_left_as_found

QUOTA = 10_000.0
"""alice's producer_byte_rate (per broker; her topic has one partition, on broker 0)."""
OFFERED = 40_000


pytestmark = pytest.mark.paced


def test_a_java_producer_over_its_quota_records_the_throttle_times_it_waits_out(
    shared_kafka, tmp_path
):
    admin = AdminClient(librdkafka_config(shared_kafka.admin_properties))
    topic = f"java-throttle-{uuid.uuid4().hex[:8]}"
    [created] = admin.create_topics([NewTopic(topic, 1, replica_assignment=[[0]])]).values()
    created.result(timeout=60)
    try:
        with kafka_quotas_left_as_found(shared_kafka) as quotas:
            quotas.seed({"user": "alice"}, producer_byte_rate=QUOTA)
            producer = JavaPerfProducer(
                shared_kafka, tmp_path / "java", topic, 1, OFFERED, "alice", "java-throttled"
            )
            started = time.monotonic()
            try:
                time.sleep(25)
            finally:
                producer.close()
            ended = time.monotonic()
    finally:
        [deleted] = admin.delete_topics([topic]).values()
        deleted.result(timeout=60)
    throttles = producer.log.throttles
    assert throttles, "a producer offering 4x its quota is throttled"
    assert all(started < at < ended and ms > 0 for at, ms in throttles), throttles
    # Kafka's throttle time for a request of B bytes over a quota T is about B / T (each request
    # here is at most the 64 kB buffer): seconds, not minutes
    assert max(ms for _, ms in throttles) < 10_000, throttles
    # waiting them out holds it near its quota (10 s of Kafka's window at first let more through)
    late = producer.log.rate(started + 12, ended)
    assert late < 2 * QUOTA, f"{late:.0f} B/s acknowledged against a {QUOTA} B/s quota"
    assert not (tmp_path / "java" / "throttles.log").read_text().count("Sending"), (
        "only the throttle lines of the client's TRACE log are written"
    )
