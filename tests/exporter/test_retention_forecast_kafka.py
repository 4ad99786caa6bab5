"""The retention forecast on real Kafka (`exporter.retention_forecast_source`): what it says
retention frees by a time ahead, Kafka has freed by then, and it foresees what Kafka will
delete a retention time after it was written."""

from __future__ import annotations

import time

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from devcluster.cluster import DevCluster
from devkit.kafka_cluster import KafkaCluster
from devkit.processes import wait_until
from devkit.producer_load import LoadProducer
from exporter.cluster_client import KafkaClusterClient
from exporter.retention_forecast_source import RetentionForecastSource
from kvq.kafka.client_settings import librdkafka_config

pytestmark = [pytest.mark.integration, pytest.mark.paced]
"""Paced: it waits for Kafka's retention checks to free what was foreseen, with little CPU."""

RETENTION_MS = 10_000
SEGMENT_MS = 1_000
CHECK_MS = 1_000
AHEADS = (6, 10)
"""What was written more than a retention time, a check and a segment before 6 s and 10 s from
now: the first 2 s and 6 s of the 8 s written."""
LATE_S = 1.0
"""How late a loaded machine may run the broker's retention check (its scheduler thread's
turn): what was foreseen by a time is looked for this much later."""
WRITTEN_S = 8.0
RATE = 100_000.0


def log_dir_size(client: KafkaClusterClient, topic: str) -> int:
    [log_dir] = client.describe_log_dirs([0], partition_sizes=True)[0]
    return sum(s for (t, _, _), s in (log_dir.replica_sizes or {}).items() if t == topic)


def test_what_retention_is_foreseen_to_free_by_a_time_ahead_kafka_has_freed_by_then(
    tmp_path, kafka_dist
):
    # A broker checks retention first 30 s after its start (log.initial.task.delay.ms): at once
    # here, as on a broker that has been up for a while.
    check = {"log.retention.check.interval.ms": str(CHECK_MS), "log.initial.task.delay.ms": "0"}
    with KafkaCluster(
        tmp_path, log_dirs_per_node=1, broker_properties=check, dist=kafka_dist
    ) as kafka:
        admin = AdminClient(librdkafka_config(kafka.admin_properties))
        config = {
            "retention.ms": str(RETENTION_MS),
            "segment.ms": str(SEGMENT_MS),
            "file.delete.delay.ms": "0",
        }
        topics = [
            NewTopic("kept", 2, 1, config=config),
            NewTopic("compacted", 1, 1, config={**config, "cleanup.policy": "compact"}),
        ]
        for future in admin.create_topics(topics).values():
            future.result(timeout=60)
        client = KafkaClusterClient(kafka.admin_properties, 10.0)
        producer = LoadProducer(kafka.sasl_bootstrap, user="alice", password="alice-secret")
        try:
            producer.run_steady(["kept"], RATE)
            for key in range(400):  # a compacted topic's records need keys
                while not producer.send("compacted", b"c" * 1000, key=b"%d" % key):
                    pass
            time.sleep(WRITTEN_S)
            producer.stop(30)
            assert producer.producer.flush(30) == 0 and not producer.log.errors
        finally:
            producer.close()
        source = RetentionForecastSource(client, time.time, AHEADS)
        try:
            [log_dir] = client.describe_log_dirs([0], partition_sizes=True)[0]
            at = time.time()
            (foreseen,) = source.forecast([log_dir]).values()
            kept = log_dir_size(client, "kept")
            for ahead, freed_by_then in zip(AHEADS, foreseen, strict=True):
                then = at + ahead + LATE_S
                wait_until(lambda t=then: time.time() >= t, ahead + 2, what=f"{ahead} s on")
                freed = kept - log_dir_size(client, "kept")
                assert freed_by_then <= freed, (foreseen, ahead, freed, kept)
            # A quarter and three quarters of the 8 s of writes; the compacted topic, nothing.
            assert 0.1 * kept <= foreseen[0] <= 0.4 * kept, (foreseen, kept)
            assert 0.6 * kept <= foreseen[1] <= 0.9 * kept, (foreseen, kept)
        finally:
            client.close()


def test_what_a_cluster_cannot_answer_is_not_foreseen(tmp_path):
    """devcluster describes no topic configs (INVALID_REQUEST) and lists no offsets: the
    forecast foresees nothing there and the poll goes on."""
    with DevCluster(
        brokers=1, log_dirs_per_broker=1, data_dir=tmp_path / "data", capacity_bytes=10_000_000
    ) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        for future in admin.create_topics([NewTopic("kept", 1, 1)]).values():
            future.result(timeout=30)
        producer = LoadProducer(cluster.bootstrap)
        try:
            for _ in range(100):
                while not producer.send("kept", b"k" * 1000):
                    pass
            assert producer.producer.flush(30) == 0 and not producer.log.errors
        finally:
            producer.close()
        client = KafkaClusterClient({"bootstrap.servers": cluster.bootstrap}, 5.0)
        try:
            [log_dir] = client.describe_log_dirs([0], partition_sizes=True)[0]
            assert log_dir.replica_sizes
            source = RetentionForecastSource(client, time.time, AHEADS)
            assert source.forecast([log_dir]) == {log_dir.key: (0, 0)}
            offsets = client.list_offsets({0: {("kept", 0): -2}})
            assert offsets == {}  # ListOffsets unsupported: nothing
        finally:
            client.close()
