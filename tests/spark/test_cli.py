"""kvq-backfill refuses bad input with a message naming the value and what is allowed (exit 2),
before starting Spark, and --help teaches the whole workflow."""

from __future__ import annotations

import subprocess
import sys

import pytest

from devkit.archive_generator import ArchivePlan, generate, write_config
from kvq.model.limits import MIN_AVAILABLE_RATIO
from kvq.settings.config import GRACEFUL_SLOWDOWN, THROTTLE_POLICY
from tests.spark.backfill_cli import run_backfill


@pytest.fixture
def archive(tmp_path):
    path = tmp_path / "archive" / "kafka" / "2026-01-01" / "00.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("")
    return tmp_path / "archive"


def run(tmp_path, archive, *extra):
    config = write_config(tmp_path / "kvq.properties")
    return run_backfill(archive, config, tmp_path / "o", *extra)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--step", "PT0.5S"], "whole number of seconds"),
        (["--step", "P1M"], "years and months"),
        (["--step", "soon"], "not an ISO 8601 duration"),
        (["--start", "yesterday"], "not an ISO 8601 time"),
        (["--start", "2026-02-01", "--end", "2026-01-01"], "is after --end"),
        (["--set", f"{MIN_AVAILABLE_RATIO}=0.1"], "--scenario NAME"),
        (["--scenario", "what if", "--set", "a=b"], "must start with a letter or digit"),
        (["--scenario", "s1", "--set", "novalue"], "must be KEY=VALUE"),
        (["--max-bad-lines", "-1"], "0 or more"),
    ],
)
def test_bad_flags_are_named(tmp_path, archive, capsys, flags, message):
    assert run(tmp_path, archive, *flags) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_a_bad_cluster_label_is_refused_naming_the_flag(tmp_path, archive, capsys):
    with pytest.raises(SystemExit) as exited:
        run(tmp_path, archive, "--cluster-label", "kafka-cluster")
    assert exited.value.code == 2
    assert "argument --cluster-label: 'kafka-cluster': must be a Prometheus label name" in (
        capsys.readouterr().err
    )


def test_bad_scenario_value_is_a_config_error_naming_the_property(tmp_path, archive, capsys):
    with pytest.raises(SystemExit) as exit_info:
        run(tmp_path, archive, "--scenario", "s1", "--set", f"{MIN_AVAILABLE_RATIO}=1.5")
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert MIN_AVAILABLE_RATIO in err and "between 0.0 and 1.0" in err


def test_missing_or_empty_archive(tmp_path, capsys):
    assert run(tmp_path, tmp_path / "nowhere") == 2
    assert "does not exist" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("x")
    assert run(tmp_path, tmp_path / "empty") == 2
    assert "*.jsonl or *.jsonl.gz" in capsys.readouterr().err


def test_help_teaches_the_workflow_and_the_retention_pitfall():
    result = subprocess.run(
        [sys.executable, "-m", "spark.cli", "--help"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0
    for needle in ("--scenario", "spark-submit", "--prometheus-url", "retention", "promtool"):
        assert needle in result.stdout


@pytest.mark.parametrize(
    ("output", "message"),
    [
        ("a-file", "is a file; give a folder"),
        ("a-file/below", "cannot be created: Not a directory"),
    ],
)
def test_a_bad_output_is_named_before_spark_starts(tmp_path, archive, capsys, output, message):
    (tmp_path / "a-file").write_text("not a folder")
    config = write_config(tmp_path / "kvq.properties")
    assert run_backfill(archive, config, tmp_path / output) == 2
    err = capsys.readouterr().err
    assert f"--output {tmp_path / output} {message}" in err and "Traceback" not in err


@pytest.mark.parametrize("url", ["notaurl", "ftp://prometheus:9090", "http://"])
def test_a_bad_prometheus_url_is_named(tmp_path, archive, capsys, url):
    assert run(tmp_path, archive, "--prometheus-url", url) == 2
    err = capsys.readouterr().err
    assert f"--prometheus-url {url!r} must be an http:// or https:// URL" in err


def test_a_damaged_part_file_is_named_not_a_traceback(tmp_path, spark, capsys, monkeypatch):
    """A part file damaged between Spark's write and the driver's concatenation (a full disk, a
    shared file system losing a write) fails the run naming the file, with no partial output."""
    from devkit.archive_generator import ArchivePlan, generate
    from spark import openmetrics_writer

    generate(ArchivePlan(brokers=2, dirs_per_broker=2, hours=2), tmp_path / "archive")
    real_write = openmetrics_writer.write_parts

    def write_then_damage(spark, lines, writers, work_dir):
        real_write(spark, lines, writers, work_dir)
        victim = max(work_dir.glob("*/family=*/part-*"), key=lambda p: p.stat().st_size)
        victim.write_bytes(victim.read_bytes()[:-5])

    monkeypatch.setattr(openmetrics_writer, "write_parts", write_then_damage)
    assert run(tmp_path, tmp_path / "archive") == 1
    err = capsys.readouterr().err
    assert "part-" in err and "truncated" in err and "running again" in err
    assert "Traceback" not in err
    assert not list((tmp_path / "o").glob("*.om"))


def run_script(code: str, cwd) -> subprocess.CompletedProcess:
    """`code` run by this Python in a process of its own (its logging set up as a command's)."""
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=cwd,
    )


INTERRUPTED_CALL = """
import os, signal, threading
from kvq.settings.logging_setup import setup_logging
from kvq import interrupts
from spark.cli import quiet_py4j
from spark.session import spark_session, stop_local_jvm
setup_logging("info", "logfmt")
quiet_py4j()
spark = spark_session("local[1]")
threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGTERM)).start()
try:
    with interrupts.raised():
        spark._jvm.java.lang.Thread.sleep(60_000)  # the driver waiting for the JVM's answer
except interrupts.Interrupted as exc:
    print("stopped by", exc.name)
finally:
    stop_local_jvm()
"""


def test_an_interrupt_while_the_driver_waits_for_spark_is_not_a_traceback(tmp_path):
    """py4j logs an interrupt that arrives during a call to the JVM with its traceback on the
    root logger; kvq-backfill says it in one line (`stopped by SIGTERM`) instead."""
    done = run_script(INTERRUPTED_CALL, tmp_path)
    assert "stopped by SIGTERM" in done.stdout, done.stderr
    assert "Traceback" not in done.stderr, done.stderr


COLLECTED_AFTER_THE_STOP = """
import gc, threading
from kvq.settings.logging_setup import setup_logging
from spark.cli import quiet_py4j
from spark.session import spark_session, stop_local_jvm
setup_logging("info", "logfmt")
quiet_py4j()
spark = spark_session("local[1]")
gc.disable()  # the collector finds the cycle below only once the JVM is stopped
cycle = {"java object": spark._jvm.java.util.ArrayList()}
cycle["cycle"] = cycle
del cycle
stop_local_jvm()
gc.collect()


class Marker:  # the finalizer thread's next task: the collected object's call has been made
    reached = threading.Event()

    def garbage_collect_object(self, target_id, enqueue):
        self.reached.set()


spark.sparkContext._gateway._gateway_client.finalizer_deque.appendleft((Marker(), "marker"))
assert Marker.reached.wait(60)
print("collected")
"""


def test_a_java_object_collected_after_an_interrupt_is_not_a_traceback(tmp_path):
    """py4j's finalizer thread tells the JVM about every Python object collected: after an
    interrupted run stopped its JVM, that call fails and py4j logs its traceback on the root
    logger (it failed a CI run once, at whatever moment the garbage collector ran). Quiet."""
    done = run_script(COLLECTED_AFTER_THE_STOP, tmp_path)
    assert "collected" in done.stdout, done.stderr
    assert "Traceback" not in done.stderr, done.stderr


FAILURES_LOGGED_BY_PY4J = """
import logging, signal, sys
import py4j.clientserver
from kvq import interrupts
from kvq.settings.logging_setup import setup_logging
from spark.cli import quiet_py4j
setup_logging("info", "logfmt")
quiet_py4j()


def log_as_py4j(message):  # as py4j's connection clean-up logs it: its logger, its file
    logger = logging.getLogger("py4j.clientserver")
    at = py4j.clientserver.__file__
    logger.handle(logger.makeRecord(logger.name, logging.ERROR, at, 1, message, (), sys.exc_info()))


try:
    try:
        raise interrupts.Interrupted(signal.SIGTERM)  # the driver's wait for an answer, interrupted
    except interrupts.Interrupted:
        raise BrokenPipeError(32, "Broken pipe")  # py4j then closing the connection it was on
except BrokenPipeError:
    log_as_py4j("while an interrupt unwinds")
try:
    raise BrokenPipeError(32, "Broken pipe")
except BrokenPipeError:
    log_as_py4j("a failure of its own")
"""


def test_py4j_failures_while_an_interrupt_unwinds_are_quiet_and_others_are_not(tmp_path):
    """An interrupt that lands while py4j waits for the JVM makes py4j's clean-up fail too, and
    py4j logs that on its own logger with a traceback: quiet as the interrupt itself (it failed a
    CI run once). A py4j failure with no interrupt behind it is still logged."""
    done = run_script(FAILURES_LOGGED_BY_PY4J, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "while an interrupt unwinds" not in done.stderr, done.stderr
    assert 'msg="a failure of its own"' in done.stderr and "BrokenPipeError" in done.stderr


@pytest.mark.timeout(900)  # Spark: minutes on a loaded machine
def test_a_graceful_slowdown_backfill_prints_no_java_stack_trace(tmp_path):
    """graceful-slowdown's policy stages are too large for Spark to fuse each into one method:
    asked to, Spark fails to compile them, logs each failure as an ERROR with a Java stack
    trace of a thousand lines on the terminal, and goes on unfused. kvq-backfill does not ask:
    what the user sees is its own progress."""
    plan = ArchivePlan(brokers=1, dirs_per_broker=1, hours=0.5, interval=5.0)
    generate(plan, tmp_path / "archive")
    config = write_config(
        tmp_path / "kvq.properties", interval="PT5S", extra={THROTTLE_POLICY: GRACEFUL_SLOWDOWN}
    )
    done = subprocess.run(
        [sys.executable, "-m", "spark.cli", "--archive", "archive", "--config", str(config),
         "--output", "out"],
        cwd=tmp_path, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Failed to compile" not in done.stderr, done.stderr[:3000]
    assert "\tat org." not in done.stderr, done.stderr[:3000]
    assert (tmp_path / "out" / "kafka.om").read_text().endswith("# EOF\n")
