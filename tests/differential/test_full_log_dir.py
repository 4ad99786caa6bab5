"""A log dir that fills up, on devcluster and on real Kafka alike: the write fails with ENOSPC,
the producer gets KAFKA_STORAGE_ERROR, the log dir goes offline (error 56 and no sizes in
DescribeLogDirs) while the broker stays up and serves from its other log dir (Kafka's
LogDirFailureChannel; only a failed metadata log dir, or no live log dir left, halts a broker).

Kafka's cluster here is one node of its own (the test fills a disk, which the shared cluster must
not see), started once for the module; each backend's two log dirs are tmpfs of LOG_DIR_BYTES."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from kafka.protocol.admin import DescribeLogDirsRequest

from devkit.devcluster_wire import admin_send
from devkit.kafka_cluster import DEFAULT_USERS, KafkaCluster
from devkit.producer_load import LoadProducer
from tests.differential.backends import Backend, create_topic, eventually, unique

pytestmark = pytest.mark.integration

LOG_DIR_BYTES = 2 << 20
KAFKA_STORAGE_ERROR = 56


@pytest.fixture(scope="module")
def kafka_tiny_disks(tmp_path_factory, kafka_dist) -> Iterator[KafkaCluster]:
    with KafkaCluster(
        tmp_path_factory.mktemp("kafka-full"),
        nodes=1,
        log_dir_bytes=LOG_DIR_BYTES,
        dist=kafka_dist,
        broker_properties={"log.flush.interval.messages": "1"},
    ) as kafka:
        yield kafka


@pytest.fixture(params=["devcluster", "kafka"])
def backend(request, devcluster, mount_tmpfs) -> Backend:
    if request.param == "kafka":
        kafka = request.getfixturevalue("kafka_tiny_disks")
        return Backend("kafka", kafka.bootstrap, kafka.sasl_bootstrap, kafka.node_ids)
    dc = devcluster(
        brokers=1, log_dirs_per_broker=2, capacity_bytes=None, sasl_users=dict(DEFAULT_USERS)
    )
    for index in range(2):
        mount_tmpfs(dc.log_dir_path(0, index), size=str(LOG_DIR_BYTES))
    return Backend("devcluster", dc.bootstrap, dc.sasl_bootstrap, [0])


def log_dirs(admin, node_id: int) -> dict[str, tuple[int, int, int, list[str]]]:
    """{log dir: (error code, total bytes, usable bytes, topics)} of one broker."""
    response = admin_send(admin, DescribeLogDirsRequest(version=4, topics=None), node_id)
    return {
        r.log_dir: (r.error_code, r.total_bytes, r.usable_bytes, sorted(t.name for t in r.topics))
        for r in response.results
    }


def dirs_holding(admin, node_id: int, topic: str) -> list[str]:
    return [d for d, (_, _, _, topics) in log_dirs(admin, node_id).items() if topic in topics]


def fill(backend: Backend, topic: str) -> LoadProducer:
    """Produce 2 kB values until the first error (20 s at most); returns the closed producer."""
    producer = LoadProducer(backend.bootstrap, retries=0, **{"batch.size": 50_000})
    try:
        deadline = time.monotonic() + 20
        while not producer.log.errors and time.monotonic() < deadline:
            producer.send(topic, b"y" * 2000)
            producer.producer.flush(1)
    finally:
        producer.close()
    return producer


def test_a_full_log_dir_goes_offline_and_the_broker_serves_from_the_other(
    backend, admin_client, leader, topic
):
    # Kafka places the new partition a moment after CreateTopics answers: wait until a dir lists it.
    [full_dir] = eventually(
        lambda: dirs_holding(admin_client, leader, topic), lambda d: len(d) == 1
    )
    producer = fill(backend, topic)
    assert set(producer.log.errors) == {KAFKA_STORAGE_ERROR}
    assert producer.log.acked_bytes() > LOG_DIR_BYTES // 2
    # Kafka's LogDirFailureHandler takes the dir offline a moment after the failed write.
    offline = (KAFKA_STORAGE_ERROR, -1, -1, [])
    after = eventually(
        lambda: log_dirs(admin_client, leader), lambda dirs: dirs[full_dir] == offline
    )
    assert after[full_dir] == offline
    [(other_dir, (code, total, usable, _))] = [(d, v) for d, v in after.items() if d != full_dir]
    assert code == 0 and total == LOG_DIR_BYTES and usable > 0
    # The broker is up: a new topic goes to its live log dir and takes writes.
    fresh = unique("after-full")
    create_topic(backend, fresh, [[leader]])
    survivor = LoadProducer(backend.bootstrap)
    try:
        survivor.send(fresh, b"z" * 100)
        assert survivor.producer.flush(15) == 0
    finally:
        survivor.close()
    assert survivor.log.acked_bytes() == 100 and not survivor.log.errors
    assert fresh in log_dirs(admin_client, leader)[other_dir][3]
