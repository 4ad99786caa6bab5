"""One SparkSession for the backfill: `local[*]` by default, the cluster's under `spark-submit`."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
from pathlib import Path

from pyspark import SparkContext
from pyspark.sql import SparkSession

from kvq import interrupts
from spark.class_archive import ClassArchive, keep_at_exit, prepare
from spark.jvm_lookups import keep_lookups
from spark.py4j_logging import STOPPING

LOCAL_DEFAULTS = {
    "spark.driver.memory": "2g",
    # PySpark records the Python call site of every Column function in the JVM (the DataFrame
    # context of an error message): seven round trips to the JVM each, a quarter of the 12,000
    # a backfill makes while it plans, and a walk of the Python stack. The job's errors name
    # what failed themselves.
    "spark.python.sql.dataFrameDebugging.enabled": "false",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.adaptive.enabled": "true",
}
LOCAL_JAVA_OPTIONS = "-XX:+UseParallelGC -XX:-DontCompileHugeMethods"
"""The throughput collector for a batch job: G1, the JVM's default, spends CPU on concurrent work
and costlier write barriers that a run with no pause target does not need (`make bench`
measures the backfill). And the JIT compiles methods of any size: HotSpot leaves a method of
more than 8,000 bytes of bytecode interpreted, and the per-row code Spark generates for a stage
is one method: the write stage's is kept under the limit (`spark.volume_history.volume_runs`),
but graceful-slowdown's policy stages are far over it (its readings and depth, `_by_variant`)."""
STOP_SECONDS = 5.0
"""How long a stopped JVM may take to exit before it is killed: its shutdown hooks (Spark's temp
folders removed) take well under a second; a JVM saving its class archive at exit takes ~20 s."""


def under_spark_submit() -> bool:
    """True when spark-submit started this driver (its JVM is already up and configured)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def runs_here(master: str | None) -> bool:
    """True when the executors are on this machine: `local[...]` (the default), not a cluster
    whose workers have interpreters of their own."""
    return master is None or master.startswith("local")


def spark_session(
    master: str | None = None,
    app_name: str = "kvq-backfill",
    classes: ClassArchive | None = None,
) -> SparkSession:
    """The active session if any, else a new one (local[*] unless `master` or spark-submit say).

    A new local JVM starts from `classes` (a class-data-sharing archive), or writes it at exit."""
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    elif not under_spark_submit():
        builder = builder.master("local[*]")
    java_options = ""
    if not under_spark_submit():
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        if runs_here(master):
            # Spark starts its Python workers with $PYSPARK_PYTHON, else whatever `python3` is
            # first on PATH: another version than the driver's is refused
            # (PYTHON_VERSION_MISMATCH). Workers on this machine run this interpreter.
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        for key, value in LOCAL_DEFAULTS.items():
            builder = builder.config(key, value)
        java_options = " ".join(filter(None, [LOCAL_JAVA_OPTIONS, prepare(classes)]))
        builder = builder.config("spark.driver.extraJavaOptions", java_options)
    with interrupts.deferred():  # a JVM is stopped only once its process is known
        session = builder.getOrCreate()
        session.sparkContext.setLogLevel("ERROR")
        keep_lookups(session.sparkContext._jvm)
        if classes is not None:
            keep_at_exit(classes, java_options, local_jvm())
    return session


def local_jvm() -> subprocess.Popen | None:
    """The JVM this process started for Spark; None under spark-submit or before Spark starts."""
    return getattr(SparkContext._gateway, "proc", None)


def stop_local_jvm() -> None:
    """End the JVM this process started, at once (an interrupted run): SIGTERM, so its shutdown
    hooks remove Spark's temp folders, then SIGKILL after `STOP_SECONDS` (a JVM saving its class
    archive: the next run saves it). Left alone, it would outlive this process (with parent 1)
    until it notices its stdin closed, and not at all while a job keeps it busy. Then the
    processes its tasks started (`spark.shard_blocks`: sh, awk, the block writer), which a stopped
    JVM leaves running."""
    jvm = local_jvm()
    if jvm is None or jvm.poll() is not None:
        return
    STOPPING.set()
    jvm.terminate()
    try:
        jvm.wait(STOP_SECONDS)
    except (subprocess.TimeoutExpired, KeyboardInterrupt):  # or a second Ctrl-C: no waiting
        jvm.kill()
        jvm.wait()
    finally:
        end_descendants()


PR_SET_CHILD_SUBREAPER = 36
"""prctl(2): the orphans below this process are re-parented to it, not to init."""


def adopt_orphans() -> None:
    """Make this process the one the JVM's orphans go to (Linux; elsewhere a no-op): a task's
    helpers outlive a stopped JVM, and only a process they are found below can end them all,
    including one a task started while the JVM was being stopped. For the command that runs the
    backfill (`spark.cli`), not for a process that merely uses a session (its other children's
    orphans would come to it too)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def end_descendants(rounds: int = 10) -> None:
    """SIGKILL every process below this one, again until none is left (a shell killed between
    two looks may have started a child after the first), and reap those that are its own."""
    for _ in range(rounds):
        below = descendants(os.getpid())
        if not below:
            return
        for pid in below:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        for pid in below:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, 0)  # not this process's own child: its parent reaps it


def descendants(pid: int, proc: Path = Path("/proc")) -> list[int]:
    """The processes below `pid` (children, theirs, ...), from /proc; [] where there is none."""
    children: dict[int, list[int]] = {}
    for entry in proc.glob("[0-9]*"):
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # ended meanwhile
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])  # after the command, which may hold ")"
        children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found
