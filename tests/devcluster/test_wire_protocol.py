"""The Kafka wire protocol as a broker must speak it: versions, headers, pipelining, refusals."""

import pytest
from kafka.protocol.admin import DescribeClusterRequest, DescribeLogDirsRequest
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest

from devkit.devcluster_wire import api_versions_of_unknown_version, exchange

pytestmark = pytest.mark.integration


@pytest.fixture
def dc(devcluster):
    return devcluster(brokers=3, log_dirs_per_broker=1)


def address(dc, broker_id=0):
    return "127.0.0.1", dc.broker_ports[broker_id]


def test_api_versions_advertises_what_the_devcluster_implements(dc):
    for version in range(5):
        [resp] = exchange(address(dc), [ApiVersionsRequest(version=version)])
        assert resp.error_code == 0
        assert {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys} == {
            0: (3, 12),  # Produce
            1: (4, 12),  # Fetch: listed (librdkafka then writes magic 2), not served
            3: (0, 13),  # Metadata
            17: (0, 1),  # SaslHandshake
            18: (0, 4),  # ApiVersions
            32: (1, 4),  # DescribeConfigs
            19: (2, 7),  # CreateTopics
            22: (0, 5),  # InitProducerId
            35: (1, 4),  # DescribeLogDirs
            48: (0, 1),  # DescribeClientQuotas
            49: (0, 1),  # AlterClientQuotas
            36: (0, 2),  # SaslAuthenticate
            60: (0, 2),  # DescribeCluster
        }


def test_unknown_api_versions_version_gets_error_35_in_a_v0_body_with_a_v0_header(dc):
    resp = api_versions_of_unknown_version(address(dc), version=9, correlation_id=77)
    assert resp.header.correlation_id == 77
    assert resp.error_code == 35  # UNSUPPORTED_VERSION
    assert (18, 0, 4) in [(k.api_key, k.min_version, k.max_version) for k in resp.api_keys]


def test_metadata_every_version_lists_reachable_brokers(dc):
    requests = [MetadataRequest(version=v, topics=[] if v == 0 else None) for v in range(14)]
    for version, resp in enumerate(exchange(address(dc), requests)):
        assert [(b.node_id, b.host, b.port) for b in resp.brokers] == [
            (i, "127.0.0.1", port) for i, port in dc.broker_ports.items()
        ], f"Metadata v{version}"
        assert resp.topics == []
        if version >= 1:
            assert resp.controller_id == 0
        if version >= 2:
            assert resp.cluster_id == dc.cluster_id


def test_metadata_for_a_topic_that_does_not_exist(dc):
    topic = MetadataRequest.MetadataRequestTopic(name="nope")
    [resp] = exchange(address(dc), [MetadataRequest(version=12, topics=[topic])])
    assert [(t.name, t.error_code) for t in resp.topics] == [("nope", 3)]  # no auto-creation


def test_partition_directories_are_topics_in_metadata_and_log_dirs(dc):
    for broker_id in (0, 2):
        segment = dc.log_dir_path(broker_id, 0) / "orders-3" / "00000000000000000000.log"
        segment.parent.mkdir()
        segment.write_bytes(b"x" * 1234)
    [md] = exchange(address(dc, 1), [MetadataRequest(version=12, topics=None)])
    [topic] = md.topics
    assert (topic.name, topic.error_code) == ("orders", 0)
    [partition] = topic.partitions
    assert (partition.partition_index, partition.leader_id, partition.replica_nodes) == (
        3,
        0,
        [0, 2],
    )
    everything, totals_only = exchange(
        address(dc, 2),
        [
            DescribeLogDirsRequest(version=4, topics=None),
            DescribeLogDirsRequest(version=4, topics=[]),
        ],
    )
    [result] = everything.results
    assert [
        (t.name, [(p.partition_index, p.partition_size) for p in t.partitions])
        for t in result.topics
    ] == [("orders", [(3, 1234)])]
    assert totals_only.results[0].topics == []  # topics=[]: directory totals only


def test_describe_cluster_every_version(dc):
    requests = [DescribeClusterRequest(version=v) for v in range(3)]
    for resp in exchange(address(dc, 1), requests):
        assert resp.error_code == 0
        assert resp.cluster_id == dc.cluster_id and resp.controller_id in dc.broker_ports
        assert [(b.broker_id, b.port) for b in resp.brokers] == list(dc.broker_ports.items())


def test_describe_cluster_asked_for_controllers_is_refused(dc):
    [resp] = exchange(address(dc), [DescribeClusterRequest(version=1, endpoint_type=2)])
    assert resp.error_code == 114  # MISMATCHED_ENDPOINT_TYPE: brokers answer for brokers


def test_pipelined_requests_are_answered_in_order(dc):
    requests = [
        MetadataRequest(version=12, topics=None),
        DescribeClusterRequest(version=1),
        ApiVersionsRequest(version=3, client_software_name="t", client_software_version="1"),
        DescribeLogDirsRequest(version=4, topics=[]),
        MetadataRequest(version=1, topics=None),
    ]
    responses = exchange(address(dc, 2), requests)  # exchange checks the correlation ids
    assert [type(r).__name__ for r in responses] == [
        "MetadataResponse",
        "DescribeClusterResponse",
        "ApiVersionsResponse",
        "DescribeLogDirsResponse",
        "MetadataResponse",
    ]


def test_an_unsupported_version_closes_the_connection(dc):
    # DescribeLogDirs v0 is gone since Kafka 4.0; Kafka closes the connection without answering.
    with pytest.raises(ConnectionError):
        exchange(address(dc), [DescribeLogDirsRequest(version=0, topics=[])])


def test_an_api_the_devcluster_does_not_implement_closes_the_connection(dc):
    fetch = FetchRequest(version=12, replica_id=-1, max_wait_ms=100, min_bytes=1, topics=[])
    with pytest.raises(ConnectionError):
        exchange(address(dc), [fetch, DescribeClusterRequest(version=1)])
    assert dc.request_counts()["total"] == {"Fetch": 1}
