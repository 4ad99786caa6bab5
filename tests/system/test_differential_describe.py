"""What the exporter reads, asked of devcluster and of real Apache Kafka alike: the same answers.

Each test runs once per backend (the `backend` parameter); both serve one broker with two log
dirs, each a tmpfs of LOG_DIR_BYTES, behind a SASL/PLAIN listener, and are read through the
exporter's own cluster client. Where the two differ, Kafka is right.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kafka.protocol.admin import DescribeLogDirsRequest

from devkit.kafka_cluster import DEFAULT_USERS, KafkaCluster
from exporter.cluster_client import KafkaClusterClient
from tests.kafka_support import CHECKPOINT_SLACK, described, usable_bytes

LOG_DIR_BYTES = 16 << 20


@dataclass(frozen=True)
class Backend:
    name: str
    admin_properties: dict[str, str]
    log_dirs: tuple[Path, ...]
    """Broker 0's log dirs, each a tmpfs of LOG_DIR_BYTES."""


@pytest.fixture(scope="module")
def kafka_one_node(tmp_path_factory, kafka_dist) -> Iterator[KafkaCluster]:
    with KafkaCluster(
        tmp_path_factory.mktemp("kafka"), nodes=1, log_dir_bytes=LOG_DIR_BYTES, dist=kafka_dist
    ) as kafka:
        yield kafka


@pytest.fixture(params=["devcluster", "kafka"])
def backend(request, devcluster, mount_tmpfs) -> Backend:
    if request.param == "kafka":
        kafka = request.getfixturevalue("kafka_one_node")
        return Backend("kafka", kafka.admin_properties, kafka.log_dirs(0))
    dc = devcluster(brokers=1, log_dirs_per_broker=2, sasl_users=DEFAULT_USERS)
    log_dirs = (dc.log_dir_path(0, 0), dc.log_dir_path(0, 1))
    for path in log_dirs:
        mount_tmpfs(path, size=str(LOG_DIR_BYTES))
    admin = {
        "bootstrap.servers": dc.sasl_bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "admin",
        "sasl.password": DEFAULT_USERS["admin"],
    }
    return Backend("devcluster", admin, log_dirs)


@pytest.fixture
def client(backend) -> Iterator[KafkaClusterClient]:
    client = KafkaClusterClient(backend.admin_properties, timeout_seconds=10)
    yield client
    client.close()


def test_describe_cluster_lists_the_broker_at_the_listener_asked(backend, client):
    [broker] = client.active_brokers()
    assert broker.broker_id == 0
    assert f"{broker.host}:{broker.port}" == backend.admin_properties["bootstrap.servers"]


def test_describe_log_dirs_v4_reports_each_file_system_s_total_and_usable_bytes(backend, client):
    sizes = described(client, 0)
    assert sorted(sizes) == sorted(str(path) for path in backend.log_dirs)
    for path in backend.log_dirs:
        total, usable = sizes[str(path)]
        assert total == LOG_DIR_BYTES
        assert abs(usable - usable_bytes(path)) <= CHECKPOINT_SLACK
    negotiated = client._session.api_versions(0)
    assert negotiated is not None and negotiated[DescribeLogDirsRequest.API_KEY] >= 4
