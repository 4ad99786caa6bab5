"""A real Apache Kafka cluster (KRaft, combined mode) started from Maven's jars: the exporter's own
cluster client sees its brokers and the tmpfs sizes of its log dirs, SASL producers write real
bytes, and nothing of it is left running or mounted afterwards. What DescribeCluster answers with
three brokers is asked of devcluster too (the `three_brokers` parameter): where they differ, Kafka
is right.

The run's `shared_kafka` (3 nodes) serves the tests that read it, write a topic of their own, or
stop a node and start it again before they end; the plugin and the start/stop failure paths start
a 1-node cluster each."""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.admin import DescribeClusterRequest

from demo.hops import QUOTA_CHANGE
from devkit.kafka_cluster import KafkaCluster, KafkaClusterError, strimzi_quota_callback
from devkit.processes import ephemeral_port_floor, wait_until
from devkit.producer_load import LoadProducer
from exporter.cluster_client import ClusterError, KafkaClusterClient
from kvq.kafka.admin_session import KafkaAdminSession
from kvq.kafka.client_settings import librdkafka_config
from tests.kafka_support import CHECKPOINT_SLACK, described, mounted_paths, usable_bytes
from tests.quota_backends import kafka_quotas_left_as_found

LOG_DIR_BYTES = 32 << 20


@contextlib.contextmanager
def exporter_client(kafka: KafkaCluster) -> Iterator[KafkaClusterClient]:
    client = KafkaClusterClient(kafka.admin_properties, timeout_seconds=10)
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def cluster_client(shared_kafka) -> Iterator[KafkaClusterClient]:
    with exporter_client(shared_kafka) as client:
        yield client


def test_every_port_lies_below_the_ephemeral_range(shared_kafka):
    """An ephemeral port picked at lay-out was sometimes taken by an outgoing connection (of the
    other nodes, say) before the JVM bound it seconds later: "Address already in use"."""
    for node in shared_kafka.node_list:
        for port in (node.plain_port, node.sasl_port, node.controller_port):
            assert 1024 <= port < ephemeral_port_floor()


def test_the_nodes_see_each_other_and_report_their_tmpfs_log_dirs_in_describe_log_dirs_v4(
    shared_kafka, cluster_client
):
    assert shared_kafka.real_file_systems, "as root the log dirs are tmpfs mounts"
    assert [b.broker_id for b in cluster_client.active_brokers()] == [0, 1, 2]
    for node_id in shared_kafka.node_ids:
        log_dirs = shared_kafka.log_dirs(node_id)
        assert {str(p) for p in log_dirs} <= mounted_paths()
        sizes = described(cluster_client, node_id)
        # the metadata dir is not among them
        assert sorted(sizes) == sorted(str(p) for p in log_dirs)
        for path in log_dirs:
            total, usable = sizes[str(path)]
            assert total == shared_kafka.log_dir_bytes
            assert abs(usable - usable_bytes(path)) <= CHECKPOINT_SLACK


def test_a_sasl_producer_s_bytes_show_up_in_the_log_dir_usage(shared_kafka, cluster_client):
    admin = AdminClient(librdkafka_config(shared_kafka.admin_properties))
    topic = f"bytes-{uuid.uuid4().hex[:8]}"
    [created] = admin.create_topics([NewTopic(topic, 1, replica_assignment=[[0]])]).values()
    created.result(timeout=60)
    try:
        before = described(cluster_client, 0)
        producer = LoadProducer(shared_kafka.sasl_bootstrap, user="alice", password="alice-secret")
        try:
            for _ in range(2000):
                while not producer.send(topic, os.urandom(1000)):
                    pass
            assert producer.producer.flush(60) == 0
        finally:
            producer.close()
        assert producer.log.acked_bytes() == 2_000_000 and not producer.log.errors
        assert not producer.log.throttles, "no quota is set"
        after = described(cluster_client, 0)
    finally:  # the cluster is shared: its disks back as they were
        [deleted] = admin.delete_topics([topic]).values()
        deleted.result(timeout=60)
    written = sum(before[d][1] - after[d][1] for d in after)
    assert written >= 2_000_000
    assert all(after[d][0] == shared_kafka.log_dir_bytes for d in after)


def test_every_broker_logs_the_produce_quota_it_applies(shared_kafka):
    """What demo/hops.py times a broker's enforcement by: `Changing PRODUCE quota for` in each
    node's server.log once it applies the quota record (from Kafka 4.2 the line comes from
    another logger; the launcher's log4j2 config names both)."""
    user = f"logged-{uuid.uuid4().hex[:8]}"

    def logged() -> bool:
        return all(
            any(QUOTA_CHANGE in line and user in line for line in server_log(node))
            for node in shared_kafka.node_list
        )

    with kafka_quotas_left_as_found(shared_kafka) as quotas:
        quotas.seed({"user": user}, producer_byte_rate=123456.0)
        wait_until(logged, timeout=30, what=f"every broker logging {QUOTA_CHANGE!r} for {user}")


def server_log(node) -> list[str]:
    path = node.logs_dir / "server.log"
    return path.read_text(errors="replace").splitlines() if path.is_file() else []


def test_a_wrong_password_is_refused(shared_kafka):
    errors: list[KafkaError] = []
    properties = {**shared_kafka.client_properties("alice"), "sasl.password": "not-alice-secret"}
    admin = AdminClient({**librdkafka_config(properties), "error_cb": errors.append})
    wait_until(
        lambda: (
            admin.poll(0.1) is not None
            and any(e.code() == KafkaError._AUTHENTICATION for e in errors)
        ),
        timeout=30,
        what="an authentication error",
    )


def test_the_strimzi_plugin_runs_as_the_quota_callback_when_configured(tmp_path, kafka_dist):
    """Plugin 0.3.1 on Kafka 4.1: its static produce quota (100 kB/s) throttles a 3 MB burst at
    once, where the unquoted 2 MB above is not throttled."""
    plugin = strimzi_quota_callback({"produce": "100000", "storage.check-interval": "5"})
    with KafkaCluster(
        tmp_path, nodes=1, log_dir_bytes=LOG_DIR_BYTES, dist=kafka_dist, broker_properties=plugin
    ) as kafka:
        producer = LoadProducer(kafka.sasl_bootstrap, user="alice", password="alice-secret")
        try:
            for _ in range(3000):
                while not producer.send("burst", b"x" * 1000):
                    pass
            wait_until(
                lambda: producer.producer.poll(0.1) is not None and producer.log.throttles,
                timeout=60,
                what="a throttle time from the plugin's quota",
            )
        finally:
            producer.close()
        server_log = (kafka.node(0).logs_dir / "server.log").read_text()
    assert "ClassNotFoundException" not in server_log and "NoSuchMethodError" not in server_log


def test_the_exporter_still_sees_the_brokers_after_the_broker_it_asks_stops(shared_kafka):
    """Found on real Kafka: librdkafka's describe_cluster waited for the broker Metadata names as
    the controller, a random live broker on KRaft; once that broker stopped, every call timed out
    (for up to ~90 s) and the throttle factor fell back. The client asks the broker that answered
    last first: stop exactly that one. Every call must still answer within its timeout, and list
    the other two once the cluster has fenced it."""
    with exporter_client(shared_kafka) as client:
        assert [b.broker_id for b in client.active_brokers()] == [0, 1, 2]
        asked = client._session.answered_last
        assert asked in shared_kafka.node_ids
        survivors = sorted(set(shared_kafka.node_ids) - {asked})
        shared_kafka.stop_node(asked)
        try:
            calls: list[tuple[float, list[int] | ClusterError]] = []

            def listed_or_failed() -> bool:
                started = time.monotonic()
                try:
                    answer: list[int] | ClusterError = [
                        b.broker_id for b in client.active_brokers()
                    ]
                except ClusterError as exc:
                    answer = exc
                calls.append((time.monotonic() - started, answer))
                return answer == survivors or isinstance(answer, ClusterError)

            wait_until(listed_or_failed, timeout=30, what=f"{survivors} after node {asked} stopped")
            assert calls[-1][1] == survivors, calls
            assert max(seconds for seconds, _ in calls) < client.timeout_seconds, calls
        finally:
            shared_kafka.start_node(asked)


@dataclass(frozen=True)
class ThreeBrokers:
    """devcluster or Kafka, three brokers, driven alike."""

    admin_properties: dict[str, str]
    stop: Callable[[int], object]
    """Stop a broker and return once the others no longer list it as active."""
    start: Callable[[int], object]
    """Start it again and return once every broker lists it."""


@pytest.fixture(params=["devcluster", "kafka"])
def three_brokers(request, devcluster) -> ThreeBrokers:
    if request.param == "kafka":
        kafka = request.getfixturevalue("shared_kafka")

        def stop_kafka_node(node_id: int) -> None:
            kafka.stop_node(node_id)
            kafka.wait_ready()

        return ThreeBrokers(kafka.admin_properties, stop_kafka_node, kafka.start_node)
    dc = devcluster(brokers=3, log_dirs_per_broker=1)
    return ThreeBrokers({"bootstrap.servers": dc.bootstrap}, dc.stop_broker, dc.start_broker)


def describe_cluster(properties: dict[str, str], request: DescribeClusterRequest) -> Any:
    session = KafkaAdminSession(properties, "kvq-test", 10_000)
    try:
        return session.send(request, node_id=0)
    finally:
        session.close()


def test_describe_cluster_names_a_random_live_broker_as_controller(three_brokers):
    """Differential (devcluster against Kafka): a KRaft broker has no controller to name in
    DescribeCluster and Metadata; it names a random unfenced broker in each answer."""
    named = {
        describe_cluster(
            three_brokers.admin_properties, DescribeClusterRequest(version=2)
        ).controller_id
        for _ in range(30)
    }
    assert named == {0, 1, 2}  # each id misses 30 draws with p = (2/3)^30, about 5e-6


def test_describe_cluster_v2_lists_a_stopped_broker_as_fenced_only_on_request(three_brokers):
    """Differential: Kafka keeps a stopped broker registered (fenced); DescribeCluster leaves it
    out unless v2's IncludeFencedBrokers asks, as kafka-python's describe_cluster() does. Started
    again, it is listed unfenced."""
    props = three_brokers.admin_properties
    three_brokers.stop(2)
    try:
        active = describe_cluster(props, DescribeClusterRequest(version=2))
        every = describe_cluster(
            props, DescribeClusterRequest(version=2, include_fenced_brokers=True)
        )
    finally:
        three_brokers.start(2)
    back = describe_cluster(props, DescribeClusterRequest(version=2, include_fenced_brokers=True))
    assert [(b.broker_id, b.is_fenced) for b in active.brokers] == [(0, False), (1, False)]
    assert active.controller_id in (0, 1)
    assert [(b.broker_id, b.is_fenced) for b in every.brokers] == [
        (0, False),
        (1, False),
        (2, True),
    ]
    assert [(b.broker_id, b.is_fenced) for b in back.brokers] == [
        (0, False),
        (1, False),
        (2, False),
    ]


def test_leaving_the_context_stops_every_jvm_and_unmounts_even_on_failure(tmp_path, kafka_dist):
    kafka = KafkaCluster(tmp_path, nodes=1, log_dir_bytes=LOG_DIR_BYTES, dist=kafka_dist)
    with pytest.raises(RuntimeError, match="the test failed"), kafka:
        processes = [node.process for node in kafka.node_list]
        mounts = {str(p) for p in kafka.log_dirs(0)}
        assert mounts <= mounted_paths()
        raise RuntimeError("the test failed")
    assert all(p is not None and not p.running for p in processes)
    assert not mounts & mounted_paths()
    assert (kafka.node(0).logs_dir / "server.log").is_file(), "logs are kept"


def test_a_node_that_cannot_start_fails_at_once_naming_its_logs(tmp_path, kafka_dist):
    kafka = KafkaCluster(
        tmp_path, nodes=1, log_dir_bytes=LOG_DIR_BYTES, dist=kafka_dist, jvm_options=["-Xmx1k"]
    )
    with pytest.raises(KafkaClusterError) as failure:
        kafka.start()
    message = str(failure.value)
    assert "node 0 exited" in message and str(kafka.node(0).logs_dir) in message
    assert "heap" in message  # the JVM's own reason, from the node's console log
    assert not {str(p) for p in kafka.log_dirs(0)} & mounted_paths()
    assert not kafka.node(0).running
