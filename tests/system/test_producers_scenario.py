"""`make demo SCENARIO=producers` end to end: real producers, with kvq and without it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.system.demo_process import DemoProcess

pytestmark = pytest.mark.integration

RUNS = {
    "demo_on_devcluster": ("--scenario", "producers"),
    "demo_on_kafka": ("--scenario", "producers", "--kafka", "apache", "--skip-without"),
}
"""The demo runs of this module, by the fixture each test asks for its run with."""


@pytest.fixture(scope="module")
def demo_runs(request) -> Iterator[dict[str, DemoProcess]]:
    """The runs the selected tests ask for, started together, each on its own stack (its own
    loopback ports, temp dirs and tmpfs mounts): most of each run is waiting at a set pace (a disk
    filling at a set rate, a validity duration, a throttle time running out), so together they
    take about as long as the longer one. Every run still going at the end is interrupted."""
    wanted = {name for item in request.session.items for name in item.fixturenames}
    if "demo_on_kafka" in wanted:
        request.getfixturevalue("kafka_dist")  # Kafka's jars before the clock starts
    runs: dict[str, DemoProcess] = {}
    try:
        for name, args in RUNS.items():
            if name in wanted:
                runs[name] = DemoProcess(*args)
        yield runs
    finally:
        for run in runs.values():
            run.close()


@pytest.fixture
def demo_on_devcluster(demo_runs) -> DemoProcess:
    return demo_runs["demo_on_devcluster"]


@pytest.fixture
def demo_on_kafka(demo_runs) -> DemoProcess:
    return demo_runs["demo_on_kafka"]


def test_producers_scenario_protects_the_disk_and_shows_it_fill_without_kvq(demo_on_devcluster):
    done = demo_on_devcluster.result()
    out = done.stdout
    assert done.returncode == 0, out[-3000:] + done.stderr[-3000:]
    assert "PROTECTED: no volume reached 0 usable bytes" in out
    assert "lowest headroom reached" in out and "predicted bound" in out
    assert "without kvq the disk filled" in out
    # The full broker stopped while throttled, away longer than the validity duration: held.
    assert "and after it came back: held" in out
    # Every producer was held (the floor and a stray batch when leaders moved: 16 of 149 kB/s
    # seen in CI on a loaded machine) and came back.
    rows = [line.split() for line in out.splitlines() if " / " in line and "kB/s" in line]
    assert len(rows) == 4
    for row in rows:
        before, during, after = (float(row[i]) for i in (3, 5, 7))
        assert before > 100 and during < 0.15 * before and after > 100, row


def test_producers_scenario_on_real_kafka_protects_the_tmpfs_with_librdkafka_and_java_producers(
    demo_on_kafka,
):
    """The shortened form (only the run with kvq): real Kafka, real bytes on 32 MiB tmpfs log
    dirs, four librdkafka and two Java (ProducerPerformance) producers. A few minutes."""
    done = demo_on_kafka.result()
    out = done.stdout
    assert done.returncode == 0, out[-3000:] + done.stderr[-3000:]
    assert "PROTECTED: no volume reached 0 usable bytes" in out
    assert "brokers halted                                0" in out
    assert "and after it came back: held" in out
    rates = [line.split() for line in out.splitlines() if " / " in line and "kB/s" in line]
    assert {row[3] for row in rates} == {"(librdkafka)", "(Java)"}
    assert len(rates) == 6
    for row in rates:
        before, during, after = (float(row[i]) for i in (4, 6, 8))
        assert before > 40 and during < 0.3 * before and after > 40, row
    recovery = out.split("\nback at their rate (", 1)[1].split("\n\n", 1)[0].splitlines()[2:]
    assert len(recovery) == 6 and not any("not back" in line for line in recovery), recovery
