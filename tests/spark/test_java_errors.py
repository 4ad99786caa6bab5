"""The causes read from Spark's Java stack traces: one pattern for a `Caused by:` line serves
the read side (an archive file that cannot be read) and the write side (the part files)."""

from __future__ import annotations

from spark.job import io_cause

WRITE_TRACE = """\
org.apache.spark.SparkException: Job aborted due to stage failure: Task 3 in stage 7.0 failed
\tat org.apache.spark.scheduler.DAGScheduler.failJobAndIndependentStages(DAGScheduler.scala:2856)
Caused by: org.apache.spark.SparkException: [TASK_WRITE_FAILED] Task failed while writing rows
Caused by: java.io.IOException: Mkdirs failed to create file:/out/.spark-parts/x
Caused by: java.io.IOException
Caused by: java.io.IOException: No space left on device
\tat java.base/java.io.FileOutputStream.writeBytes(Native Method)
"""


def test_the_innermost_io_error_with_a_message_is_the_cause() -> None:
    assert io_cause(WRITE_TRACE) == "No space left on device"


def test_a_trace_without_an_io_error_has_no_io_cause() -> None:
    trace = "Caused by: java.io.FileNotFoundException: /a (Permission denied)\n"
    assert io_cause(trace) is None
