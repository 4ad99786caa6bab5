"""Real producers (librdkafka through confluent-kafka, and kafka-python) writing to devcluster:
topics, offsets, the bytes on disk, replication, a full disk, restarts."""

from __future__ import annotations

import time

import confluent_kafka.admin as ck
import pytest
from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.protocol.admin import DescribeLogDirsRequest
from kafka.record.memory_records import MemoryRecords

from devcluster.cluster import DevCluster
from devcluster.partition_log import SEGMENT_NAME
from devkit.devcluster_wire import admin_send
from devkit.producer_load import LoadProducer

pytestmark = pytest.mark.integration


def create(dc, *topics: ck.NewTopic) -> None:
    admin = ck.AdminClient({"bootstrap.servers": dc.bootstrap, "log_level": 0})
    for future in admin.create_topics(list(topics), request_timeout=10).values():
        future.result(10)


def segment(dc, broker: int, topic: str, partition: int):
    for index in range(len(dc.brokers[broker].log_dirs)):
        path = dc.log_dir_path(broker, index) / f"{topic}-{partition}" / SEGMENT_NAME
        if path.exists():
            return path
    return None


def stored(path) -> list[tuple[int, bytes]]:
    """(offset, value) of every record in a segment, read with kafka-python's record reader."""
    records = MemoryRecords(path.read_bytes())
    out = []
    while records.has_next():
        batch = records.next_batch()
        out.extend((r.offset, r.value) for r in batch)
    return out


def wait_for(condition, timeout: float = 10.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def test_create_topics_lists_leaders_and_replicas(devcluster):
    dc = devcluster(brokers=3, log_dirs_per_broker=2)
    create(
        dc,
        ck.NewTopic("even", 3, 2),
        ck.NewTopic("skewed", 2, replica_assignment=[[0, 1], [0, 2]]),
    )
    md = ck.AdminClient({"bootstrap.servers": dc.bootstrap}).list_topics(timeout=10)
    parts = {
        t: {
            p.id: (p.leader, list(p.replicas), list(p.isrs))
            for p in md.topics[t].partitions.values()
        }
        for t in ("even", "skewed")
    }
    assert parts["skewed"] == {0: (0, [0, 1], [0, 1]), 1: (0, [0, 2], [0, 2])}
    assert sorted(len(r) for _, r, _ in parts["even"].values()) == [2, 2, 2]
    assert sorted(leader for leader, _, _ in parts["even"].values()) == [0, 1, 2]
    # Each replica is a partition directory with an empty segment, spread over the log dirs.
    assert segment(dc, 0, "skewed", 0).stat().st_size == 0
    assert segment(dc, 2, "skewed", 1) is not None and segment(dc, 1, "skewed", 1) is None


def test_kafka_python_admin_creates_topics_with_counts_and_assignments(devcluster):
    dc = devcluster(brokers=3, log_dirs_per_broker=1)
    admin = KafkaAdminClient(bootstrap_servers=dc.bootstrap, request_timeout_ms=5000)
    try:
        admin.create_topics(
            [
                NewTopic("counted", num_partitions=2, replication_factor=3),
                NewTopic("placed", replica_assignments={0: [2, 1]}),
            ]
        )
    finally:
        admin.close()
    topics = dc.state()["topics"]
    assert topics["placed"] == {"0": [2, 1]}
    assert [sorted(r) for r in topics["counted"].values()] == [[0, 1, 2], [0, 1, 2]]


def test_acknowledged_records_are_the_bytes_on_every_replica(devcluster):
    dc = devcluster(brokers=3, log_dirs_per_broker=1)
    create(dc, ck.NewTopic("t", 1, replica_assignment=[[1, 2]]))
    producer = LoadProducer(dc.bootstrap, acks="all", **{"batch.num.messages": 50})
    acked = []
    try:
        for i in range(500):
            value = f"value-{i}".encode()
            producer.producer.produce(
                "t", value=value, on_delivery=lambda e, m: acked.append((e, m.offset(), m.value()))
            )
        assert producer.producer.flush(10) == 0
    finally:
        producer.close()
    assert [e for e, _, _ in acked if e is not None] == []
    expected = sorted((offset, value) for _, offset, value in acked)
    assert [o for o, _ in expected] == list(range(500))  # offsets assigned, 0..499
    leader, follower = segment(dc, 1, "t", 0), segment(dc, 2, "t", 0)
    assert stored(leader) == expected
    assert leader.read_bytes() == follower.read_bytes()
    assert segment(dc, 0, "t", 0) is None
    sizes = {
        b: dc.broker_state(b)["log_dirs"][0]["usable_bytes"] for b in range(3)
    }  # virtual capacity unset: the real file system, shared; sizes checked below instead
    assert sizes
    from devcluster.log_dirs import LogDir

    assert LogDir(dc.log_dir_path(1, 0)).partitions() == [("t", 0, leader.stat().st_size)]


@pytest.mark.parametrize("acks", [0, 1, "all"])
def test_kafka_python_producer_every_acks_setting(devcluster, acks):
    dc = devcluster(brokers=2, log_dirs_per_broker=1)
    create(dc, ck.NewTopic("kp", 1, 2))
    producer = KafkaProducer(bootstrap_servers=dc.bootstrap, acks=acks, linger_ms=5)
    try:
        futures = [producer.send("kp", value=f"m{i}".encode()) for i in range(100)]
        producer.flush(10)
        offsets = [f.get(10).offset for f in futures]
    finally:
        producer.close(5)
    if acks != 0:
        assert offsets == list(range(100))
    leader = dc.state()["topics"]["kp"]["0"][0]
    path = segment(dc, leader, "kp", 0)
    assert [v for _, v in wait_for(lambda: len(stored(path)) == 100 and stored(path))] == [
        f"m{i}".encode() for i in range(100)
    ]


def test_topics_and_offsets_survive_a_restart_on_the_same_data_dir(tmp_path):
    with DevCluster(brokers=2, log_dirs_per_broker=1, data_dir=tmp_path) as dc:
        create(dc, ck.NewTopic("kept", 1, replica_assignment=[[1, 0]]))
        producer = LoadProducer(dc.bootstrap)
        try:
            for i in range(10):
                producer.send("kept", f"a{i}".encode())
            assert producer.producer.flush(10) == 0
        finally:
            producer.close()
    with DevCluster(brokers=2, log_dirs_per_broker=1, data_dir=tmp_path) as dc:
        md = ck.AdminClient({"bootstrap.servers": dc.bootstrap}).list_topics(timeout=10)
        [partition] = md.topics["kept"].partitions.values()
        assert (partition.leader, list(partition.replicas)) == (1, [1, 0])
        offsets = []
        producer = LoadProducer(dc.bootstrap)
        try:
            producer.producer.produce(
                "kept", value=b"after", on_delivery=lambda e, m: offsets.append(m.offset())
            )
            assert producer.producer.flush(10) == 0
        finally:
            producer.close()
        assert offsets == [10]
        assert [o for o, _ in stored(segment(dc, 0, "kept", 0))] == list(range(11))


def test_a_full_log_dir_fails_with_storage_error_and_goes_offline(devcluster):
    dc = devcluster(brokers=2, log_dirs_per_broker=1, capacity_bytes=200_000)
    create(dc, ck.NewTopic("fill", 1, replica_assignment=[[0, 1]]))
    producer = LoadProducer(dc.bootstrap, retries=0, **{"batch.size": 20_000})
    try:
        value = b"x" * 1000
        deadline = time.monotonic() + 20
        while not producer.log.errors and time.monotonic() < deadline:
            producer.send("fill", value)
            producer.producer.flush(1)
    finally:
        producer.close()
    assert set(producer.log.errors) == {56}  # KAFKA_STORAGE_ERROR
    acked = producer.log.acked_bytes()
    state = dc.state()
    dirs = {b["id"]: b["log_dirs"][0] for b in state["brokers"]}
    assert dirs[0]["error_code"] == 56 and "No space left" in dirs[0]["offline_reason"]
    assert dirs[0]["usable_bytes"] < 20_000  # the control state still shows the disk itself
    assert [(e["broker"], e["log_dir"]) for e in state["storage_errors"]][:1] == [(0, 0)]
    # Nothing acknowledged is lost: every acknowledged record is on disk, intact.
    kept = stored(segment(dc, 0, "fill", 0))
    assert sum(len(v) for _, v in kept) == acked
    assert [o for o, _ in kept] == list(range(len(kept)))
    # DescribeLogDirs says what Kafka says after the IOException: error 56, no sizes.
    admin = KafkaAdminClient(bootstrap_servers=dc.bootstrap, request_timeout_ms=5000)
    try:
        resp = admin_send(admin, DescribeLogDirsRequest(version=4, topics=[]), 0)
    finally:
        admin.close()
    [result] = resp.results
    assert (result.error_code, result.total_bytes, result.usable_bytes) == (56, -1, -1)
    # The control API brings it back once there is room again.
    dc.set_log_dir(0, 0, capacity_bytes=10_000_000, online=True)
    assert dc.broker_state(0)["log_dirs"][0]["error_code"] == 0


def test_a_real_full_disk_loses_nothing_written_before(devcluster, mount_tmpfs):
    dc = devcluster(brokers=1, log_dirs_per_broker=1, capacity_bytes=None)
    mount_tmpfs(dc.log_dir_path(0, 0), size="1m")
    create(dc, ck.NewTopic("tmpfs", 1, 1))
    producer = LoadProducer(dc.bootstrap, retries=0, **{"batch.size": 50_000})
    try:
        deadline = time.monotonic() + 20
        while not producer.log.errors and time.monotonic() < deadline:
            producer.send("tmpfs", b"y" * 2000)
            producer.producer.flush(1)
    finally:
        producer.close()
    assert set(producer.log.errors) == {56}
    kept = stored(segment(dc, 0, "tmpfs", 0))
    assert sum(len(v) for _, v in kept) == producer.log.acked_bytes() > 500_000
    assert dc.broker_state(0)["log_dirs"][0]["error_code"] == 56


def test_a_leader_that_leaves_hands_over_and_comes_back_as_a_follower_that_catches_up(devcluster):
    dc = devcluster(brokers=2, log_dirs_per_broker=1)
    create(dc, ck.NewTopic("moving", 1, replica_assignment=[[0, 1]]))
    producer = LoadProducer(dc.bootstrap)
    try:
        for i in range(20):
            producer.send("moving", f"a{i}".encode())
        assert producer.producer.flush(10) == 0
        dc.stop_broker(0)
        for i in range(20):
            producer.send("moving", f"b{i}".encode())
        assert producer.producer.flush(20) == 0
        dc.start_broker(0)
        md = ck.AdminClient({"bootstrap.servers": dc.bootstrap}).list_topics(timeout=10)
        [partition] = md.topics["moving"].partitions.values()
        assert (partition.leader, sorted(partition.isrs)) == (1, [0, 1])
    finally:
        producer.close()
    assert not producer.log.errors
    # What broker 0 missed was copied when it came back: both replicas hold the same bytes.
    assert segment(dc, 0, "moving", 0).read_bytes() == segment(dc, 1, "moving", 0).read_bytes()
    assert [o for o, _ in stored(segment(dc, 0, "moving", 0))] == list(range(40))
