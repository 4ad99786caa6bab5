"""LoadProducer's record of librdkafka's connections: what tells a producer that waited on its
connections (a request timed out, a reconnect) from one a quota slowed."""

from __future__ import annotations

import time

import confluent_kafka.admin as ck
import pytest

from devcluster.control_client import ControlClient
from devkit.processes import wait_until
from devkit.producer_load import DeliveryLog, LoadProducer, Transport, TransportTally

TOPIC = "transport"


def counted(producer: LoadProducer, since: float) -> Transport | None:
    """The counters' growth since `since`, serving librdkafka's callbacks first (as an
    application's poll loop does; the statistics come through them)."""
    producer.producer.poll(0.05)
    return producer.transport_between(since, time.monotonic())


@pytest.mark.integration
def test_statistics_count_the_requests_that_timed_out_and_the_reconnects(devcluster):
    dc = devcluster(brokers=1, log_dirs_per_broker=1)
    admin = ck.AdminClient({"bootstrap.servers": dc.bootstrap, "log_level": 0})
    admin.create_topics([ck.NewTopic(TOPIC, 1, 1)])[TOPIC].result(10)
    control = ControlClient(dc.control_url)
    producer = LoadProducer(dc.bootstrap, stats_seconds=0.1, **{"socket.timeout.ms": 1000})
    try:
        producer.send(TOPIC, b"before")
        assert producer.producer.flush(30) == 0
        calm = wait_until(lambda: counted(producer, 0), 30, what="statistics")
        assert calm.connects >= 1 and calm.request_timeouts == 0

        control.set_faults(0, latency_ms=3000)  # every answer later than librdkafka waits for one
        slow_from = time.monotonic()
        producer.send(TOPIC, b"late")
        timed_out = wait_until(
            lambda: (t := counted(producer, slow_from)) and t.request_timeouts >= 1 and t,
            30,
            what="a produce request timed out",
        )
        control.set_faults(0, latency_ms=0)
        assert producer.producer.flush(30) == 0
        healed = counted(producer, slow_from)
        assert healed is not None and healed.connects >= 1, healed  # it reconnected to send it
        assert timed_out.request_timeouts >= 1
        assert producer.log.errors == {}  # retried, not lost
    finally:
        producer.close()


def test_growth_is_taken_between_two_readings_and_what_is_held_is_the_latest():
    earlier = Transport(connects=2, disconnects=1, request_timeouts=3, retries=4, queued=9)
    later = Transport(connects=5, disconnects=2, request_timeouts=3, retries=10, queued=1)
    assert later.since(earlier) == Transport(3, 1, 0, 6, queued=1)


def broker(node: int, connects: int, timeouts: int = 0) -> dict:
    return {"nodeid": node, "connects": connects, "disconnects": 0, "req_timeouts": timeouts}


def test_a_broker_dropped_and_learned_again_keeps_its_counts_in_the_tally():
    tally = TransportTally()
    tally.take({"brokers": {"b/bootstrap": broker(-1, 1), "b/0": broker(0, 1)}})
    tally.take({"brokers": {"b/0": broker(0, 3, timeouts=1)}})
    dropped = tally.take({"brokers": {"b/bootstrap": broker(-1, 1)}, "msg_cnt": 7})
    assert dropped == Transport(connects=4, request_timeouts=1, rebootstraps=1, queued=7)
    again = tally.take({"brokers": {"b/0": broker(0, 1)}})  # a new broker object: from zero
    assert again.connects == 5 and again.rebootstraps == 1


def paced(start: float, period: float, bursts: int, burst_bytes: int) -> DeliveryLog:
    """A producer held to a quota: each burst is one request's 64 messages, acknowledged within
    a few milliseconds."""
    log = DeliveryLog()
    for k in range(bursts):
        at = start + k * period
        log.acked.extend((at + i * 0.0001, burst_bytes // 64) for i in range(64))
    return log


def test_a_paced_rate_counts_whole_requests_wherever_the_window_falls():
    # 65,536 B every 11 s (5,958 B/s): a window of 60 s holds 5 or 6 requests, +-10 % of that
    log = paced(0.3, 11.0, 10, 65_536)
    for start in (0.0, 2.0, 5.0, 10.0):
        assert log.paced_rate(start, start + 60.0) == pytest.approx(65_536 / 11.0, rel=1e-3)
    assert log.rate(0.0, 60.0) == pytest.approx(6 * 65_536 / 60.0)  # what the edges add


def test_a_paced_rate_of_one_burst_or_a_steady_stream_is_the_plain_rate():
    one = paced(1.0, 11.0, 1, 65_536)
    assert one.paced_rate(0.0, 10.0) == one.rate(0.0, 10.0) == 6553.6
    steady = DeliveryLog(acked=[(k * 0.01, 300) for k in range(1000)])
    assert steady.paced_rate(0.0, 5.0) == steady.rate(0.0, 5.0) == pytest.approx(30_000)
