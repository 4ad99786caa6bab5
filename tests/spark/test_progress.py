"""On a terminal the running Spark stage is shown in place with its tasks and the time it has left;
elsewhere only plain lines are written."""

from __future__ import annotations

import io
import os
import threading
import time

from pyspark.sql import functions as F

from spark.progress import Progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def wait_for(condition, what: str, seconds: float = 120.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def gated_job(spark, gates, tasks: int = 4):
    """A Spark job of `tasks` tasks; task p finishes once the file gates/p exists."""

    @F.udf("long")
    def wait_for_gate(partition):
        while not os.path.exists(os.path.join(gates, str(partition))):
            time.sleep(0.05)
        return partition

    frame = spark.range(0, tasks, 1, tasks).select(wait_for_gate(F.spark_partition_id()).alias("p"))
    return lambda: frame.agg(F.sum("p")).collect()


def test_a_terminal_sees_the_running_stage_and_the_time_it_has_left(spark, tmp_path):
    out = Terminal()
    progress = Progress(out)
    job = gated_job(spark, str(tmp_path))
    failures = []

    def run():
        try:
            with progress.stages(spark.sparkContext):
                job()
                progress("written")
        except Exception as exc:  # surfaced below, in the test's thread
            failures.append(exc)

    runner = threading.Thread(target=run)
    runner.start()
    try:
        wait_for(lambda: "0/4 tasks" in out.getvalue(), "the stage to be shown")
        (tmp_path / "0").touch()
        wait_for(lambda: "s left" in out.getvalue(), "an estimate of the time left")
    finally:
        for partition in range(4):
            (tmp_path / str(partition)).touch()
        runner.join()
    assert not failures
    text = out.getvalue()
    assert "Spark stage" in text and "1/4 tasks" in text
    assert "written" in text and text.endswith("\r")  # the in-place line is cleared at the end


def test_a_log_file_gets_plain_lines_only(spark, tmp_path):
    out = io.StringIO()
    progress = Progress(out)
    for partition in range(2):
        (tmp_path / str(partition)).touch()
    with progress.stages(spark.sparkContext):
        gated_job(spark, str(tmp_path), tasks=2)()
        progress("written")
    lines = out.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kvq-backfill [") and "written" in lines[0]
