"""One SparkSession for the backfill: `local[*]` by default, the cluster's under `spark-submit`."""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import signal
import subprocess
import sys
import warnings
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from pyspark import SparkContext
from pyspark.sql import DataFrame, SparkSession

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
SMALL_INPUT_BYTES = 4 << 20
"""An archive of at most this many bytes (its files as stored, compressed or not) runs on a JVM
whose JIT compiles with its first tier only (`SMALL_INPUT_JAVA_OPTIONS`): a run this short ends
before the optimizing compiler's work pays back the CPU it takes, on the few cores a small
backfill gets (`python -m bench.backfill --jit` measures both sides, and where a large archive
needs the optimizing compiler)."""
SMALL_INPUT_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"
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
    remote: str | None = None,
    input_bytes: Callable[[], int] | None = None,
) -> SparkSession:
    """The active session if any, else a new one (local[*] unless `master` or spark-submit say),
    or with `remote` a session of the Spark Connect server at that `sc://` URL.

    A new local JVM starts from `classes` (a class-data-sharing archive), or writes it at exit;
    it compiles as `local_java_options` says for the input's size, which `input_bytes` measures
    (None: not known). It is asked only when this process starts the JVM: measuring a
    fleet's archive is not free, and a server or spark-submit has its JVM already."""
    if remote is not None:
        return connect_session(remote)
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
        size = input_bytes() if input_bytes is not None else None
        java_options = " ".join(filter(None, [local_java_options(size), prepare(classes)]))
        builder = builder.config("spark.driver.extraJavaOptions", java_options)
    with interrupts.deferred():  # a JVM is stopped only once its process is known
        session = builder.getOrCreate()
        session.sparkContext.setLogLevel("ERROR")
        keep_lookups(session.sparkContext._jvm)
        if classes is not None:
            keep_at_exit(classes, java_options, local_jvm())
    return session


def shown_remote(url: str) -> str:
    """A Spark Connect URL as logs and errors show it: without its parameters (a token among
    them)."""
    return url.split(";", 1)[0]


def connect_session(url: str) -> SparkSession:
    """A session of the Spark Connect server at `url` (`sc://host:port`): the server's driver
    is already running (its JVM started, its classes loaded and compiled), so a run spends its
    time on the job alone; archive and output must be at the same paths for its executors."""
    from pyspark.errors import PySparkException

    shown = shown_remote(url)
    try:
        with interrupts.deferred():
            session = SparkSession.builder.remote(url).getOrCreate()
    except (PySparkException, ValueError) as exc:  # a malformed URL
        raise ConnectError(f"--remote {shown!r}: {one_line(exc)}") from None
    try:
        with patient(session, CONNECT_RETRIES):
            session.version  # noqa: B018 - the first call to the server
    except PySparkException as exc:
        end_remote_session(session)  # else its release at exit retries for ten minutes
        raise ConnectError(
            f"no Spark Connect server answers at {shown}: {one_line(exc)}; start one "
            "(sbin/start-connect-server.sh) or check the host and port"
        ) from None
    return session


CONNECT_RETRIES = 6
"""Retries of the first call to a Connect server (50 ms growing 4x: ~10 s in all), where
PySpark's own policy (for a server restarting mid-run) retries for ten minutes."""


def end_remote_session(session: Any) -> None:
    """Release `session` on its server now, retried once at most (a server gone has nothing
    left to release)."""
    with contextlib.suppress(Exception), patient(session, retries=1):
        session.stop()


@contextlib.contextmanager
def patient(session: Any, retries: int) -> Iterator[None]:
    """Calls to a Connect server retried `retries` times at most, for the block (the retries
    running out is the block's error to report, not a warning of PySpark's)."""
    from pyspark.sql.connect.client.retries import DefaultPolicy

    client = session.client
    policies = client.get_retry_policies()
    client.set_retry_policies([DefaultPolicy(max_retries=retries, max_backoff=5000)])
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "\\[RETRIES_EXCEEDED\\]", UserWarning)
            yield
    finally:
        client.set_retry_policies(policies)


GRPC_DETAILS = re.compile(r'details = "([^"]*)"')


def one_line(error: BaseException) -> str:
    """An error's gist in one line: a gRPC error's details, else the first line (PySpark's
    errors carry pages)."""
    text = str(error).strip()
    found = GRPC_DETAILS.search(text)
    if found:
        return found.group(1)
    return text.splitlines()[0] if text else type(error).__name__


def stop_remote_work() -> None:
    """Interrupt what this process's Spark Connect session runs on its server (an interrupted
    run: the server's tasks would go on writing into the work folders), and end the session."""
    from pyspark.sql.connect.session import SparkSession as RemoteSession

    session = RemoteSession.getActiveSession()
    if session is not None:
        # A server gone meanwhile has nothing left to stop: not retried for minutes.
        with contextlib.suppress(Exception), patient(session, retries=1):
            session.interruptAll()
        end_remote_session(session)


class ConnectError(ValueError):
    """The Spark Connect URL is malformed or its server does not answer; the message says which."""


def is_remote(spark: SparkSession) -> bool:
    """Whether `spark` is a Spark Connect session: no JVM of this process, no py4j, no RDDs."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def default_parallelism(spark: SparkSession) -> int:
    """The cores the session's tasks run on at once (`SparkContext.defaultParallelism`). A Connect
    session has no SparkContext: there, `spark.default.parallelism` where the server's settings
    have it (what defaultParallelism is then), else the slices Spark cuts a range into, which it
    takes from the same setting (a small job: half a second before the run's main job starts),
    asked once per session."""
    from pyspark.sql import functions as F

    if not is_remote(spark):
        return spark.sparkContext.defaultParallelism
    if spark not in _REMOTE_PARALLELISM:
        cores = parallelism_as_set(user_setting(spark, DEFAULT_PARALLELISM))
        if cores is not None:
            _REMOTE_PARALLELISM[spark] = cores
        else:
            slices = spark.range(0, 1 << 16).select(F.spark_partition_id().alias("slice"))
            (last,) = slices.agg(F.max("slice")).collect()
            _REMOTE_PARALLELISM[spark] = int(last[0]) + 1
    return _REMOTE_PARALLELISM[spark]


DEFAULT_PARALLELISM = "spark.default.parallelism"


def parallelism_as_set(setting: str | None) -> int | None:
    """`spark.default.parallelism` as set (a positive whole number), else None: not set, or a
    value Spark would refuse (then the job asks Spark)."""
    if setting is None or not setting.strip().isdigit():
        return None
    return int(setting) or None


_REMOTE_PARALLELISM: weakref.WeakKeyDictionary[SparkSession, int] = weakref.WeakKeyDictionary()
"""`default_parallelism` of each Connect session (a job each time it is asked otherwise)."""


def user_setting(spark: SparkSession, key: str) -> str | None:
    """`key` as the user set it for the run (spark-submit's --conf, the server's settings), else
    None: not Spark's own default."""
    if is_remote(spark):
        return spark.conf.get(key, None)
    conf = spark.sparkContext.getConf()
    return conf.get(key) if conf.contains(key) else None


CHECKPOINT_DIR = "spark.checkpoint.dir"
RELIABLE, LOCAL = "reliable", "local"
"""The checkpoints `checkpointing` takes: in the checkpoint directory, or in the executors."""


def checkpointing(spark: SparkSession) -> Callable[[DataFrame], DataFrame] | None:
    """How the backfill keeps a table it reads twice (graceful slowdown's windows, read for the
    cluster's restarts and for every row: `spark.volume_history.with_cluster_freed`), so that its
    plan runs once and the job's later plans are analysed and compiled without it
    (`python -m bench.backfill --checkpoint`): as `checkpoint_kind` says for the session's
    checkpoint directory and master (None: not kept)."""
    if is_remote(spark):
        directory = spark.conf.get(CHECKPOINT_DIR, None)
        master = spark.conf.get("spark.master", None)
    else:
        directory = spark.sparkContext.getCheckpointDir()
        master = spark.sparkContext.master
    kind = checkpoint_kind(directory, master)
    if kind == RELIABLE:
        return lambda table: table.checkpoint(eager=True)
    if kind == LOCAL:
        return lambda table: table.localCheckpoint(eager=True)
    return None


def checkpoint_kind(directory: str | None, master: str | None) -> str | None:
    """With a checkpoint directory (spark.checkpoint.dir, or SparkContext.setCheckpointDir):
    `RELIABLE`, written there. Else with the executors on this machine (`local[...]`): `LOCAL`,
    in the executors' memory and disk, lost only with the job's own JVM. Else (a cluster, which
    may lose an executor: its local checkpoint could not be computed again, and the job would
    fail) None: the table is planned and computed for each read, and a lost executor's
    partitions are computed again."""
    if directory:
        return RELIABLE
    if master is not None and runs_here(master):
        return LOCAL
    return None


def local_java_options(input_bytes: int | None) -> str:
    """The JVM options of a local driver for an input of `input_bytes`: `LOCAL_JAVA_OPTIONS`, and
    the first-tier JIT only when the input is known to be small (`SMALL_INPUT_BYTES`)."""
    small = input_bytes is not None and input_bytes <= SMALL_INPUT_BYTES
    return f"{LOCAL_JAVA_OPTIONS} {SMALL_INPUT_JAVA_OPTIONS}" if small else LOCAL_JAVA_OPTIONS


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
