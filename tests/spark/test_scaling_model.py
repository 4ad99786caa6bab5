"""The event-log reader and the executor-core model of `python -m bench.backfill --scaling`.

The unit tests read hand-written event logs (Spark's JSON lines, only the fields read); the last
test runs the --scaling path end to end on a tiny generated archive with real Spark.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bench.spark_event_log import (
    EventLogError,
    critical_path_seconds,
    driver_gaps,
    driver_only_seconds,
    on_dedicated_cores,
    predicted_seconds,
    read_event_log,
    within,
)


def app(start: float, end: float) -> list[dict]:
    return [
        {"Event": "SparkListenerApplicationStart", "Timestamp": int(start * 1000)},
        {"Event": "SparkListenerApplicationEnd", "Timestamp": int(end * 1000)},
    ]


def stage(stage_id: int, start: float, tasks: list[float], parents=()) -> list[dict]:
    """A stage submitted at `start` whose tasks run back to back from it, on one core."""
    info = {"Stage ID": stage_id, "Stage Name": f"stage {stage_id}", "Parent IDs": list(parents)}
    submitted = {**info, "Submission Time": int(start * 1000)}
    events: list[dict] = [{"Event": "SparkListenerStageSubmitted", "Stage Info": submitted}]
    clock = start
    for number, seconds in enumerate(tasks):
        events.append(
            {
                "Event": "SparkListenerTaskEnd",
                "Stage ID": stage_id,
                "Task Info": {
                    "Task ID": number,
                    "Launch Time": int(clock * 1000),
                    "Finish Time": int((clock + seconds) * 1000),
                },
                "Task Metrics": {
                    "Executor Run Time": int(seconds * 1000),
                    "Executor CPU Time": int(seconds * 1e9 / 2),  # it waited half the time
                    "JVM GC Time": 100,
                },
            }
        )
        clock += seconds
    completed = {**submitted, "Completion Time": int(clock * 1000)}
    events.append({"Event": "SparkListenerStageCompleted", "Stage Info": completed})
    return events


def write_log(folder: Path, events: list[dict]) -> Path:
    """A rolling event log folder, as Spark 4 writes it, split over two files."""
    log = folder / "eventlog_v2_local-1"
    log.mkdir(parents=True)
    half = len(events) // 2
    for number, part in ((1, events[:half]), (2, events[half:])):
        text = "".join(json.dumps(event) + "\n" for event in part)
        (log / f"events_{number}_local-1").write_text(text)
    return folder


def test_two_equal_tasks_take_half_as_long_on_two_cores_plus_the_driver_only_time(tmp_path):
    # 1 s before the stage and 2 s after it with no stage running: 3 s of driver-only time.
    events = [*app(100, 107), *stage(0, 101, [2.0, 2.0])]
    log = read_event_log(write_log(tmp_path, events))

    assert [len(s.tasks) for s in log.stages] == [2]
    assert driver_only_seconds(log) == pytest.approx(3.0)
    assert predicted_seconds(log, 1) == pytest.approx(7.0)  # as it ran: one core
    assert predicted_seconds(log, 2) == pytest.approx(5.0)
    assert predicted_seconds(log, 64) == pytest.approx(5.0)
    assert predicted_seconds(log, 2, outside=1.5) == pytest.approx(6.5)
    assert log.costs.gc == pytest.approx(0.2)
    # on cores of their own the tasks take their CPU time, 1 s each
    assert predicted_seconds(on_dedicated_cores(log), 2) == pytest.approx(4.0)


def test_a_stage_waits_for_its_parent_and_the_driver_delay_before_it(tmp_path):
    # Stage 1 (3 tasks of 1 s) is submitted 0.5 s after its parent stage 0 completed, while
    # stage 2 (independent, 4 s) still runs: one busy period; stage 1 cannot start before 0
    # is done plus the driver's 0.5 s.
    events = [
        *app(0, 10),
        *stage(0, 1, [1.0, 1.0]),
        *stage(2, 1, [4.0]),
        *stage(1, 3.5, [1.0, 1.0, 1.0], parents=[0]),
    ]
    log = read_event_log(write_log(tmp_path, events))

    # driver-only: 1 s before, 10 - 6.5 = 3.5 s after
    assert driver_only_seconds(log) == pytest.approx(4.5)
    gaps = driver_gaps(log, outside=2.0)
    assert (gaps.before, gaps.between, gaps.after) == pytest.approx((3.0, 0.0, 3.5))
    # 0.5 s of the process's 2 s outside the application came after its end (the JVM's stop)
    gaps = driver_gaps(log, outside=2.0, outside_after=0.5)
    assert (gaps.before, gaps.between, gaps.after) == pytest.approx((2.5, 0.0, 4.0))
    assert (gaps.total, gaps.application) == pytest.approx((6.5, 4.5))
    # a core per task: stage 0 takes 1 s, stage 1 starts 0.5 s later (the driver's delay) and
    # takes 1 s: 2.5 s; stage 2 takes 4 s: the period is 4 s
    assert critical_path_seconds(log) == pytest.approx(4.5 + 4.0)
    # one task of each stage at a time, as it ran: 2 + 0.5 + 3 s, stage 2 beside it
    stage_1_alone = [*app(0, 10), *stage(0, 1, [1.0, 1.0]), *stage(1, 3.5, [1.0] * 3, [0])]
    assert predicted_seconds(
        read_event_log(write_log(tmp_path / "alone", stage_1_alone)), 1
    ) == pytest.approx(10.0)
    # two cores: stage 0's two tasks until 1 s; stage 2's 4 s task from 1 to 5 on one core;
    # stage 1, ready at 1.5, runs its three tasks on the other: 1.5 to 4.5
    assert predicted_seconds(log, 2) == pytest.approx(4.5 + 5.0)
    assert predicted_seconds(log, 1) >= predicted_seconds(log, 2)


def test_a_window_of_the_log_is_one_run_of_several_in_the_application(tmp_path):
    events = [*app(0, 30), *stage(0, 2, [1.0]), *stage(1, 12, [2.0, 2.0]), *stage(2, 25, [1.0])]
    log = read_event_log(write_log(tmp_path, events))

    second = within(log, 10, 20)

    assert [s.stage_id for s in second.stages] == [1]
    assert second.seconds == 10
    # 10 s, of which the stage's 2 tasks on one core: 4 s
    assert predicted_seconds(second, 1) == pytest.approx(10)
    assert predicted_seconds(second, 2) == pytest.approx(8)


def test_an_event_log_without_its_end_is_refused_naming_the_file(tmp_path):
    events = [{"Event": "SparkListenerApplicationStart", "Timestamp": 0}, *stage(0, 1, [1.0])]
    with pytest.raises(EventLogError, match="no application end"):
        read_event_log(write_log(tmp_path, events))


CORE_LINE = re.compile(r"^\s*(\d+) cores?: +([\d.]+) s, +([\d.]+)x$", re.MULTILINE)


@pytest.mark.timeout(900)  # three Spark runs: minutes on a loaded machine
def test_the_scaling_bench_prints_a_time_per_core_count_never_growing(tmp_path, capsys):
    from bench.backfill import main

    # no local[1]/local[2] or promtool runs; --split-cores 2: a few tasks, not 64 cores' worth
    argv = ["--scaling", "--sizes", "tiny", "--model-only", "--split-cores", "2", "--warm-driver"]
    assert main([*argv, "--keep", str(tmp_path)]) == 0

    out = capsys.readouterr().out
    found = CORE_LINE.findall(out)
    # as measured, with every task taking its CPU time, on a warm driver
    assert [int(cores) for cores, _, _ in found] == [1, 2, 4, 8, 16, 32, 64] * 3
    for model in (found[:7], found[7:14], found[14:]):
        seconds = [float(s) for _, s, _ in model]
        assert seconds == sorted(seconds, reverse=True)
    cold = re.search(r"driver-only ([\d.]+) s \(\d+% of the run\)", out)
    warm = re.search(r"on a warm driver .*; driver-only ([\d.]+) s \(before the first", out)
    assert cold and warm
    # the JVM's launch, Spark's start and the cold JIT are what a warm driver saves
    assert float(warm.group(1)) < float(cold.group(1))
    assert re.search(r"driver-only within the Spark application .*: [\d.]+ s \(\d+% of", out)
    assert re.search(r"the Spark application alone .* 16 [\d.]+x", out)
    assert re.search(r"critical path \(a core for every task\): [\d.]+ s", out)
