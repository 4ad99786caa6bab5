"""`make demo SCENARIO=producers` end to end: real producers, with kvq and without it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.system.demo_process import run_demo

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.integration


def test_producers_scenario_protects_the_disk_and_shows_it_fill_without_kvq():
    done = subprocess.run(
        [sys.executable, "-m", "demo", "--scenario", "producers"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = done.stdout
    assert done.returncode == 0, out[-3000:] + done.stderr[-3000:]
    assert "PROTECTED: no volume reached 0 usable bytes" in out
    assert "lowest headroom reached" in out and "predicted bound" in out
    assert "without kvq the disk filled" in out
    # The full broker stopped while throttled, away longer than the validity duration: held.
    assert "and after it came back: held" in out
    # Every producer was held (the floor and a stray batch when leaders moved) and came back.
    rows = [line.split() for line in out.splitlines() if " / " in line and "kB/s" in line]
    assert len(rows) == 4
    for row in rows:
        before, during, after = (float(row[i]) for i in (3, 5, 7))
        assert before > 100 and during < 0.1 * before and after > 100, row


def test_producers_scenario_on_real_kafka_protects_the_tmpfs_with_librdkafka_and_java_producers(
    kafka_dist,
):
    """The shortened form (only the run with kvq): real Kafka, real bytes on 32 MiB tmpfs log
    dirs, four librdkafka and two Java (ProducerPerformance) producers. A few minutes."""
    done = run_demo("--scenario", "producers", "--kafka", "apache", "--skip-without")
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
