"""What the exporter reads (DescribeCluster, DescribeLogDirs v4), asked of devcluster and of real
Apache Kafka alike: the same answers.

Each test runs once per backend (the `backend` parameter): the run's shared 3-node Kafka cluster,
or a 3-broker devcluster whose broker 0 has two log dirs, each a tmpfs of the Kafka cluster's
size, both behind SASL/PLAIN listeners and read through the exporter's own cluster client. Where
the two differ, Kafka is right.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kafka.protocol.admin import DescribeClusterRequest, DescribeLogDirsRequest

from devkit.kafka_cluster import DEFAULT_USERS
from exporter.cluster_client import KafkaClusterClient
from kvq.kafka.admin_session import KafkaAdminSession
from tests.kafka_support import (
    CHECKPOINT_SLACK,
    SHARED_KAFKA_LOG_DIR_BYTES,
    described,
    usable_bytes,
)


@dataclass(frozen=True)
class Backend:
    name: str
    admin_properties: dict[str, str]
    log_dirs: tuple[Path, ...]
    """Broker 0's log dirs, each a tmpfs of `log_dir_bytes`."""
    log_dir_bytes: int

    @property
    def listeners(self) -> list[tuple[int, str]]:
        """(broker id, host:port) of every broker's SASL listener, in id order."""
        return list(enumerate(self.admin_properties["bootstrap.servers"].split(",")))


@pytest.fixture(params=["devcluster", "kafka"])
def backend(request, devcluster, mount_tmpfs) -> Backend:
    if request.param == "kafka":
        kafka = request.getfixturevalue("shared_kafka")
        return Backend("kafka", kafka.admin_properties, kafka.log_dirs(0), kafka.log_dir_bytes)
    dc = devcluster(brokers=3, log_dirs_per_broker=2, capacity_bytes=None, sasl_users=DEFAULT_USERS)
    log_dirs = (dc.log_dir_path(0, 0), dc.log_dir_path(0, 1))
    for path in log_dirs:
        mount_tmpfs(path, size=str(SHARED_KAFKA_LOG_DIR_BYTES))
    admin = {
        "bootstrap.servers": dc.sasl_bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "admin",
        "sasl.password": DEFAULT_USERS["admin"],
    }
    return Backend("devcluster", admin, log_dirs, SHARED_KAFKA_LOG_DIR_BYTES)


@pytest.fixture
def client(backend) -> Iterator[KafkaClusterClient]:
    client = KafkaClusterClient(backend.admin_properties, timeout_seconds=10)
    yield client
    client.close()


def test_describe_cluster_lists_each_broker_at_the_listener_asked(backend, client):
    brokers = client.active_brokers()
    assert [(b.broker_id, f"{b.host}:{b.port}") for b in brokers] == backend.listeners


@pytest.fixture
def session(backend) -> Iterator[KafkaAdminSession]:
    session = KafkaAdminSession(backend.admin_properties, "kvq-differential", 10_000)
    yield session
    session.close()


@pytest.mark.parametrize("version", [0, 1, 2])
def test_describe_cluster_at_each_version(backend, session, version):
    response = session.send(DescribeClusterRequest(version=version), node_id=0)
    assert (response.error_code, response.error_message) == (0, None)
    assert [(b.broker_id, f"{b.host}:{b.port}", b.rack) for b in response.brokers] == [
        (broker_id, listener, None) for broker_id, listener in backend.listeners
    ]
    # KRaft: no controller to name, a random live broker instead
    assert response.controller_id in (0, 1, 2) and response.cluster_id
    assert response.authorized_operations is None  # not asked: Kafka's INT32 minimum
    if version >= 1:
        assert response.endpoint_type == 1
    if version >= 2:
        assert not any(b.is_fenced for b in response.brokers)
    asked = DescribeClusterRequest(version=version, include_cluster_authorized_operations=True)
    # the super user holds every cluster operation: CREATE ALTER DESCRIBE CLUSTER_ACTION
    # DESCRIBE_CONFIGS ALTER_CONFIGS IDEMPOTENT_WRITE
    assert session.send(asked, node_id=0).authorized_operations == {5, 7, 8, 9, 10, 11, 12}


@pytest.mark.parametrize(
    ("endpoint_type", "error_code", "message"),
    [
        (
            2,
            114,  # MISMATCHED_ENDPOINT_TYPE
            "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of "
            "type CONTROLLER",
        ),
        (3, 115, "Unsupported endpoint type 3"),  # UNSUPPORTED_ENDPOINT_TYPE
        (0, 115, "Unsupported endpoint type 0"),
    ],
)
def test_describe_cluster_of_other_endpoints_is_refused_by_a_broker(
    session, endpoint_type, error_code, message
):
    """A broker answers for brokers only (KIP-919); the rest of its error answer is defaults."""
    request = DescribeClusterRequest(version=1, endpoint_type=endpoint_type)
    response = session.send(request, node_id=0)
    assert (response.error_code, response.error_message) == (error_code, message)
    assert (response.endpoint_type, response.cluster_id, response.controller_id) == (1, "", -1)
    assert response.brokers == []


def test_describe_log_dirs_v4_reports_each_file_system_s_total_and_usable_bytes(backend, client):
    sizes = described(client, 0)
    assert sorted(sizes) == sorted(str(path) for path in backend.log_dirs)
    for path in backend.log_dirs:
        total, usable = sizes[str(path)]
        assert total == backend.log_dir_bytes
        assert abs(usable - usable_bytes(path)) <= CHECKPOINT_SLACK
    negotiated = client._session.api_versions(0)
    assert negotiated is not None and negotiated[DescribeLogDirsRequest.API_KEY] >= 4
