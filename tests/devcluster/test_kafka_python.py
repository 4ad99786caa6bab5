"""The devcluster through kafka-python 3.x's KafkaAdminClient: membership and log dir sizes."""

import os

import pytest
from kafka.admin import KafkaAdminClient
from kafka.errors import KafkaConnectionError
from kafka.protocol.admin import DescribeLogDirsRequest

from devkit.devcluster_wire import admin_send

pytestmark = pytest.mark.integration

CAPACITY = 50_000_000


@pytest.fixture
def dc(devcluster):
    return devcluster(brokers=3, log_dirs_per_broker=2, capacity_bytes=None)  # the host's disk


def log_dirs_of(admin, broker_id, version=4, topics=()):
    topics = [] if topics == () else topics
    return admin_send(admin, DescribeLogDirsRequest(version=version, topics=topics), broker_id)


def test_describe_cluster_lists_every_broker_with_its_reachable_port(dc, admin):
    described = admin.describe_cluster()
    assert described["cluster_id"] == dc.cluster_id
    assert described["controller_id"] in dc.broker_ports  # a random live broker, as Kafka
    assert [(b["broker_id"], b["host"], b["port"]) for b in described["brokers"]] == [
        (i, "127.0.0.1", port) for i, port in dc.broker_ports.items()
    ]


def described_brokers(admin):
    """(broker id, fenced) from describe_cluster (which asks for fenced brokers too), retried
    while kafka-python picks a node that just stopped (it learns from the refused connection, as
    it would with Kafka)."""
    for _ in range(20):
        try:
            brokers = admin.describe_cluster()["brokers"]
        except KafkaConnectionError:
            continue
        return [(b["broker_id"], b["is_fenced"]) for b in brokers]
    raise AssertionError("describe_cluster kept failing")


def test_a_stopped_broker_stays_listed_as_fenced(dc, admin):
    """Kafka keeps a stopped broker registered, fenced; kafka-python's describe_cluster asks for
    fenced brokers (DescribeCluster v2), so it lists it."""
    assert described_brokers(admin) == [(0, False), (1, False), (2, False)]
    dc.stop_broker(1)
    assert described_brokers(admin) == [(0, False), (1, True), (2, False)]
    dc.start_broker(1)
    assert described_brokers(admin) == [(0, False), (1, False), (2, False)]


def test_the_controller_named_is_always_a_live_broker(dc):
    dc.stop_broker(0)
    admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{dc.broker_ports[2]}")
    try:
        assert {admin.describe_cluster()["controller_id"] for _ in range(20)} == {1, 2}
    finally:
        admin.close()


def test_describe_log_dirs_v4_matches_statvfs(dc, admin):
    for broker_id in range(3):
        resp = log_dirs_of(admin, broker_id)
        assert resp.error_code == 0
        assert [r.log_dir for r in resp.results] == [
            str(dc.data_dir / f"broker-{broker_id}" / f"logdir-{i}") for i in range(2)
        ]
        for result in resp.results:
            st = os.statvfs(result.log_dir)
            assert result.error_code == 0
            assert result.total_bytes == st.f_blocks * st.f_frsize
            # Other processes write to this disk meanwhile: allow them 64 MiB.
            assert abs(result.usable_bytes - st.f_bavail * st.f_frsize) < 64 << 20


def test_admin_helper_with_empty_topic_partitions_gets_directory_totals(dc, admin):
    dc.set_log_dir(1, 0, capacity_bytes=CAPACITY)
    described = {d["broker"]: d["log_dirs"] for d in admin.describe_log_dirs(topic_partitions={})}
    assert sorted(described) == [0, 1, 2]
    first = described[1][0]
    assert (first["total_bytes"], first["usable_bytes"], first["topics"]) == (
        CAPACITY,
        CAPACITY,
        [],
    )


def test_virtual_capacity_counts_the_real_files_under_the_log_dir(dc, admin):
    dc.set_log_dir(0, 1, capacity_bytes=CAPACITY)
    log_dir = dc.log_dir_path(0, 1)
    (log_dir / "t-0").mkdir()
    (log_dir / "t-0" / "00000000000000000000.log").write_bytes(b"\0" * 1_000_000)
    dc.set_log_dir(0, 1, fill_bytes=2_000_000)
    result = log_dirs_of(admin, 0).results[1]
    assert (result.total_bytes, result.usable_bytes) == (CAPACITY, CAPACITY - 3_000_000)
    dc.set_log_dir(0, 1, capacity_bytes=2_500_000)  # smaller than its files: usable is 0
    assert log_dirs_of(admin, 0).results[1].usable_bytes == 0


def test_pinned_usable_bytes_and_clear(dc, admin):
    dc.set_log_dir(2, 0, capacity_bytes=CAPACITY, usable_bytes=123)
    assert log_dirs_of(admin, 2).results[0].usable_bytes == 123
    dc.set_log_dir(2, 0, clear=True)
    st = os.statvfs(dc.log_dir_path(2, 0))
    assert log_dirs_of(admin, 2).results[0].total_bytes == st.f_blocks * st.f_frsize


@pytest.mark.parametrize("version", [1, 2, 3])
def test_describe_log_dirs_before_v4_has_no_sizes(admin, version):
    resp = log_dirs_of(admin, 0, version=version)
    assert [r.error_code for r in resp.results] == [0, 0]
    assert {(r.total_bytes, r.usable_bytes) for r in resp.results} == {(-1, -1)}


def test_cluster_wide_capacity_flag_applies_to_every_log_dir(devcluster):
    dc = devcluster(brokers=2, log_dirs_per_broker=1, capacity_bytes=CAPACITY)
    admin = KafkaAdminClient(bootstrap_servers=dc.bootstrap, request_timeout_ms=5000)
    try:
        dirs = [d for b in admin.describe_log_dirs(topic_partitions={}) for d in b["log_dirs"]]
    finally:
        admin.close()
    assert [(d["total_bytes"], d["usable_bytes"]) for d in dirs] == [(CAPACITY, CAPACITY)] * 2
