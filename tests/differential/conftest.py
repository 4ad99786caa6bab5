"""The `backend` fixture: each differential test runs once on devcluster and once on real Kafka.

Kafka is the session's `shared_kafka` (3 nodes): a test leaves it as it found it (quotas put
back by `quota_baseline`, topics with names of their own). devcluster is a fresh 3-broker cluster
per test with the same SASL users, imitating the Kafka release the run starts
(`KVQ_KAFKA_VERSION`, default the oldest supported). Where the two answer differently, Kafka is
right.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kafka.admin import KafkaAdminClient

from devcluster.kafka_version import parse
from devkit.kafka_cluster import DEFAULT_USERS
from devkit.kafka_dist import selected_version
from tests.differential.backends import (
    Backend,
    Quotas,
    create_topic,
    quota_snapshot,
    restore_quotas,
    unique,
)

pytestmark = pytest.mark.integration


@pytest.fixture(params=["devcluster", "kafka"])
def backend(request, devcluster) -> Backend:
    version = selected_version()
    if request.param == "kafka":
        kafka = request.getfixturevalue("shared_kafka")
        assert kafka.dist.version == version
        return Backend(
            "kafka", kafka.bootstrap, kafka.sasl_bootstrap, kafka.node_ids, parse(version)
        )
    dc = devcluster(  # its disks as Kafka's: the host's (capacity_bytes=None)
        brokers=3,
        log_dirs_per_broker=2,
        capacity_bytes=None,
        sasl_users=dict(DEFAULT_USERS),
        kafka_version=version,
    )
    return Backend(
        "devcluster", dc.bootstrap, dc.sasl_bootstrap, sorted(dc.broker_ports), parse(version)
    )


@pytest.fixture
def leader(backend) -> int:
    """The broker a test's topic lives on: the backend's first."""
    return backend.node_ids[0]


@pytest.fixture
def topic(request, backend, leader) -> str:
    """A new topic of one partition on `leader`, named after the test (unique in the run), once
    its leader knows itself as such."""
    name = unique(request.node.originalname.removeprefix("test_")[:40])
    create_topic(backend, name, [[leader]])
    return name


@pytest.fixture
def admin_client(backend) -> Iterator[KafkaAdminClient]:
    """kafka-python's admin client, SASL/PLAIN as the super user."""
    client = backend.admin_client()
    yield client
    client.close()


@pytest.fixture
def quota_baseline(backend, admin_client) -> Iterator[Quotas]:
    """The client quotas at the start (none, unless another test left some); at the end every
    quota is put back as it was, on every broker: Kafka's cluster is shared by the whole run."""
    before = quota_snapshot(admin_client)
    yield before
    restore_quotas(admin_client, before, backend.node_ids)


@pytest.fixture
def admin(admin_client, quota_baseline) -> KafkaAdminClient:
    """The admin client of a test that changes client quotas (put back at the end)."""
    return admin_client
