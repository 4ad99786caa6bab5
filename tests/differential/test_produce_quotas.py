"""Produce quotas as a broker enforces them, on devcluster and on real Kafka alike.

Kafka's arithmetic (ClientQuotaManager, QuotaUtils.throttleTime, Rate over SampledStat, with
`quota.window.num` 11 and `quota.window.size.seconds` 1): a budget's rate is the bytes recorded in
its samples over the window, the window being the time since the oldest sample began but at least
10 s (10 full samples assumed while there are fewer). A new budget (a new client-id here) whose
first request is S bytes therefore measures S / 10 s, and a request over the quota Q gets
`throttle_time_ms = round((S / 10 - Q) / Q x 10,000)` (the excess over the quota times the
window) in its response, while the broker mutes the channel for that long (KIP-219). Each test
uses a client-id of its own: a fresh budget on Kafka's shared cluster.
"""

from __future__ import annotations

import math
import time

import pytest

from devkit.devcluster_wire import WireConnection
from devkit.kafka_cluster import ADMIN, DEFAULT_USERS
from devkit.producer_load import LoadProducer
from tests.differential.backends import (
    produce_request,
    record_batch,
    sasl_connection,
    set_quota_seen_by,
    unique,
)

pytestmark = pytest.mark.integration

PRODUCER = "producer_byte_rate"
WINDOW_MS = 10_000
"""The window of a budget younger than 10 s: (quota.window.num - 1) x 1 s."""
MUTE_SLACK_S = 0.05
"""The broker mutes the channel from the moment it hands the response over; the client reads it a
little later, so the next answer may arrive that much less than the throttle time after it."""


def throttle_of_a_first_request(size: int, quota: float) -> int:
    """QuotaUtils.throttleTime for a new budget's first request of `size` bytes: Java's
    Math.round, halves up (Python's round() takes 2652.5 to 2652, Kafka answers 2653)."""
    return math.floor((size / (WINDOW_MS / 1000) - quota) / quota * WINDOW_MS + 0.5)


def test_the_throttle_time_is_the_excess_over_the_quota_times_the_window_and_mutes_the_channel(
    backend, admin, leader, topic
):
    quota = 10_000
    client = unique("throttled")
    set_quota_seen_by(admin, leader, (("client-id", client),), {PRODUCER: quota})
    with WireConnection(backend.address(leader), client_id=client) as connection:
        size = connection.send(produce_request(topic, 0, record_batch(120, 1000)))
        connection.send(produce_request(topic, 0, record_batch(1, 100)))  # pipelined behind it
        first, first_at = connection.receive()
        second, second_at = connection.receive()
    expected = throttle_of_a_first_request(size, quota)
    assert 1500 < expected < 2500  # 120 kB over 10 s at 10 kB/s: about 2 s
    assert first.throttle_time_ms == expected
    # The channel stayed muted for the throttle time: the next request was read only then, and
    # was throttled again (still over the quota, a little less than before).
    assert second_at - first_at >= expected / 1000 - MUTE_SLACK_S
    assert 0 < second.throttle_time_ms < expected


def test_raising_a_quota_reaches_a_connected_client_but_does_not_unmute_its_channel(
    backend, admin, leader, topic
):
    quota = 10_000
    client = unique("raised")
    entity = (("client-id", client),)
    set_quota_seen_by(admin, leader, entity, {PRODUCER: quota})
    with WireConnection(backend.address(leader), client_id=client) as connection:
        size = connection.send(produce_request(topic, 0, record_batch(130, 1000)))
        first, first_at = connection.receive()
        assert first.throttle_time_ms == throttle_of_a_first_request(size, quota)
        unmuted_at = first_at + first.throttle_time_ms / 1000
        set_quota_seen_by(admin, leader, entity, {PRODUCER: 1e9})
        assert time.monotonic() < unmuted_at - 0.5, "the quota change took most of the mute"
        connection.send(produce_request(topic, 0, record_batch(1, 100)))
        second, second_at = connection.receive()
    assert second_at >= unmuted_at - MUTE_SLACK_S  # still muted for the old throttle time
    assert second.throttle_time_ms == 0  # ... but measured against the new quota


def test_a_streaming_producer_gets_about_the_quota_over_the_window(backend, admin, leader, topic):
    """librdkafka offering 10x the quota for 3.5 s, over SASL as alice. A new budget may spend
    10 windows' worth (Q x 10 s) before its first throttle; from then on each request is muted
    until the rate over the window (10 s + the current sample's age, under 11 s) is back at Q.
    So what is acknowledged lies between 10 x Q (less the request overhead: 1 kB values in
    batches, a few %) and 11 x Q plus what was in flight at the first throttle (the producer's
    64 kB buffer) and at most as much again in requests the broker read before it muted the
    connection (real Kafka under a loaded machine acknowledged 11 x Q + 82 kB once)."""
    quota = 100_000
    client = unique("stream")
    set_quota_seen_by(admin, leader, (("user", "alice"), ("client-id", client)), {PRODUCER: quota})
    producer = LoadProducer(
        backend.sasl_bootstrap,
        client_id=client,
        user="alice",
        password=DEFAULT_USERS["alice"],
        **{"queue.buffering.max.kbytes": 64},
    )
    try:
        start = time.monotonic()
        producer.run_steady([topic], rate=10 * quota)
        time.sleep(3.5)  # the measurement period itself, not a wait for a condition
        acked = producer.log.acked_bytes()
    finally:
        producer.close()
    assert 0.95 * 10 * quota <= acked <= 11 * quota + 2 * 64 * 1024, acked
    assert producer.log.throttles and all(at > start for at, _ in producer.log.throttles)
    assert not producer.log.errors


def test_a_quota_set_while_a_producer_streams_throttles_it_within_a_second(
    backend, admin, leader, topic
):
    client = unique("steady")
    producer = LoadProducer(backend.bootstrap, client_id=client)  # PLAINTEXT: User:ANONYMOUS
    try:
        producer.run_steady([topic], rate=300_000)
        deadline = time.monotonic() + 10
        while producer.log.acked_bytes() < 300_000 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not producer.log.throttles
        set_quota_seen_by(admin, leader, (("client-id", client),), {PRODUCER: 20_000})
        changed = time.monotonic()
        deadline = changed + 5
        while not producer.log.throttles and time.monotonic() < deadline:
            time.sleep(0.02)
        assert producer.log.throttles, "never throttled after the quota change"
        first = producer.log.throttles[0][0]
        assert first - changed < 1.5  # the broker's refresh, plus librdkafka's next request
    finally:
        producer.close()


def test_the_most_specific_quota_applies_defaults_included(backend, admin, leader, topic):
    """KIP-55 precedence, seen through the exact throttle time of a first request (each step
    measures a budget no earlier step recorded into): <user, client-id> over <user> over
    <default user> over <client-id>. 50 kB is over every quota's 10 s allowance."""
    client = unique("precedence")
    steps = [
        ("alice", (("user", "alice"), ("client-id", client)), 1000),  # budget (alice, client)
        ("alice", (("user", "alice"),), 2000),  # budget (alice)
        ("bob", (("user", None),), 3000),  # budget (bob): the default user's quota
        ("bob", (("client-id", client),), 4000),  # budget (client): any user of this client-id
    ]
    for _, pairs, quota in steps:
        set_quota_seen_by(admin, leader, pairs, {PRODUCER: quota})
    records = record_batch(50, 1000)
    for index, (user, pairs, quota) in enumerate(steps):
        with sasl_connection(backend, leader, user, client) as connection:
            size = connection.send(produce_request(topic, 0, records))
            answer, _ = connection.receive()
        assert answer.throttle_time_ms == throttle_of_a_first_request(size, quota), pairs
        if index in (0, 2):  # the next step falls through to the next level
            set_quota_seen_by(admin, leader, pairs, {PRODUCER: None})


@pytest.mark.parametrize(
    ("standing", "user"), [(True, "bob"), (False, ADMIN)], ids=["standing-default", "new-default"]
)
def test_a_throttle_of_a_standing_default_user_quota_counts_the_bytes_sent_before_it(
    backend, admin, leader, topic, standing, user
):
    """What the enforcer's throttle of `user=<default>` (to its 8 KiB/s floor) meets: with a
    standing default-user quota (docs/reaction-time.md), the user's budget is (user) all along
    and already holds the 100 kB sent, so the next request is throttled at once; without it, the
    new entity moves the user from the client-id's budget to a new (user) budget that has
    recorded nothing, and a small request passes (Kafka's ClientQuotaManager names budgets by the
    entity that applies, DefaultQuotaCallback.quotaMetricTags). The variant without sends as the
    admin user, whom no other test produces as: Kafka's cluster is shared, and a (user) budget
    keeps what it recorded for 11 s."""
    client = unique("standing" if standing else "new-default")
    set_quota_seen_by(admin, leader, (("client-id", client),), {PRODUCER: 10_000_000})
    if standing:
        set_quota_seen_by(admin, leader, (("user", None),), {PRODUCER: 10_000_000})
    with sasl_connection(backend, leader, user, client) as connection:
        connection.send(produce_request(topic, 0, record_batch(100, 1000)))
        before, _ = connection.receive()
        assert before.throttle_time_ms == 0  # 100 kB over 10 s against 10 MB/s
        set_quota_seen_by(admin, leader, (("user", None),), {PRODUCER: 8192})  # the throttle
        connection.send(produce_request(topic, 0, record_batch(1, 1000)))
        after, _ = connection.receive()
    if standing:
        assert after.throttle_time_ms > 0  # 101 kB over 10 s against 8 KiB/s
    else:
        assert after.throttle_time_ms == 0  # 1 kB over 10 s
