"""The devcluster through confluent-kafka (librdkafka): what the exporter uses for membership."""

import confluent_kafka.admin as ck
import pytest

pytestmark = pytest.mark.integration


@pytest.fixture
def dc(devcluster):
    return devcluster(brokers=3, log_dirs_per_broker=1)


def client(dc):
    return ck.AdminClient({"bootstrap.servers": dc.bootstrap, "log_level": 0})


def test_list_topics_and_describe_cluster(dc):
    admin = client(dc)
    md = admin.list_topics(timeout=10)
    assert md.cluster_id == dc.cluster_id
    assert md.controller_id == 0
    assert md.topics == {}
    assert {i: (b.host, b.port) for i, b in md.brokers.items()} == {
        i: ("127.0.0.1", port) for i, port in dc.broker_ports.items()
    }
    described = admin.describe_cluster(request_timeout=10).result()
    assert described.cluster_id == dc.cluster_id
    assert sorted((n.id, n.port) for n in described.nodes) == sorted(dc.broker_ports.items())
    assert described.controller.id == 0


def test_describe_cluster_with_authorized_operations(dc):
    admin = client(dc)  # keep a reference: a collected client cancels its futures
    described = admin.describe_cluster(
        request_timeout=10, include_authorized_operations=True
    ).result()
    assert sorted(n.id for n in described.nodes) == [0, 1, 2]
    assert described.authorized_operations  # Kafka without an authorizer allows everything


def test_a_stopped_broker_is_not_listed(dc):
    dc.stop_broker(2)
    admin = client(dc)
    assert sorted(admin.list_topics(timeout=10).brokers) == [0, 1]
    nodes = admin.describe_cluster(request_timeout=10).result().nodes
    assert sorted(n.id for n in nodes) == [0, 1]


def test_asking_for_a_topic_gets_unknown_topic(dc):
    admin = client(dc)
    md = admin.list_topics(topic="orders", timeout=10)
    assert md.topics["orders"].error.code() == 3  # UNKNOWN_TOPIC_OR_PARTITION


def test_slow_brokers_still_serve_librdkafka(dc):
    """librdkafka pipelines its first requests; with latency they queue and still all answer."""
    for broker_id in dc.broker_ports:
        dc.set_faults(broker_id, latency_ms=100)
    admin = client(dc)
    assert sorted(admin.list_topics(timeout=20).brokers) == [0, 1, 2]
    assert len(admin.describe_cluster(request_timeout=20).result().nodes) == 3
    counts = dc.request_counts()["total"]
    assert counts["ApiVersions"] >= 1 and counts["Metadata"] >= 2
