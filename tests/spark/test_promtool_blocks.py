"""promtool's runs side by side: a failing one stops the others and is reported naming the file;
the real promtool builds one block per 18-hour range of the input."""

from __future__ import annotations

import contextlib
import json
import os
import signal
from pathlib import Path

import pytest

from spark.promtool_blocks import BLOCK_RANGE, PromtoolError, create_blocks, usable_cores

START = 1_763_596_800  # 2025-11-20T00:00:00Z, a multiple of 18 h
FAILING_STAND_IN = """#!/bin/sh
# Stands in for promtool: records its pid; on the input of the range it is told to, waits until
# another run has started, then fails; on the others, runs until stopped.
echo $$ > "$KVQ_TEST_PIDS/$$"
case "$6" in
  */$KVQ_TEST_FAILING.om)
    while [ "$(ls "$KVQ_TEST_PIDS" | wc -l)" -lt 2 ]; do sleep 0.05; done
    echo "error: parse: bad line 3" >&2
    exit 1 ;;
esac
exec sleep 600
"""


def history(path: Path, hours: int) -> None:
    lines = ["# TYPE kafka_volume_quota_throttle_factor gauge"]
    for t in range(START, START + hours * 3600, 300):
        lines.append(f'kafka_volume_quota_throttle_factor{{cluster="kafka"}} 1 {t}')
    path.write_text("\n".join([*lines, "# EOF", ""]))


def alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status


def test_the_first_failure_stops_every_other_promtool_run_and_names_the_file(tmp_path, monkeypatch):
    source = tmp_path / "kafka.om"
    history(source, hours=90)  # five 18-hour ranges
    stand_in, pids = tmp_path / "promtool", tmp_path / "pids"
    stand_in.write_text(FAILING_STAND_IN)
    stand_in.chmod(0o755)
    pids.mkdir()
    monkeypatch.setenv("KVQ_TEST_PIDS", str(pids))
    monkeypatch.setenv("KVQ_TEST_FAILING", str(START // BLOCK_RANGE + 1))  # the second range

    try:
        with pytest.raises(PromtoolError) as failed:
            create_blocks(
                [source], tmp_path / "blocks", tmp_path / "work", promtool=str(stand_in), workers=2
            )
        started = [int(p.name) for p in pids.iterdir()]
        assert len(started) == 2  # two at a time: the second's failure stopped the first
        assert not [pid for pid in started if alive(pid)]
    finally:  # whatever a failed check left running
        for pid in (int(p.name) for p in pids.iterdir()):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    assert str(source) in str(failed.value) and "bad line 3" in str(failed.value)
    assert not list((tmp_path / "blocks").iterdir())


def test_the_real_promtool_builds_one_block_per_18_hour_range(tmp_path):
    source = tmp_path / "kafka.om"
    history(source, hours=40)  # 18 + 18 + 4 hours

    blocks = create_blocks([source], tmp_path / "blocks", tmp_path / "work", workers=2)

    metas = [json.loads((b / "meta.json").read_text()) for b in blocks]
    assert sorted((m["minTime"], m["maxTime"]) for m in metas) == [
        (START * 1000, (START + 18 * 3600 - 300) * 1000 + 1),
        ((START + 18 * 3600) * 1000, (START + 36 * 3600 - 300) * 1000 + 1),
        ((START + 36 * 3600) * 1000, (START + 40 * 3600 - 300) * 1000 + 1),
    ]
    assert sum(m["stats"]["numSamples"] for m in metas) == 40 * 12
    assert not os.listdir(tmp_path / "work")


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({}, None),  # no cgroup CPU controller: the affinity
        ({"cpu.max": "max 100000\n"}, None),
        ({"cpu.max": "50000 100000\n"}, 1),  # half a CPU: still one run
        ({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, None),
        ({"cpu/cpu.cfs_quota_us": "100000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 1),
    ],
)
def test_a_container_cpu_limit_caps_the_promtool_runs(tmp_path, files, expected):
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    affinity = len(os.sched_getaffinity(0))
    assert usable_cores(tmp_path) == (affinity if expected is None else min(affinity, expected))
