"""KafkaAdminSession's public surface against devcluster over TCP (real kafka-python)."""

from __future__ import annotations

import pytest
from kafka.protocol.admin import DescribeLogDirsRequest
from kafka.protocol.admin.client_quotas import DescribeClientQuotasRequest

from devcluster.control_client import ControlClient
from kvq.kafka.admin_session import KafkaAdminSession, KafkaUnavailable


@pytest.fixture
def dc(devcluster):
    return devcluster(brokers=3, log_dirs_per_broker=1)


@pytest.fixture
def session(dc):
    session = KafkaAdminSession({"bootstrap.servers": dc.bootstrap}, "kvq-test", 3000)
    yield session
    session.close()


def describe_everywhere(session, ids):
    return session.send_to_each(
        ids,
        lambda version: DescribeLogDirsRequest(version=version, topics=[]),
        DescribeLogDirsRequest,
        3.0,
    )


def test_each_node_is_asked_at_the_highest_version_it_speaks(dc, session):
    ControlClient(dc.control_url).set_faults(1, max_describe_log_dirs_version=3)
    responses = describe_everywhere(session, [0, 1, 2])
    assert sorted(responses) == [0, 1, 2]
    assert responses[0].results[0].total_bytes > 0
    assert responses[1].results[0].total_bytes == -1  # v3 has no sizes
    assert session.api_versions(1)[DescribeLogDirsRequest.API_KEY] == 3
    assert session.api_versions(0)[DescribeLogDirsRequest.API_KEY] >= 4


def test_an_unknown_node_fails_alone(session):
    responses = describe_everywhere(session, [0, 7])
    assert responses[0].results
    assert "broker 7 is not in the metadata" in str(responses[7])
    assert session.api_versions(7) is None


def test_a_connection_dropped_under_its_request_is_dialled_once_more(dc, session):
    # What a client whose SASL re-authentication came late sees: Kafka closes the connection
    # on the next request, unanswered.
    control = ControlClient(dc.control_url)
    describe_everywhere(session, [0, 1, 2])  # connected, versions known
    control.set_faults(1, drop_describe_log_dirs=1)
    responses = describe_everywhere(session, [0, 1, 2])
    assert all(responses[n].results[0].total_bytes > 0 for n in (0, 1, 2))
    control.set_faults(1, drop_describe_log_dirs=2)
    responses = describe_everywhere(session, [0, 1, 2])
    assert isinstance(responses[1], Exception)  # once more, not until the deadline
    assert responses[0].results and responses[2].results
    assert control.state()["faults"] == {}


def test_send_returns_the_response(session):
    response = session.send(DescribeClientQuotasRequest(components=[], strict=False))
    assert response.error_code == 0


def test_nothing_listening_is_kafka_unavailable():
    session = KafkaAdminSession({"bootstrap.servers": "127.0.0.1:1"}, "kvq-test", 500)
    with pytest.raises(KafkaUnavailable, match="127.0.0.1:1"):
        session.send(DescribeClientQuotasRequest(components=[], strict=False))
    session.close()
