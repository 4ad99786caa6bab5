"""Every fault, as a Kafka client sees it (kafka-python, raw protocol where clients hide it)."""

import pytest
from kafka.admin import KafkaAdminClient
from kafka.errors import KafkaConnectionError, KafkaTimeoutError, RequestTimedOutError
from kafka.protocol.admin import DescribeClusterRequest, DescribeLogDirsRequest
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest

from devkit.devcluster_wire import admin_send, exchange

pytestmark = pytest.mark.integration


@pytest.fixture
def dc(devcluster):
    return devcluster(brokers=3, log_dirs_per_broker=2)


def address(dc, broker_id):
    return "127.0.0.1", dc.broker_ports[broker_id]


def log_dirs_of(admin, broker_id, version=4):
    return admin_send(admin, DescribeLogDirsRequest(version=version, topics=[]), broker_id)


def test_log_dir_error_is_a_storage_error_for_that_dir_only(dc, admin):
    dc.set_faults(1, log_dir_error={"index": 1, "code": 56})
    results = log_dirs_of(admin, 1).results
    assert [r.error_code for r in results] == [0, 56]  # KAFKA_STORAGE_ERROR
    assert (results[1].total_bytes, results[1].usable_bytes) == (-1, -1)
    assert results[1].log_dir == str(dc.log_dir_path(1, 1))
    assert results[0].total_bytes > 0
    dc.clear_faults(1)
    assert [r.error_code for r in log_dirs_of(admin, 1).results] == [0, 0]


def test_a_log_dir_that_vanished_is_offline(dc, admin):
    dc.log_dir_path(0, 0).rmdir()
    assert [r.error_code for r in log_dirs_of(admin, 0).results] == [56, 0]


def test_pre_kip_827_broker_advertises_v3_and_reports_no_sizes(dc, admin):
    assert log_dirs_of(admin, 0).results[0].total_bytes > 0
    dc.set_faults(0, max_describe_log_dirs_version=3)
    [versions] = exchange(address(dc, 0), [ApiVersionsRequest(version=0)])
    assert {k.api_key: k.max_version for k in versions.api_keys}[35] == 3
    # A client that negotiates per broker sends v3 and gets no KIP-827 fields (-1 once decoded);
    # kafka-python reuses the bootstrap broker's versions and sends v4: it gets -1 sizes too.
    for version in (3, 4):
        results = exchange(address(dc, 0), [DescribeLogDirsRequest(version=version, topics=[])])[
            0
        ].results
        assert {(r.error_code, r.total_bytes, r.usable_bytes) for r in results} == {(0, -1, -1)}
    described = {d["broker"]: d["log_dirs"] for d in admin.describe_log_dirs(topic_partitions={})}
    assert {(d["total_bytes"], d["usable_bytes"]) for d in described[0]} == {(-1, -1)}
    assert all(d["total_bytes"] > 0 for d in described[1] + described[2])


def test_fail_describe_log_dirs_is_a_top_level_error(admin, dc):
    dc.set_faults(2, fail_describe_log_dirs=True)
    resp = log_dirs_of(admin, 2)
    assert (resp.error_code, resp.results) == (-1, [])  # UNKNOWN_SERVER_ERROR
    dc.set_faults(2, fail_describe_log_dirs=31)  # CLUSTER_AUTHORIZATION_FAILED
    assert log_dirs_of(admin, 2).error_code == 31
    # v1-v2 have no top-level error code: Kafka answers them with no log dirs at all.
    assert log_dirs_of(admin, 2, version=2).results == []
    assert log_dirs_of(admin, 0).error_code == 0


def test_a_slow_broker_times_the_client_out_and_delays_no_other(dc):
    client = KafkaAdminClient(bootstrap_servers=dc.bootstrap, request_timeout_ms=1000)
    try:
        assert log_dirs_of(client, 1).error_code == 0  # connected before the broker slows down
        dc.set_faults(1, latency_ms=60_000)
        with pytest.raises((KafkaTimeoutError, RequestTimedOutError)):
            log_dirs_of(client, 1)
        assert log_dirs_of(client, 0).error_code == 0  # the other brokers answer as usual
        assert log_dirs_of(client, 2).error_code == 0
    finally:
        client.close()


def test_latency_keeps_pipelined_answers_in_order(dc):
    dc.set_faults(0, latency_ms=30)
    requests = [ApiVersionsRequest(version=0), DescribeClusterRequest(version=0)] * 3
    assert [type(r).__name__ for r in exchange(address(dc, 0), requests)] == [
        "ApiVersionsResponse",
        "DescribeClusterResponse",
    ] * 3


def test_broker_leaving_between_describe_cluster_and_describe_log_dirs(dc, admin):
    """The proposal's "inconsistent state" example: broker 2 is listed, then gone."""
    dc.set_faults(2, leave_before_describe_log_dirs=True)
    assert [b["broker_id"] for b in admin.describe_cluster()["brokers"]] == [0, 1, 2]
    assert dc.state()["brokers"][2]["up"] is True
    with pytest.raises((KafkaConnectionError, KafkaTimeoutError)):
        log_dirs_of(admin, 2)  # the connection closes without an answer
    assert dc.state()["brokers"][2]["up"] is False
    assert dc.state()["faults"] == {}  # one shot
    [md] = exchange(address(dc, 0), [MetadataRequest(version=12, topics=None)])
    assert [b.node_id for b in md.brokers] == [0, 1]
    with pytest.raises(ConnectionRefusedError):
        exchange(address(dc, 2), [ApiVersionsRequest(version=0)])
    dc.start_broker(2)
    assert log_dirs_of(admin, 2).error_code == 0  # back, and the fault does not fire again


def test_dropped_describe_log_dirs_close_the_connection_and_the_broker_stays(dc, admin):
    dc.set_faults(1, drop_describe_log_dirs=1)
    with pytest.raises((KafkaConnectionError, KafkaTimeoutError)):
        log_dirs_of(admin, 1)  # the connection closes without an answer
    assert dc.state()["brokers"][1]["up"] is True
    assert dc.state()["faults"] == {}  # spent
    assert log_dirs_of(admin, 1).error_code == 0  # a new connection is answered


def test_clear_restores_a_well_behaved_broker(dc, admin):
    dc.set_faults(
        1,
        latency_ms=10,
        log_dir_error={"index": 0},
        max_describe_log_dirs_version=3,
        fail_describe_log_dirs=True,
        leave_before_describe_log_dirs=True,
    )
    assert dc.clear_faults(1) == {}
    results = log_dirs_of(admin, 1).results
    assert [(r.error_code, r.total_bytes > 0) for r in results] == [(0, True), (0, True)]
