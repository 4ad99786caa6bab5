"""Produce quotas (KIP-13/55/219) and SASL/PLAIN identities: Kafka's own test cases on a fake
clock, then what only devcluster has (SASL users through the control API, a configured quota
plugin, the v0 handshake). What a real producer sees of quotas and SASL, asked of devcluster and of
Kafka alike, is in tests/differential."""

from __future__ import annotations

import confluent_kafka.admin as ck
import pytest
from kafka.admin import KafkaAdminClient
from kafka.protocol.admin import AlterClientQuotasRequest

from devcluster.produce_quotas import ProduceQuotas, candidates
from devkit.devcluster_wire import admin_send
from devkit.producer_load import LoadProducer
from kvq.kafka.quota_entity import QuotaEntity
from tests.clock_support import SettableClock


class Clock(SettableClock[float]):
    """Also the sleep the quota manager is given: sleeping moves the clock."""

    def __init__(self) -> None:
        super().__init__(1000.0)

    def sleep_ms(self, ms: float) -> None:
        self.now += ms / 1000


def quotas_of(table: dict) -> ProduceQuotas:
    clock = Clock()
    entities = {QuotaEntity.of(e): {"producer_byte_rate": v} for e, v in table.items()}
    manager = ProduceQuotas(lambda: entities, clock)
    manager.clock = clock
    return manager


def test_kafka_quota_violation_case():
    # ClientQuotaManagerTest.testQuotaViolation: 500 B/s for <default user, default client>.
    manager = quotas_of({(("user", None), ("client-id", None)): 500})
    for _ in range(10):
        assert manager.record("ANONYMOUS", "unknown", 400) == 0
        manager.clock.sleep_ms(1000)
    manager.clock.sleep_ms(500)
    # 400*10 + 2000 + 300 = 6300 / 10.5 s = 600 B/s; (600 - 500) / 500 x 10.5 s = 2100 ms
    assert manager.record("ANONYMOUS", "unknown", 2300) == 2100
    manager.clock.sleep_ms(2100)
    for _ in range(10):
        manager.record("ANONYMOUS", "unknown", 400)
        manager.clock.sleep_ms(1000)
    assert manager.record("ANONYMOUS", "unknown", 0) == 0  # the burst rolled out


def test_a_throttle_time_past_2_31_ms_wraps_as_kafka_narrows_it_to_an_int():
    # (rate - 1) / 1 x 10 s windows: 10 s at 150 kB/s is 1.5e9 ms, still an int: throttled.
    manager = quotas_of({(("user", None),): 1})
    assert manager.record("u", "c", 1_500_000) == round((150_000 - 1) * 10_000)
    # 10 s at 300 kB/s: 3e9 ms does not fit; Kafka's .toInt makes it negative: not throttled.
    manager = quotas_of({(("user", None),): 1})
    assert manager.record("u", "c", 3_000_000) == 0


def test_a_throttle_time_of_exactly_half_a_millisecond_rounds_up_as_java_s_math_round():
    """QuotaUtils.throttleTime rounds with Math.round (halves up), not to the even neighbour:
    50,610 bytes against a new 4,000 B/s budget are (5,061 - 4,000) / 4,000 x 10 s = 2,652.5 ms,
    which a real Kafka 4.1 broker answers as 2,653 (tests/differential/test_produce_quotas.py)."""
    manager = quotas_of({(("client-id", None),): 4000})
    assert manager.record("u", "c", 50_610) == 2653


def test_candidates_follow_kip_55_precedence():
    labels = [e.label() for e in candidates("alice", "app")]
    assert labels == [
        "user=alice,client-id=app",
        "user=alice,client-id=<default>",
        "user=alice",
        "user=<default>,client-id=app",
        "user=<default>,client-id=<default>",
        "user=<default>",
        "client-id=app",
        "client-id=<default>",
    ]


def test_who_shares_a_budget_follows_kafka_metric_tags():
    manager = quotas_of(
        {
            (("user", "alice"),): 1000,
            (("client-id", "shared"),): 2000,
            (("user", "bob"), ("client-id", None)): 3000,
        }
    )
    # A user quota is one budget for all of alice's client-ids.
    assert (manager.budget("alice", "a").user, manager.budget("alice", "b").client_id) == (
        "alice",
        "",
    )
    # A client-id quota is one budget shared by every user of that client-id.
    assert manager.budget("carol", "shared") == manager.budget("dave", "shared")
    # user + default client-id: a budget per (user, client-id).
    assert manager.budget("bob", "x").bound == 3000 and manager.budget("bob", "x").client_id == "x"
    assert manager.budget("erin", "other").bound is None
    # alice's two clients draw on one budget: together over 1000 B/s over 10 s, throttled.
    assert manager.record("alice", "a", 6000) == 0
    assert manager.record("alice", "b", 6000) > 0


def test_kafka_quota_config_precedence_case():
    # ClientQuotaManagerTest.testQuotaConfigPrecedence, on a frozen clock: `value` x 11 recorded,
    # throttled when that over Kafka's 10 s minimum window exceeds the bound.
    clock = Clock()
    table: dict = {}

    def put(entity, bound):
        entity = QuotaEntity.of(entity)
        if bound is None:
            table.pop(entity, None)
        else:
            table[entity] = {"producer_byte_rate": bound}

    manager = ProduceQuotas(lambda: dict(table), clock)

    def check(user, client, bound, value, throttled):
        assert manager.budget(user, client).bound == bound, (user, client)
        assert (manager.record(user, client, value * 11) > 0) == throttled, (user, client, value)

    U, C = "user", "client-id"
    put([(U, None)], 1000)
    put([(C, None)], 2000)
    put([(U, None), (C, None)], 3000)
    put([(U, "userA")], 4000)
    put([(U, "userA"), (C, "client1")], 5000)
    put([(U, "userB")], 6000)
    put([(U, "userB"), (C, "client1")], 7000)
    put([(U, "userB"), (C, None)], 8000)
    put([(U, "userC")], 10000)
    put([(C, "client1")], 9000)
    check("userA", "client1", 5000, 4500, False)  # <user, client> over <user>
    check("userA", "client2", 4000, 4500, True)  # <user> over <client> and defaults
    check("userA", "client3", 4000, 0, True)  # <user> shared across the user's clients
    check("userA", "client1", 5000, 0, False)  # <user, client> is its own budget
    check("userB", "client1", 7000, 8000, True)
    check("userB", "client2", 8000, 7000, False)  # default client of userB: per client
    check("userB", "client3", 8000, 7000, False)
    check("userD", "client1", 3000, 3500, True)  # default <user, client>
    check("userD", "client2", 3000, 2500, False)
    check("userE", "client1", 3000, 2500, False)
    put([(U, None), (C, None)], None)
    check("userD", "client1", 1000, 0, False)  # the budget changed: a new counter
    check("userE", "client4", 1000, 1500, True)
    check("userF", "client4", 1000, 800, False)  # default <user> shared across the user's clients
    check("userF", "client5", 1000, 800, True)
    put([(U, None)], None)
    check("userF", "client4", 2000, 0, False)  # default <client-id>: per client-id, all users
    check("userF", "client5", 2000, 0, False)
    check("userF", "client5", 2000, 2500, True)
    check("userG", "client5", 2000, 0, True)
    put([(U, "userA")], 8000)
    put([(U, "userA"), (C, "client1")], 10000)
    check("userA", "client2", 8000, 0, False)
    check("userA", "client2", 8000, 4500, True)  # the new value plus what was recorded before
    check("userA", "client1", 10000, 0, False)
    check("userA", "client1", 10000, 6000, True)
    put([(U, "userA"), (C, "client1")], None)
    check("userA", "client6", 8000, 0, True)  # the shared user budget
    put([(U, "userA"), (C, "client6")], 11000)
    check("userA", "client6", 11000, 8500, False)
    put([(U, "userA"), (C, None)], 12000)
    put([(U, "userA"), (C, "client6")], None)
    check("userA", "client6", 12000, 4000, True)  # the new value plus what was recorded before


def test_a_quota_change_applies_to_existing_budgets_from_the_next_request():
    """A Kafka broker hands each committed quota change to its quota managers as it applies the
    metadata delta that DescribeClientQuotas reads too: once a describe shows the change, the
    next request is measured against it (the budget keeps what it recorded)."""
    clock = Clock()
    table = {QuotaEntity.user("alice"): {"producer_byte_rate": 1e9}}
    generation = [0]
    manager = ProduceQuotas(lambda: dict(table), clock, version=lambda: generation[0])
    assert manager.record("alice", "c", 50_000) == 0
    table[QuotaEntity.user("alice")] = {"producer_byte_rate": 1000}
    generation[0] += 1
    assert manager.record("alice", "c", 1) == round((50_001 / 10 - 1000) / 1000 * 10_000)
    table[QuotaEntity.user("alice")] = {"producer_byte_rate": 1e9}  # not applied: no new version
    assert manager.record("alice", "c", 1) > 0


# ---- real producers ---------------------------------------------------------------------------

pytestmark = pytest.mark.integration
USERS = {"alice": "alice-secret", "bob": "bob-secret"}


@pytest.fixture
def dc(devcluster):
    cluster = devcluster(brokers=1, log_dirs_per_broker=1, sasl_users=dict(USERS))
    admin = ck.AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 0})
    admin.create_topics([ck.NewTopic("q", 1, 1)])["q"].result(10)
    return cluster


def set_quota(dc, entity: dict, rate: float | None) -> None:
    E = AlterClientQuotasRequest.EntryData
    ops = [E.OpData(key="producer_byte_rate", value=rate or 0.0, remove=rate is None)]
    entry = E(
        entity=[E.EntityData(entity_type=t, entity_name=n) for t, n in entity.items()], ops=ops
    )
    admin = KafkaAdminClient(bootstrap_servers=dc.bootstrap, request_timeout_ms=5000)
    try:
        resp = admin_send(
            admin, AlterClientQuotasRequest(version=1, entries=[entry], validate_only=False), 0
        )
    finally:
        admin.close()
    assert [e.error_code for e in resp.entries] == [0]


def test_sasl_users_from_the_control_api_and_kafka_python(dc):
    from kafka import KafkaProducer

    from devcluster.control_client import ControlClient, ControlClientError

    control = ControlClient(dc.control_url)
    assert control.set_sasl_user("carol", "carol-secret") == ["alice", "bob", "carol"]
    producer = KafkaProducer(
        bootstrap_servers=dc.sasl_bootstrap,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_plain_username="carol",
        sasl_plain_password="carol-secret",
    )
    try:
        assert producer.send("q", b"from carol").get(10).offset == 0
    finally:
        producer.close(5)
    assert control.remove_sasl_user("carol") == ["alice", "bob"]
    assert "secret" not in str(control.state())
    with pytest.raises(ControlClientError) as info:
        control.remove_sasl_user("carol")
    assert info.value.status == 404


def test_a_broker_running_a_quota_plugin_ignores_client_quotas(devcluster):
    cluster = devcluster(
        brokers=1,
        log_dirs_per_broker=1,
        client_quota_callback_class="io.strimzi.kafka.quotas.StaticQuotaCallback",
    )
    admin = ck.AdminClient({"bootstrap.servers": cluster.bootstrap})  # kept until the result
    admin.create_topics([ck.NewTopic("p", 1, 1)])["p"].result(10)
    set_quota(cluster, {"user": None}, 1000)
    producer = LoadProducer(cluster.bootstrap)
    try:
        producer.send_for("p", 1.0)
        assert producer.producer.flush(10) == 0
    finally:
        producer.close()
    assert producer.log.acked_bytes() > 20_000 and not producer.log.throttles


def sasl_address(dc) -> tuple[str, int]:
    return "127.0.0.1", dc.brokers[0].sasl_port


def test_a_v0_handshake_takes_the_raw_token_in_a_bare_frame(dc):
    import socket
    import struct

    from kafka.protocol.metadata import MetadataRequest, MetadataResponse
    from kafka.protocol.sasl import SaslHandshakeRequest

    from devkit.devcluster_wire import read_frame

    with socket.create_connection(sasl_address(dc), timeout=10) as sock:
        handshake = SaslHandshakeRequest(version=0, mechanism="PLAIN")
        handshake.with_header(correlation_id=1, client_id="raw")
        sock.sendall(bytes(handshake.encode(header=True, framed=True)))
        read_frame(sock)
        token = b"\0bob\0bob-secret"
        sock.sendall(struct.pack(">i", len(token)) + token)
        assert sock.recv(4) == b"\0\0\0\0"  # an empty server token: authenticated
        request = MetadataRequest(version=12, topics=None)
        request.with_header(correlation_id=2, client_id="raw")
        sock.sendall(bytes(request.encode(header=True, framed=True)))
        resp = MetadataResponse.decode(read_frame(sock), version=12, header=True)
    assert [b.port for b in resp.brokers] == [dc.brokers[0].sasl_port]
