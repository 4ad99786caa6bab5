"""SASL/PLAIN on devcluster and on real Kafka alike: who may connect, with what answers, and that
the authenticated user is the principal quotas apply to."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

from devkit.devcluster_wire import WireConnection, exchange
from devkit.kafka_cluster import DEFAULT_USERS
from devkit.producer_load import LoadProducer
from tests.differential.backends import (
    produce_request,
    record_batch,
    sasl_connection,
    set_quota_seen_by,
    unique,
)

pytestmark = pytest.mark.integration

HANDSHAKE = SaslHandshakeRequest(version=1, mechanism="PLAIN")
ILLEGAL_SASL_STATE = 34
AFTER_AUTHENTICATION = "SaslAuthenticate request received after successful authentication"


def plain_token(user: str, password: str) -> bytes:
    return f"\0{user}\0{password}".encode()


def test_a_wrong_password_fails_authentication(backend):
    errors = []
    producer = LoadProducer(
        backend.sasl_bootstrap, user="alice", password="wrong", error_cb=errors.append
    )
    try:
        producer.send(unique("never"), b"x")
        deadline = time.monotonic() + 10
        while not errors and time.monotonic() < deadline:
            producer.producer.poll(0.05)
    finally:
        producer.close()
    assert errors[0].code() == KafkaError._AUTHENTICATION
    assert "Invalid username or password" in errors[0].str()


def test_a_sasl_listener_closes_a_connection_that_skips_authentication(backend):
    node = backend.node_ids[0]
    with pytest.raises(ConnectionError):
        exchange(backend.sasl_address(node), [MetadataRequest(version=12, topics=None)])
    # On the PLAINTEXT listener the same request is answered (User:ANONYMOUS), with the
    # brokers' PLAINTEXT ports.
    [answer] = exchange(backend.address(node), [MetadataRequest(version=12, topics=None)])
    listed = sorted(f"{b.host}:{b.port}" for b in answer.brokers)
    assert listed == sorted(backend.bootstrap.split(","))


def test_sasl_authenticate_failures_are_answered_then_closed(backend):
    address = backend.sasl_address(backend.node_ids[0])
    bad = SaslAuthenticateRequest(version=2, auth_bytes=plain_token("alice", "nope"))
    shake, auth = exchange(address, [HANDSHAKE, bad])
    assert (shake.error_code, shake.mechanisms) == (0, ["PLAIN"])
    assert (auth.error_code, auth.error_message) == (
        58,
        "Authentication failed: Invalid username or password",
    )
    [scram] = exchange(address, [SaslHandshakeRequest(version=1, mechanism="SCRAM-SHA-256")])
    assert (scram.error_code, scram.mechanisms) == (33, ["PLAIN"])
    two_tokens = SaslAuthenticateRequest(version=0, auth_bytes=b"alice\0alice-secret")
    _, auth = exchange(address, [HANDSHAKE, two_tokens])
    assert auth.error_message == "Invalid SASL/PLAIN response: expected 3 tokens, got 2"


def test_the_authenticated_user_is_the_principal_its_quota_applies_to(
    backend, admin, leader, topic
):
    """alice and bob send the same produce request with the same client-id; only alice has a
    quota (on user alice and that client-id), so only she is throttled."""
    client = unique("shared-client")
    set_quota_seen_by(
        admin, leader, (("user", "alice"), ("client-id", client)), {"producer_byte_rate": 10_000}
    )
    throttles = {}
    for user in ("alice", "bob"):
        with sasl_connection(backend, leader, user, client) as connection:
            connection.send(produce_request(topic, 0, record_batch(110, 1000)))
            produced = connection.receive()[0]
        [[partition]] = [t.partition_responses for t in produced.responses]
        assert partition.error_code == 0
        throttles[user] = produced.throttle_time_ms
    assert throttles["alice"] > 0 and throttles["bob"] == 0, throttles


def test_sasl_on_the_plaintext_listener_is_refused_and_the_client_stays_anonymous(
    backend, admin, leader, topic
):
    """A PLAINTEXT connection needs no authentication, so Kafka answers its SaslHandshake and
    SaslAuthenticate with ILLEGAL_SASL_STATE and keeps it open as User:ANONYMOUS: with alice's
    password it still does not become alice, and her quota does not throttle it."""
    client = unique("plaintext-client")
    set_quota_seen_by(
        admin, leader, (("user", "alice"), ("client-id", client)), {"producer_byte_rate": 10_000}
    )
    as_alice = SaslAuthenticateRequest(
        version=2, auth_bytes=plain_token("alice", DEFAULT_USERS["alice"])
    )
    with WireConnection(backend.address(leader), client_id=client) as connection:
        connection.send(HANDSHAKE)
        connection.send(as_alice)
        shake, auth = connection.receive()[0], connection.receive()[0]
        connection.send(produce_request(topic, 0, record_batch(110, 1000)))
        produced = connection.receive()[0]
    assert (shake.error_code, shake.mechanisms) == (ILLEGAL_SASL_STATE, [])
    assert (auth.error_code, auth.error_message) == (ILLEGAL_SASL_STATE, AFTER_AUTHENTICATION)
    [[partition]] = [t.partition_responses for t in produced.responses]
    assert (partition.error_code, produced.throttle_time_ms) == (0, 0)


def test_an_authenticated_sasl_connection_cannot_authenticate_again(backend, leader):
    """Re-authentication (KIP-368) is off unless connections.max.reauth.ms is set: a second
    SaslHandshake is answered with ILLEGAL_SASL_STATE and the connection goes on as before."""
    with sasl_connection(backend, leader, "alice", unique("again")) as connection:
        connection.send(HANDSHAKE)
        [shake, _] = connection.receive()
        connection.send(MetadataRequest(version=12, topics=None))
        [metadata, _] = connection.receive()
    assert (shake.error_code, shake.mechanisms) == (ILLEGAL_SASL_STATE, [])
    assert sorted(b.node_id for b in metadata.brokers) == backend.node_ids
