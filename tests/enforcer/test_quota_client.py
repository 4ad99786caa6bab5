"""The Kafka quota client: request building, error-code checks, and a devcluster round trip."""

from __future__ import annotations

import math
import socket
import threading

import pytest
from kafka.protocol.admin import DescribeConfigsResponse
from kafka.protocol.admin.client_quotas import (
    AlterClientQuotasResponse,
    DescribeClientQuotasResponse,
)

from devkit.processes import wait_until
from enforcer.broker_quota_settings import BrokerQuotaSettings
from enforcer.quota_client import (
    NOT_AGREED,
    KafkaQuotaClient,
    QuotaClientError,
    QuotaRejected,
    agreed,
    alter_request,
    check_alter_response,
    quota_settings_from_response,
    quota_settings_request,
    snapshot_from_response,
)
from enforcer.quota_plan import Change
from kvq.kafka.quota_entity import QuotaEntity

P = "producer_byte_rate"
ALICE = QuotaEntity.user("alice")
DEFAULT = QuotaEntity.default_user()
ALICE_ANY = QuotaEntity.of({"user": "alice", "client-id": None})


def test_one_entry_per_entity_with_null_names_for_defaults_and_remove_ops():
    request = alter_request(
        [Change(ALICE_ANY, P, 10.0), Change(ALICE_ANY, "consumer_byte_rate", None)], True
    )
    assert request.validate_only is True
    (entry,) = request.entries
    assert [(e.entity_type, e.entity_name) for e in entry.entity] == [
        ("user", "alice"),
        ("client-id", None),
    ]
    assert [(o.key, o.value, o.remove) for o in entry.ops] == [
        (P, 10.0, False),
        ("consumer_byte_rate", 0.0, True),
    ]


def _describe_response(error_code=0, message=None, entries=()):
    entry = DescribeClientQuotasResponse.EntryData
    return DescribeClientQuotasResponse(
        throttle_time_ms=0,
        error_code=error_code,
        error_message=message,
        entries=[
            entry(
                entity=[entry.EntityData(entity_type=t, entity_name=n) for t, n in ent],
                values=[entry.ValueData(key=k, value=v) for k, v in vals.items()],
            )
            for ent, vals in entries
        ],
    )


def test_brokers_agree_on_a_value_only_when_each_shows_it_alike():
    """A broker whose copy of the metadata log lags shows an old value, or a removed key still
    set: that pair is not agreed. NaN shows alike on every broker."""
    bob = QuotaEntity.user("bob")
    first = {ALICE: {P: 300.0, "consumer_byte_rate": math.nan}, DEFAULT: {P: 500.0}}
    lagging = {ALICE: {P: 900.0, "consumer_byte_rate": math.nan}, bob: {P: 7.0}}
    merged = agreed([first, first, lagging])
    assert merged[ALICE][P] == NOT_AGREED and math.isnan(merged[ALICE]["consumer_byte_rate"])
    assert merged[DEFAULT] == {P: NOT_AGREED}, "removed on one broker, still set on another"
    assert merged[bob] == {P: NOT_AGREED}
    assert agreed([first, first]) == first
    assert agreed([]) == {}


def test_describe_response_becomes_a_snapshot():
    response = _describe_response(entries=[([("user", None)], {P: 5.0})])
    assert snapshot_from_response(response) == {DEFAULT: {P: 5.0}}


def test_describe_error_code_is_an_error_with_kafkas_name_and_message():
    with pytest.raises(QuotaClientError, match="ClusterAuthorizationFailedError: denied"):
        snapshot_from_response(_describe_response(31, "denied"))


def test_alter_entry_errors_name_the_entity():
    entry = AlterClientQuotasResponse.EntryData
    response = AlterClientQuotasResponse(
        throttle_time_ms=0,
        entries=[
            entry(
                error_code=42,
                error_message="producer_byte_rate cannot be a fractional value.",
                entity=[entry.EntityData(entity_type="user", entity_name="bob")],
            ),
            entry(
                error_code=0,
                error_message=None,
                entity=[entry.EntityData(entity_type="user", entity_name="ok")],
            ),
        ],
    )
    with pytest.raises(QuotaRejected) as info:
        check_alter_response(response)
    assert info.value.errors == [
        "user=bob: InvalidRequestError: producer_byte_rate cannot be a fractional value."
    ]


@pytest.mark.integration
def test_round_trip_against_devcluster_and_errors_when_down(devcluster):
    dc = devcluster(brokers=2, log_dirs_per_broker=1)
    client = KafkaQuotaClient({"bootstrap.servers": dc.bootstrap, "request.timeout.ms": "1500"})
    try:
        assert client.describe() == {}
        changes = [Change(ALICE_ANY, P, 300.0), Change(DEFAULT, P, 500.0)]
        client.alter(changes, validate_only=True)
        assert client.describe() == {}
        client.alter(changes)
        assert client.describe() == {ALICE_ANY: {P: 300.0}, DEFAULT: {P: 500.0}}
        with pytest.raises(QuotaRejected, match="fractional"):
            client.alter([Change(ALICE, P, 0.5)])
        client.alter([Change(ALICE_ANY, P, None)])
        assert client.describe() == {DEFAULT: {P: 500.0}}
        assert client.describe_agreed() == {DEFAULT: {P: 500.0}}
        dc.stop_broker(1)
        assert client.describe_agreed() == {DEFAULT: {P: 500.0}}, "a stopped broker is left out"
        dc.stop_broker(0)
        with pytest.raises(QuotaClientError, match="failed|cannot reach Kafka|no broker"):
            client.describe_agreed()
        for broker in range(2):
            dc.stop_broker(broker)
        with pytest.raises(QuotaClientError, match="failed|cannot reach Kafka"):
            client.describe()
        for broker in range(2):
            dc.start_broker(broker)
        assert client.describe() == {DEFAULT: {P: 500.0}}
    finally:
        client.close()


def _configs_response(error_code=0, value=None, window=("11", "1")):
    result = DescribeConfigsResponse.DescribeConfigsResult
    config = result.DescribeConfigsResourceResult

    def one(name, given, source):
        return config(
            name=name,
            value=given,
            read_only=True,
            config_source=source,
            is_sensitive=False,
            synonyms=[],
            config_type=8,
            documentation=None,
        )

    samples, size = window
    return DescribeConfigsResponse(
        throttle_time_ms=0,
        results=[
            result(
                error_code=error_code,
                error_message="denied" if error_code else None,
                resource_type=4,
                resource_name="0",
                configs=[
                    one("client.quota.callback.class", value, 4 if value else 5),
                    one("quota.window.num", samples, 4),
                    one("quota.window.size.seconds", size, 5),
                ],
            )
        ],
    )


def test_quota_settings_request_asks_one_broker_for_its_callback_window_and_metrics_sample():
    (resource,) = quota_settings_request(7).resources
    assert (resource.resource_type, resource.resource_name) == (4, "7")
    assert resource.configuration_keys == [
        "client.quota.callback.class",
        "quota.window.num",
        "quota.window.size.seconds",
        "metrics.num.samples",
        "metrics.sample.window.ms",
    ]


def test_quota_settings_from_response_callback_set_unset_window_and_error():
    plugin = "io.strimzi.kafka.quotas.StaticQuotaCallback"
    reported = quota_settings_from_response(_configs_response(value=plugin, window=("3", "2")))
    settings = BrokerQuotaSettings().with_broker(0, reported)
    assert (settings.callbacks, settings.windows, settings.samples) == (
        {0: plugin},
        {0: 6.0},
        {0: 2.0},
    )
    unset = BrokerQuotaSettings().with_broker(0, quota_settings_from_response(_configs_response()))
    assert (unset.callbacks, unset.windows) == ({}, {0: 11.0})
    with pytest.raises(QuotaClientError, match="broker 0 failed: .*denied"):
        quota_settings_from_response(_configs_response(error_code=31))


def test_a_connection_the_client_gives_up_on_is_reset_so_what_it_sent_cannot_land_later():
    """A broker that takes a request but never answers (the network to it cut): the client gives
    up after its timeout and resets the connection (RST; kafka-python shuts it down first, then
    the close resets it), so that its kernel drops what the broker has not acknowledged instead
    of retransmitting it once the network is back (a write of a replica that lost the right to
    act, landing after the other took over). A plain close would keep retransmitting."""
    server = socket.create_server(("127.0.0.1", 0))
    ends: list[str] = []

    def silent_broker() -> None:
        connection, _ = server.accept()
        with connection:
            while connection.recv(65536):
                pass  # never answers
            # the end (FIN, the shutdown), then a reset, or not: the socket's error says which
            wait_until(
                lambda: connection.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR), 2, what="RST"
            )
            ends.append("reset")

    threading.Thread(target=silent_broker, daemon=True).start()
    client = KafkaQuotaClient({"bootstrap.servers": f"127.0.0.1:{server.getsockname()[1]}"}, 500)
    try:
        with pytest.raises(QuotaClientError):
            client.alter([Change(ALICE, P, 1024.0)])
        wait_until(lambda: "reset" in ends, 10, what="the connection reset")
    finally:
        client.close()
        server.close()
