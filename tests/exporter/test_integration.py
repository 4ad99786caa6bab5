"""The exporter against devcluster over TCP (real kafka-python connections, real log dirs) and
against real Apache Kafka: the run's shared 3-node cluster for a poll, a 1-node cluster of its own
with a small tmpfs that a producer fills past the limit."""

from __future__ import annotations

import json
import logging
import os
import re
import time
import uuid
from pathlib import Path

import pytest
import requests
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from devcluster.cluster import DevCluster
from devkit.kafka_cluster import KafkaCluster, kafka_admin_settings
from devkit.processes import wait_until
from devkit.producer_load import LoadProducer
from exporter.exporter_app import Exporter
from exporter.scrape_phase import KEEP
from exporter.settings import ExporterSettings
from kvq.kafka.client_settings import librdkafka_config
from kvq.model.observation import STAGE_DESCRIBE_LOG_DIRS
from kvq.model.retention_forecast import AHEAD_SECONDS
from tests.kafka_support import CHECKPOINT_SLACK, usable_bytes

P = "client.quota.callback.static."
CAPACITY = 10_000_000


@pytest.fixture
def cluster(tmp_path):
    with DevCluster(
        brokers=3, log_dirs_per_broker=2, data_dir=tmp_path / "data", capacity_bytes=CAPACITY
    ) as dc:
        yield dc


def make_exporter(cluster, **props):
    """An exporter of devcluster `cluster`, or of a real Kafka cluster (SASL as the super user)."""
    if isinstance(cluster, KafkaCluster):
        reach = kafka_admin_settings(cluster.admin_properties)
    else:
        reach = {P + "kafka.admin.bootstrap.servers": cluster.bootstrap}
    settings = {
        **reach,
        P + "storage.per.volume.limit.min.available.ratio": "0.1",
        P + "storage.check.interval": "PT1S",
        P + "throttle.factor.validity.duration": "PT3S",
        P + "throttle.factor.fallback": "0.0",
        "kvq.exporter.listen": "127.0.0.1:0",
        "kvq.exporter.request.timeout": "PT2S",
        **props,
    }
    if P + "storage.per.volume.limit.min.available.bytes" in props:
        del settings[P + "storage.per.volume.limit.min.available.ratio"]
    return Exporter(ExporterSettings.build(settings, environ={}))


@pytest.fixture
def exporters():
    started: list[Exporter] = []
    yield started
    for exporter in started:
        exporter.stop()


def control(cluster, method, path, **body):
    """Drive devcluster through its HTTP control API, as users' scripts do."""
    response = requests.request(method, cluster.control_url + path, json=body, timeout=10)
    assert response.ok, response.text
    return response.json()


def log_dir(cluster, broker, index, **fields):
    return control(cluster, "PUT", f"/brokers/{broker}/log-dirs/{index}", **fields)


def faults(cluster, broker, **fields):
    return control(cluster, "PUT", f"/brokers/{broker}/faults", **fields)


def fill_to(cluster, broker, index, available):
    """Leave exactly `available` bytes on one log dir by pinning usable bytes."""
    log_dir(cluster, broker, index, usable_bytes=available)


def test_healthy_cluster_gives_factor_one_with_every_volume(cluster, exporters):
    exporter = make_exporter(cluster)
    exporters.append(exporter)
    observation = exporter.poller.poll_once()
    assert observation.succeeded, observation.error
    status = exporter.status()
    assert status["throttle_factor"] == 1.0 and status["state"] == "valid"
    assert status["active_brokers"] == 3 and status["active_log_dirs"] == 6
    assert all(d.total_bytes == CAPACITY for d in observation.log_dirs)


def test_a_log_dir_below_the_ratio_limit_throttles_within_one_interval(cluster, exporters):
    exporter = make_exporter(cluster)
    exporters.append(exporter)
    server = exporter.start()
    wait_until(exporter.poller.ready.is_set, what="first observation")
    assert exporter.status()["throttle_factor"] == 1.0
    log_dir(cluster, 1, 0, fill_bytes=CAPACITY - 500_000)  # a real file: 5 % left
    filled_at = time.monotonic()
    wait_until(lambda: exporter.status()["throttle_factor"] == 0.0, timeout=5, what="throttle")
    assert time.monotonic() - filled_at < 3.0  # one 1 s interval plus a poll, with slack
    (violating,) = exporter.status()["violating_volumes"]
    assert violating["broker_id"] == 1 and violating["log_dir"].endswith("logdir-0")
    assert violating["available_ratio"] <= 0.1
    assert server.url.startswith("http://127.0.0.1:")


def test_while_a_volume_violates_it_polls_every_violation_interval_so_freed_space_lifts_it(
    cluster, exporters
):
    exporter = make_exporter(
        cluster,
        **{
            P + "storage.check.interval": "PT6S",
            P + "throttle.factor.validity.duration": "PT1M",
            "kvq.exporter.violation.check.interval": "PT0.5S",
        },
    )
    exporters.append(exporter)
    exporter.start()
    wait_until(exporter.poller.ready.is_set, what="first observation")
    log_dir(cluster, 1, 0, fill_bytes=CAPACITY - 500_000)  # 5 % left: below the limit
    wait_until(lambda: exporter.status()["throttle_factor"] == 0.0, timeout=10, what="throttle")
    polls = exporter.throttle.state.observations_total
    wait_until(  # 4 more within 5 s: every 0.5 s, not every 6 s
        lambda: exporter.throttle.state.observations_total - polls >= 4,
        timeout=5,
        what="polls every 0.5 s",
    )
    log_dir(cluster, 1, 0, clear=True)  # the operator freed the space
    freed_at = time.monotonic()
    wait_until(lambda: exporter.status()["throttle_factor"] == 1.0, timeout=10, what="lifted")
    assert time.monotonic() - freed_at < 2.0  # the next 0.5 s poll, not the next 6 s one
    polls = exporter.throttle.state.observations_total
    time.sleep(3)
    assert exporter.throttle.state.observations_total - polls <= 1  # no violation: every 6 s


def test_while_graceful_slowdown_throttles_it_checks_between_polls_so_freed_space_lifts_it(
    cluster, exporters
):
    """Throttled long before the limit, the exporter checks every violation interval between
    its polls: a check showing only the throttled volume as it was is dropped (the policy's
    readings stay a poll apart), the one showing the volume grown is taken in and lifts the
    throttle within a check, not at the next poll; the checks go on after the lift, and one
    showing another volume filling fast is taken in too. On the totals alone: with the
    partitions' sizes read, a check is not taken in for a volume filling fast (the next poll's
    level reads the growth)."""
    exporter = make_exporter(
        cluster,
        **{
            P + "storage.check.interval": "PT3S",
            P + "throttle.factor.validity.duration": "PT1M",
            "kvq.exporter.violation.check.interval": "PT0.25S",
            "kvq.throttle.policy": "graceful-slowdown",
            "kvq.throttle.slowdown.horizon": "PT20S",
            "kvq.throttle.slowdown.partition.sizes": "false",
        },
    )
    exporters.append(exporter)
    available = 4_000_000  # the limit is 1 MB (10 % of 10 MB)
    fill_to(cluster, 1, 0, available)
    exporter.start()
    wait_until(exporter.poller.ready.is_set, what="first observation")
    while exporter.status()["throttle_factor"] > 0.75:  # 600 kB a poll: 200 kB/s, too fast
        polls = exporter.throttle.state.observations_total
        available -= 600_000
        assert available > 1_000_000, "not throttled before the limit"
        fill_to(cluster, 1, 0, available)
        wait_until(
            lambda p=polls: exporter.throttle.state.observations_total > p,
            timeout=10,
            what="the next poll",
        )
    polls, observed = exporter.throttle.state.observations_total, observations(exporter)
    wait_until(  # the fill stopped: checks every 0.25 s, each dropped, then the next poll
        lambda: exporter.throttle.state.observations_total > polls, timeout=10, what="a poll"
    )
    assert exporter.throttle.state.observations_total == polls + 1
    assert observations(exporter) - observed >= 6  # the poll and the checks before it
    assert exporter.status()["throttle_factor"] < 1.0  # the peak fill rate holds the throttle
    log_dir(cluster, 1, 0, usable_bytes=9_000_000)  # space freed just after a poll
    freed_at = time.monotonic()
    wait_until(lambda: exporter.status()["throttle_factor"] == 1.0, timeout=10, what="lifted")
    assert time.monotonic() - freed_at < 1.5  # a 0.25 s check, not the next 3 s poll
    # the load the throttle held comes back on another volume: checks go on after the lift,
    # and one showing it closing on its limit fast is taken in at once
    polls = exporter.throttle.state.observations_total
    fill_to(cluster, 2, 0, 5_000_000)
    stepped_at = time.monotonic()
    wait_until(
        lambda: exporter.throttle.state.observations_total > polls, timeout=10, what="taken in"
    )
    assert time.monotonic() - stepped_at < 1.5  # a check, not the next poll 3 s after the lift


def observations(exporter) -> float:
    """Polls and checks alike: the count of `kafka_volume_quota_poll_duration_seconds`."""
    text = exporter.render_metrics().decode()
    (count,) = re.findall(
        r"^kafka_volume_quota_poll_duration_seconds_count\{.*\} (\S+)$", text, re.M
    )
    return float(count)


def test_limit_violated_counts_violating_volumes_per_poll_bytes_limit(cluster, exporters):
    exporter = make_exporter(
        cluster, **{P + "storage.per.volume.limit.min.available.bytes": "1000"}
    )
    exporters.append(exporter)
    fill_to(cluster, 0, 0, 1000)  # at the limit: violates
    fill_to(cluster, 2, 1, 999)  # below: violates
    fill_to(cluster, 1, 1, 1001)  # just above: fine
    exporter.poller.poll_once()
    exporter.poller.poll_once()
    status = exporter.status()
    assert status["throttle_factor"] == 0.0
    assert status["counters"]["limit_violated"] == 4
    assert {(v["broker_id"], v["available_bytes"]) for v in status["violating_volumes"]} == {
        (0, 1000),
        (2, 999),
    }
    log_dir(cluster, 0, 0, usable_bytes=None)
    log_dir(cluster, 2, 1, usable_bytes=None)
    exporter.poller.poll_once()
    assert exporter.status()["throttle_factor"] == 1.0
    assert exporter.status()["counters"]["limit_violated"] == 4


def test_the_proposals_validity_example_fallback_after_expiry_once_then_recovery(
    cluster, exporters
):
    exporter = make_exporter(cluster)  # validity PT3S, fallback 0.0
    exporters.append(exporter)
    assert exporter.poller.poll_once().succeeded
    succeeded_at = time.time()
    faults(cluster, 2, fail_describe_log_dirs=True)
    failed = exporter.poller.poll_once()
    assert failed.failure_stage == STAGE_DESCRIBE_LOG_DIRS and "broker 2" in failed.error
    assert exporter.status()["throttle_factor"] == 1.0  # still valid
    wait_until(lambda: time.time() > succeeded_at + 3.2, what="validity to pass")
    exporter.poller.poll_once()
    exporter.poller.poll_once()
    status = exporter.status()
    assert (status["throttle_factor"], status["state"]) == (0.0, "fallback")
    assert status["counters"]["fallback_throttle_factor_applied"] == 1
    assert status["last_error"]["stage"] == STAGE_DESCRIBE_LOG_DIRS
    faults(cluster, 2, clear=True)
    assert exporter.poller.poll_once().succeeded
    status = exporter.status()
    assert (status["throttle_factor"], status["state"]) == (1.0, "valid")
    assert status["counters"]["fallback_throttle_factor_applied"] == 1


def test_broker_leaving_between_the_two_calls_fails_the_poll_then_is_cached(cluster, exporters):
    exporter = make_exporter(cluster)
    exporters.append(exporter)
    fill_to(cluster, 2, 0, 1000)  # broker 2 is full when it leaves
    assert exporter.poller.poll_once().succeeded
    assert exporter.status()["throttle_factor"] == 0.0
    faults(cluster, 2, leave_before_describe_log_dirs=True)
    failed = exporter.poller.poll_once()
    assert failed.failure_stage == STAGE_DESCRIBE_LOG_DIRS, failed.error
    assert 2 in failed.active_brokers and "broker 2" in failed.error
    after = exporter.poller.poll_once()
    assert after.succeeded and after.active_brokers == (0, 1)
    status = exporter.status()
    assert status["throttle_factor"] == 0.0  # broker 2's last seen full volume still counts
    assert {c["broker_id"] for c in status["cached_log_dirs"]} == {2}


def test_slow_broker_beyond_the_timeout_fails_the_poll_in_about_the_timeout(cluster, exporters):
    """The slow broker is the one DescribeCluster went to last (and would go to first): another
    broker answers DescribeCluster in time, and only the slow one's DescribeLogDirs fails."""
    exporter = make_exporter(cluster, **{"kvq.exporter.request.timeout": "PT1S"})
    exporters.append(exporter)
    assert exporter.poller.poll_once().succeeded
    slow = exporter.client._session.answered_last
    fast = sorted({0, 1, 2} - {slow})
    faults(cluster, slow, latency_ms=6000)
    started = time.monotonic()
    failed = exporter.poller.poll_once()
    elapsed = time.monotonic() - started
    assert not failed.succeeded
    assert failed.failure_stage == STAGE_DESCRIBE_LOG_DIRS, failed.error
    assert f"broker {slow}" in failed.error
    assert not any(f"broker {b}" in failed.error for b in fast)
    # the 1 s timeout ended the poll, not the 6 s broker
    assert elapsed < 4.5, f"poll took {elapsed:.2f}s: the slow broker held it up"


def test_log_dir_error_and_pre_kip827_broker_are_unusable_not_violating(cluster, exporters):
    exporter = make_exporter(cluster)
    exporters.append(exporter)
    faults(cluster, 0, log_dir_error={"index": 1, "code": 56})
    faults(cluster, 2, max_describe_log_dirs_version=3)
    observation = exporter.poller.poll_once()
    assert observation.succeeded, observation.error
    status = exporter.status()
    assert status["throttle_factor"] == 1.0
    reasons = sorted((d["broker_id"], d["reason"]) for d in status["unusable_log_dirs"])
    assert reasons == [(0, "error"), (2, "unknown_size"), (2, "unknown_size")]
    assert status["active_log_dirs"] == 3


def test_mixed_versions_each_broker_is_asked_at_its_own_version(cluster, exporters):
    """Bootstrapping from a pre-KIP-827 broker must not blind the exporter to the others."""
    old_broker = f"127.0.0.1:{cluster.broker_ports[0]}"
    exporter = make_exporter(cluster, **{P + "kafka.admin.bootstrap.servers": old_broker})
    exporters.append(exporter)
    faults(cluster, 0, max_describe_log_dirs_version=3)
    fill_to(cluster, 1, 0, 1000)
    observation = exporter.poller.poll_once()
    assert observation.succeeded, observation.error
    status = exporter.status()
    assert status["throttle_factor"] == 0.0
    assert [v["broker_id"] for v in status["violating_volumes"]] == [1]
    assert {d["broker_id"] for d in status["unusable_log_dirs"]} == {0}


def test_a_broker_joining_later_is_found_by_refreshing_the_metadata(cluster, exporters):
    exporter = make_exporter(cluster)
    exporters.append(exporter)
    control(cluster, "POST", "/brokers/2/stop")
    first = exporter.poller.poll_once()
    assert first.succeeded and first.active_brokers == (0, 1), first.error
    control(cluster, "POST", "/brokers/2/start")
    polls = []
    wait_until(
        lambda: polls.append(exporter.poller.poll_once()) or polls[-1].active_brokers == (0, 1, 2),
        what="broker 2 in the active set",
    )
    joined = polls[-1]  # the first poll that sees broker 2 already describes its log dirs
    assert joined.succeeded, joined.error
    assert {d.broker_id for d in joined.log_dirs} == {0, 1, 2}


def _connections_to(ports: set[int]) -> int:
    """This process's TCP sockets connected to one of `ports` on loopback."""
    own = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except FileNotFoundError:  # closed meanwhile (the listing's own fd, say)
            continue
        if target.startswith("socket:["):
            own.add(target[len("socket:[") : -1])
    count = 0
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        remote_port = int(fields[2].split(":")[1], 16)
        if remote_port in ports and fields[9] in own and fields[3] == "01":  # ESTABLISHED
            count += 1
    return count


def test_stop_closes_every_connection_to_the_cluster(cluster):
    """A stopped exporter leaves no client connected to (or reconnecting to) the brokers."""
    ports = set(cluster.broker_ports.values())
    exporter = make_exporter(cluster)
    try:
        assert exporter.poller.poll_once().succeeded
        assert _connections_to(ports) >= 3  # DescribeLogDirs went to every broker
    finally:
        exporter.stop()
    assert _connections_to(ports) == 0


def test_a_full_broker_that_stops_keeps_the_throttle_until_back_or_the_hold_expires_loudly(
    cluster, exporters
):
    """Strimzi plugin issue #40: validity PT3S, hold PT6S; broker 2 is full and stops."""
    exporter = make_exporter(cluster, **{"kvq.departed.broker.violation.hold": "PT6S"})
    exporters.append(exporter)
    fill_to(cluster, 2, 0, 1000)
    assert exporter.poller.poll_once().succeeded
    seen_at = time.time()
    control(cluster, "POST", "/brokers/2/stop")
    wait_until(lambda: time.time() > seen_at + 3.2, what="validity to pass")
    assert exporter.poller.poll_once().active_brokers == (0, 1)
    status = exporter.status()
    assert status["throttle_factor"] == 0.0  # held: the full disk still counts
    assert [(h["broker_id"], h["log_dir"]) for h in status["held_log_dirs"]] == [
        (2, str(cluster.log_dir_path(2, 0)))
    ]
    wait_until(lambda: time.time() > seen_at + 6.2, what="hold to pass")
    assert exporter.poller.poll_once().succeeded
    status = exporter.status()
    assert status["throttle_factor"] == 1.0
    assert [e["broker_id"] for e in status["violation_hold_expired"]] == [2]
    metrics = exporter.render_metrics().decode()
    assert 'kafka_volume_quota_violation_hold_expired_log_dirs{cluster="kafka"} 1.0' in metrics
    control(cluster, "POST", "/brokers/2/start")
    wait_until(
        lambda: exporter.poller.poll_once().active_brokers == (0, 1, 2), what="broker 2 back"
    )
    status = exporter.status()
    assert status["violation_hold_expired"] == [] and status["throttle_factor"] == 0.0


def test_a_full_log_dir_that_goes_offline_keeps_the_throttle_until_seen_again_with_space(
    cluster, exporters
):
    """Kafka takes a full log dir offline (KAFKA_STORAGE_ERROR, no sizes): still violating and
    held, past the validity (PT3S), until it is described with space again. A log dir that goes
    offline with space is just unusable."""
    exporter = make_exporter(cluster)
    exporters.append(exporter)
    fill_to(cluster, 2, 0, 1000)
    assert exporter.poller.poll_once().succeeded
    seen_at = time.time()
    faults(cluster, 2, log_dir_error={"index": 0, "code": 56})
    faults(cluster, 1, log_dir_error={"index": 1, "code": 56})
    assert exporter.poller.poll_once().succeeded
    wait_until(lambda: time.time() > seen_at + 3.2, what="validity to pass")
    assert exporter.poller.poll_once().succeeded
    status = exporter.status()
    assert status["throttle_factor"] == 0.0
    full = str(cluster.log_dir_path(2, 0))
    assert [(h["broker_id"], h["log_dir"], h["offline"]) for h in status["held_log_dirs"]] == [
        (2, full, True)
    ]
    assert [(d["broker_id"], d["reason"]) for d in status["unusable_log_dirs"]] == [
        (1, "error"),
        (2, "error"),
    ]
    assert status["active_log_dirs"] == 4
    metrics = exporter.render_metrics().decode()
    assert 'kafka_volume_quota_held_log_dirs{cluster="kafka"} 1.0' in metrics
    assert per_volume(exporter, "kafka_volume_quota_log_dir_violating")[2, full] == 1.0
    faults(cluster, 2, log_dir_error={"index": 0, "code": 0})
    log_dir(cluster, 2, 0, usable_bytes=None)  # back online with space
    assert exporter.poller.poll_once().succeeded
    status = exporter.status()
    assert status["throttle_factor"] == 1.0
    assert status["held_log_dirs"] == [] and status["violation_hold_expired"] == []


def per_volume(exporter: Exporter, family: str) -> dict[tuple[int, str], float]:
    """{(broker id, log dir): value} of one per-volume metric family as /metrics serves it."""
    text = exporter.render_metrics().decode()
    (found,) = [f for f in text_string_to_metric_families(text) if f.name == family]
    return {(int(s.labels["broker_id"]), s.labels["log_dir"]): s.value for s in found.samples}


def test_one_poll_of_real_kafka_sees_every_broker_and_the_bytes_of_each_tmpfs(
    shared_kafka, exporters
):
    exporter = make_exporter(shared_kafka)
    exporters.append(exporter)
    observation = exporter.poller.poll_once()
    assert observation.succeeded, observation.error
    status = exporter.status()
    assert status["throttle_factor"] == 1.0 and status["state"] == "valid"
    assert status["active_brokers"] == 3 and status["active_log_dirs"] == 6
    metrics = exporter.render_metrics().decode()
    assert 'kafka_volume_quota_active_brokers{cluster="kafka"} 3.0' in metrics
    assert 'kafka_volume_quota_active_log_dirs{cluster="kafka"} 6.0' in metrics
    expected = {(n, str(p)) for n in shared_kafka.node_ids for p in shared_kafka.log_dirs(n)}
    totals = per_volume(exporter, "kafka_volume_quota_log_dir_total_bytes")
    available = per_volume(exporter, "kafka_volume_quota_log_dir_available_bytes")
    assert set(totals) == set(available) == expected
    for (node_id, log_dir), total in totals.items():
        assert total == shared_kafka.log_dir_bytes
        assert abs(available[node_id, log_dir] - usable_bytes(Path(log_dir))) <= CHECKPOINT_SLACK


def test_real_kafka_grown_bytes_are_what_a_producer_wrote_across_the_checks_it_dropped(
    shared_kafka, exporters
):
    """Graceful slowdown reads the partitions' sizes: the log dir holding a fresh one-partition
    topic grows by what a producer wrote there (its record batches' overhead aside), summed over
    the checks between two polls that the exporter dropped (each of them saw part of it)."""
    exporter = make_exporter(  # short times: no check closes on the limit fast or steps near it
        shared_kafka,
        **{
            "kvq.throttle.policy": "graceful-slowdown",
            "kvq.throttle.slowdown.response.time": "PT1S",
            "kvq.throttle.slowdown.horizon": "PT1S",
            "kvq.throttle.slowdown.partition.sizes": "true",
        },
    )
    exporters.append(exporter)
    admin = AdminClient(librdkafka_config(shared_kafka.admin_properties))
    topic = f"grown-{uuid.uuid4().hex[:8]}"
    [created] = admin.create_topics([NewTopic(topic, 1, replica_assignment=[[0]])]).values()
    created.result(timeout=60)
    wait_until(
        lambda: any(any(d.glob(f"{topic}-0")) for d in shared_kafka.log_dirs(0)),
        30,
        what=f"{topic}-0 in a log dir of node 0",
    )
    [home] = [d for d in shared_kafka.log_dirs(0) if any(d.glob(f"{topic}-0"))]
    for _ in range(2):  # the second counts from the first's sizes
        assert exporter.poller.poll_once().succeeded
    producer = LoadProducer(shared_kafka.sasl_bootstrap, user="alice", password="alice-secret")
    written, value = 0, b"g" * 1000
    try:
        for _ in range(3):
            for _ in range(300):
                while not producer.send(topic, value):
                    pass
            assert producer.producer.flush(60) == 0 and not producer.log.errors
            written += 300 * len(value)
            assert not exporter.poller.check_once()  # nothing decisive: dropped
    finally:
        producer.close()
    observation = exporter.poller.poll_once()
    assert observation.succeeded, observation.error
    grown = {d.log_dir: d.grown_bytes for d in observation.log_dirs if d.broker_id == 0}
    assert written <= grown[str(home)] <= 1.05 * written + 16_384


SIZES = {
    "kvq.throttle.policy": "graceful-slowdown",
    "kvq.throttle.slowdown.partition.sizes": "true",
}
RARE = "check retention every 300000 ms (log.retention.check.interval.ms)"


def test_with_partition_sizes_brokers_checking_retention_rarely_are_named_once(
    cluster, exporters, caplog
):
    """Kafka checks retention every 5 minutes unless told otherwise; the partitions' sizes count
    on checks seconds apart. Broker 1 told 1 s: only 0 and 2 are named, once; with the totals
    alone nothing is asked."""
    control(cluster, "PUT", "/brokers/1/config", **{"log.retention.check.interval.ms": "1000"})
    exporter = make_exporter(cluster, **SIZES)
    totals = make_exporter(cluster)
    exporters.extend([exporter, totals])
    with caplog.at_level(logging.WARNING, logger="kvq.exporter"):
        for _ in range(2):
            assert exporter.poller.poll_once().succeeded
            assert totals.poller.poll_once().succeeded
        exporter.poller.on_taken.join(30)
        assert not hasattr(totals.poller.on_taken, "join")  # the totals: no audit
    (warning,) = [m for m in caplog.messages if "retention" in m]
    assert warning.startswith(f"brokers 0, 2 {RARE}")


def test_real_kafkas_default_retention_check_is_named_with_partition_sizes(
    shared_kafka, exporters, caplog
):
    exporter = make_exporter(shared_kafka, **SIZES)
    exporters.append(exporter)
    with caplog.at_level(logging.WARNING, logger="kvq.exporter"):
        assert exporter.poller.poll_once().succeeded
        exporter.poller.on_taken.join(30)
    (warning,) = [m for m in caplog.messages if "retention" in m]
    named = ", ".join(map(str, sorted(shared_kafka.node_ids)))
    assert warning.startswith(f"brokers {named} {RARE}")


SMALL_LOG_DIR = 8 << 20


@pytest.fixture(scope="module")
def small_kafka(tmp_path_factory, kafka_dist):
    """One Kafka node of its own whose two log dirs are 8 MiB tmpfs, which producers fill (each
    test its own topic)."""
    with KafkaCluster(
        tmp_path_factory.mktemp("kafka"), nodes=1, log_dir_bytes=SMALL_LOG_DIR, dist=kafka_dist
    ) as kafka:
        yield kafka


def test_real_kafka_writing_a_volume_past_the_limit_gives_factor_zero(small_kafka, exporters):
    """Real bytes through Kafka (alice over SASL) until a log dir has less than half free: the
    next poll throttles, naming that volume, and its available bytes are the kernel's."""
    exporter = make_exporter(
        small_kafka, **{P + "storage.per.volume.limit.min.available.ratio": "0.5"}
    )
    exporters.append(exporter)
    assert exporter.poller.poll_once().succeeded
    assert exporter.status()["throttle_factor"] == 1.0
    producer = LoadProducer(small_kafka.sasl_bootstrap, user="alice", password="alice-secret")
    topic = f"fill-{uuid.uuid4().hex[:8]}"
    try:
        for _ in range(5000):  # 5 MB of 8 MiB into the one partition's log dir
            while not producer.send(topic, uuid.uuid4().bytes * 64):
                pass
        assert producer.producer.flush(60) == 0 and not producer.log.errors
    finally:
        producer.close()
    assert exporter.poller.poll_once().succeeded
    status = exporter.status()
    assert status["throttle_factor"] == 0.0
    (violating,) = status["violating_volumes"]
    assert violating["broker_id"] == 0 and violating["available_ratio"] < 0.5
    full = Path(violating["log_dir"])
    assert full in small_kafka.log_dirs(0) and any(full.glob(f"{topic}-0/*.log"))
    assert abs(violating["available_bytes"] - usable_bytes(full)) <= CHECKPOINT_SLACK


def test_real_kafka_filling_a_volume_up_keeps_it_throttled_once_its_log_dir_is_offline(
    small_kafka, exporters
):
    exporter = make_exporter(small_kafka)  # ratio 0.1
    exporters.append(exporter)
    producer = LoadProducer(
        small_kafka.sasl_bootstrap, user="alice", password="alice-secret", **{"retries": 0}
    )
    topic = f"full-{uuid.uuid4().hex[:8]}"
    seen: list[float] = []
    try:
        while not producer.log.errors:  # until the log dir is full and offline
            for _ in range(200):
                while not producer.send(topic, uuid.uuid4().bytes * 64):
                    pass
            producer.producer.flush(30)
            assert exporter.poller.poll_once().succeeded
            seen.append(exporter.status()["throttle_factor"])
            assert len(seen) < 100, "8 MiB take far fewer than 100 x 200 kB"
    finally:
        producer.close()
    assert 0.0 in seen, "the volume was seen violating before it filled up"
    assert 56 in producer.log.errors, producer.log.errors  # KAFKA_STORAGE_ERROR: ENOSPC

    def offline_dirs():
        """Log dirs the next poll finds without sizes: Kafka takes the failed dir offline on a
        thread of its own, a moment after the write failed."""
        assert exporter.poller.poll_once().succeeded
        assert exporter.status()["throttle_factor"] == 0.0, "released while the disk is full"
        return exporter.status()["unusable_log_dirs"]

    wait_until(offline_dirs, timeout=30, what="Kafka to take the full log dir offline")
    status = exporter.status()
    assert [d["reason"] for d in status["unusable_log_dirs"]] == ["error"], "offline: error 56"
    assert status["throttle_factor"] == 0.0, "the full volume still violates"
    (held,) = status["held_log_dirs"]
    (violating,) = status["violating_volumes"]
    assert held["offline"] and held["log_dir"] == violating["log_dir"]
    assert held["log_dir"] == status["unusable_log_dirs"][0]["log_dir"]
    assert status["active_log_dirs"] == 1, "the offline dir is not an active log dir"
    metrics = exporter.render_metrics().decode()
    assert 'kafka_volume_quota_held_log_dirs{cluster="kafka"} 1.0' in metrics
    assert 'kafka_volume_quota_throttle_factor{cluster="kafka"} 0.0' in metrics


def test_the_exporter_learns_when_its_metrics_are_scraped_and_by_whom(cluster, exporters):
    """Every GET of the metrics path is a scrape to align polls to (exporter/scrape_phase.py),
    with the scraper's address; /status and the others are not."""
    exporter = make_exporter(cluster)
    exporters.append(exporter)
    server = exporter.start()
    for _ in range(KEEP):
        assert requests.get(f"{server.url}/metrics", timeout=10).status_code == 200
        assert requests.get(f"{server.url}/status", timeout=10).status_code == 200
    seen = exporter.scrape_phase.seen()
    assert list(seen) == ["127.0.0.1"] and len(seen["127.0.0.1"]) == KEEP


def test_with_the_retention_forecast_each_polls_log_dirs_carry_and_archive_it(
    shared_kafka, exporters, tmp_path
):
    """`kvq.throttle.slowdown.retention.forecast=true`: a poll's log dirs carry what retention
    frees by each time ahead, as Kafka's topic configs and offsets give it (Kafka's default
    retention, a week: nothing within two minutes), archived with the poll; without the setting
    a poll's do not."""
    forecast = make_exporter(
        shared_kafka,
        **SIZES,
        **{
            "kvq.throttle.slowdown.retention.forecast": "true",
            "kvq.exporter.archive.dir": str(tmp_path),
        },
    )
    sizes = make_exporter(shared_kafka, **SIZES)
    exporters.extend([forecast, sizes])
    polled = forecast.poller.poll_once()
    assert polled.succeeded, polled.error
    assert polled.log_dirs and all(
        d.retention_freed == (0,) * len(AHEAD_SECONDS) for d in polled.log_dirs
    )
    (line,) = [ln for f in tmp_path.rglob("*.jsonl") for ln in f.read_text().splitlines()]
    assert all(
        d["retention_freed_bytes"] == {str(a): 0 for a in AHEAD_SECONDS}
        for d in json.loads(line)["log_dirs"]
    )
    assert sizes.poller.poll_once().log_dirs[0].retention_freed is None
