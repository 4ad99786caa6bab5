"""`make demo KAFKA=apache` end to end: the loop closes on a real 3-node Apache Kafka cluster.

A topic on broker 1 is produced to until its tmpfs log dir is past the limit (real bytes); the
exporter sees it in DescribeLogDirs, Prometheus fires, the enforcer throttles Kafka's quotas;
deleting the topic frees the volume and the quotas come back byte for byte. About a minute.
"""

from __future__ import annotations

import pytest

from devkit.results_page import RESULTS_DIR_ENV
from tests.system.demo_process import run_demo

pytestmark = pytest.mark.e2e

STEPS = [
    "stack up: Kafka (3 nodes), exporter, enforcer, Prometheus, Alertmanager",
    "volume crossed the limit (Kafka broker 1, log dir",
    "exporter saw it: throttle factor 0",
    "KafkaVolumeQuotaThrottle firing in Prometheus",
    "quotas throttled in Kafka (every producer_byte_rate at the 8 KiB/s floor)",
    "space freed: topic demo-fill deleted",
    "Kafka removed the topic's files: the volume is above the limit again",
    "exporter: throttle factor 1",
    "KafkaVolumeQuotaThrottle resolved",
    "quotas restored byte for byte",
]


def test_demo_on_real_kafka_throttles_a_volume_filled_with_real_bytes_and_restores_exactly(
    kafka_dist,
):
    done = run_demo("--kafka", "apache")
    out = done.stdout
    assert done.returncode == 0, out[-3000:] + done.stderr[-3000:]
    assert "loop closed: quotas throttled on a full volume and restored exactly." in out
    timeline = out.split("\ntimeline:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    labels = [line.split(" s  ", 1)[1] for line in timeline]
    assert len(labels) == len(STEPS), timeline
    for label, step in zip(labels, STEPS, strict=True):
        assert label.startswith(step), (label, step)


def test_versus_needs_real_kafka_and_names_an_unknown_guard():
    """`make demo SCENARIO=versus` without KAFKA=apache, or with a guard it does not know, is a
    usage error (exit 2) naming what is allowed, before any cluster starts."""
    without_kafka = run_demo("--scenario", "versus", timeout=60)
    assert without_kafka.returncode == 2
    assert "versus runs on real Kafka only (KAFKA=apache)" in without_kafka.stderr
    unknown = run_demo("--scenario", "versus", "--kafka", "apache", "--guards", "x", timeout=60)
    assert unknown.returncode == 2
    assert (
        "--guards 'x': each must be one of none, plugin-5s, plugin-60s, kvq, kvq-graceful, "
        "kvq-no-default" in unknown.stderr
    )


def test_slowdown_needs_real_kafka():
    """`make demo SCENARIO=slowdown` without KAFKA=apache is a usage error (exit 2), before any
    cluster starts."""
    without_kafka = run_demo("--scenario", "slowdown", timeout=60)
    assert without_kafka.returncode == 2
    assert "slowdown runs on real Kafka only (KAFKA=apache)" in without_kafka.stderr


def test_strimzi_needs_real_kafka_and_a_throttle_long_enough():
    """`make demo SCENARIO=strimzi` without KAFKA=apache, or firing shorter than two operator
    periods, is a usage error (exit 2), before any cluster starts."""
    without_kafka = run_demo("--scenario", "strimzi", timeout=60)
    assert without_kafka.returncode == 2
    assert "strimzi runs on real Kafka only (KAFKA=apache)" in without_kafka.stderr
    short = run_demo("--scenario", "strimzi", "--kafka", "apache", "--seconds", "5", timeout=60)
    assert short.returncode == 2
    assert "--seconds 5: at least 40" in short.stderr


def test_failover_demo_hands_over_twice_with_no_late_write_and_restores_exactly(
    kafka_dist, tmp_path, monkeypatch
):
    """`make demo SCENARIO=failover KAFKA=apache` as the docs show it: two replicas, the acting
    one SIGKILLed in the middle of a throttle and again of the restore of 10,000 pairs. What
    does not depend on the machine's load holds: the other replica took over each time, the
    killed one got no write through after that, and every value is back byte for byte. Its time
    goal (each kill done within 15 s) is the demo's own verdict on its results page, measured
    with the machine's load (docs/results/failover.md), not asserted here: exit 1 may only mean
    that."""
    monkeypatch.setenv(RESULTS_DIR_ENV, str(tmp_path))  # not this checkout's results page
    done = run_demo("--scenario", "failover", "--kafka", "apache", timeout=600)
    out = done.stdout
    assert done.returncode in (0, 1), out[-3000:] + done.stderr[-3000:]
    # a demo that failed says why on stderr (`demo failed: ...`), with exit 1 like a slow one
    restored = "restore exact on every broker: yes (10,000 values, the copy removed)"
    assert restored in out, out + done.stderr[-3000:]
    rows = [line.strip(" |").split(" | ") for line in out.splitlines()]
    kills = {row[0]: row[1:] for row in rows if row[0] in ("throttle", "restore")}
    assert set(kills) == {"throttle", "restore"}, out
    for what, (_done, taken_over, late_writes) in kills.items():
        assert taken_over.endswith(" s"), f"no replica took over after the {what} kill: {out}"
        assert late_writes == "0", f"the killed replica wrote after the {what} take-over: {out}"
    assert (tmp_path / "failover.md").is_file()


def test_failover_needs_real_kafka():
    """`make demo SCENARIO=failover` without KAFKA=apache is a usage error (exit 2), before any
    cluster starts."""
    without_kafka = run_demo("--scenario", "failover", timeout=60)
    assert without_kafka.returncode == 2
    assert "failover runs on real Kafka only (KAFKA=apache)" in without_kafka.stderr
