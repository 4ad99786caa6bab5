"""The local session's Python workers run the interpreter that runs kvq, whatever `python3` is
first on PATH (another Python version is refused by Spark: PYTHON_VERSION_MISMATCH); a stopped
JVM's task processes are found below it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from spark.session import (
    LOCAL,
    LOCAL_JAVA_OPTIONS,
    RELIABLE,
    SMALL_INPUT_BYTES,
    checkpoint_kind,
    checkpointing,
    descendants,
    local_java_options,
    parallelism_as_set,
    runs_here,
    spark_session,
)


def test_only_a_local_master_runs_the_workers_here() -> None:
    assert runs_here(None) and runs_here("local[1]") and runs_here("local[*]")
    assert not runs_here("spark://master:7077") and not runs_here("k8s://https://api:6443")


def test_only_a_small_archive_runs_on_the_first_tier_jit() -> None:
    first_tier = "-XX:TieredStopAtLevel=1"
    assert first_tier in local_java_options(0)
    assert first_tier in local_java_options(SMALL_INPUT_BYTES)
    assert local_java_options(SMALL_INPUT_BYTES + 1) == LOCAL_JAVA_OPTIONS
    assert local_java_options(None) == LOCAL_JAVA_OPTIONS  # not known: a large one


def test_a_session_for_a_small_input_starts_its_jvm_with_the_first_tier_jit(spark) -> None:
    options = spark.sparkContext.getConf().get("spark.driver.extraJavaOptions")
    assert "-XX:TieredStopAtLevel=1" in options and LOCAL_JAVA_OPTIONS in options


def test_a_table_read_twice_is_checkpointed_where_no_lost_executor_fails_the_job() -> None:
    """A checkpoint directory: a reliable checkpoint there, on any master. Without one, a local
    checkpoint only where the executors are this JVM; on a cluster, computed for each read."""
    assert checkpoint_kind("hdfs://nn/kvq", "spark://master:7077") == RELIABLE
    assert checkpoint_kind("/tmp/checkpoints", "local[*]") == RELIABLE
    assert checkpoint_kind(None, "local[2]") == LOCAL and checkpoint_kind("", "local") == LOCAL
    assert checkpoint_kind(None, "spark://master:7077") is None
    assert checkpoint_kind(None, "k8s://https://api:6443") is None
    assert checkpoint_kind(None, None) is None  # a Connect server that does not say


def test_a_local_session_keeps_a_table_with_its_plan_cut(spark) -> None:
    """The local run's checkpoint: the same rows, and what reads it plans none of what made it."""
    table = spark.range(6).selectExpr("id * 7 AS sevens")
    cut = checkpointing(spark)
    assert cut is not None
    kept = cut(table)
    assert [row.sevens for row in kept.orderBy("sevens").collect()] == [0, 7, 14, 21, 28, 35]
    assert "Range" in table._jdf.queryExecution().analyzed().toString()
    assert "Range" not in kept._jdf.queryExecution().analyzed().toString()


def test_a_servers_parallelism_setting_is_taken_as_set() -> None:
    """A Connect client asks the server's `spark.default.parallelism` before it runs a job to find
    it: a positive whole number is the answer, anything else leaves it to the job."""
    assert parallelism_as_set("64") == 64 and parallelism_as_set(" 8 ") == 8
    assert parallelism_as_set(None) is None and parallelism_as_set("0") is None
    assert parallelism_as_set("-2") is None and parallelism_as_set("many") is None


def test_the_input_is_measured_only_when_a_jvm_starts_here(spark) -> None:
    """A fleet's archive is not stat'ed file by file for nothing: with a JVM already running
    (here the tests' session; a Connect server, spark-submit's) its size is never asked."""

    def measure() -> int:
        raise AssertionError("the input was measured for a JVM already running")

    assert spark_session(input_bytes=measure) is spark


def test_the_workers_run_this_interpreter(tmp_path) -> None:
    """A `python3` first on PATH that is not this interpreter (here: one that refuses to run)
    is not what the workers start: a Python UDF's answer comes from `sys.executable`."""
    fake = tmp_path / "bin" / "python3"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'not the interpreter kvq runs on' >&2\nexit 3\n")
    fake.chmod(0o755)
    script = textwrap.dedent(
        """
        import sys
        from pyspark.sql.functions import udf
        from spark.session import spark_session, stop_local_jvm

        spark = spark_session("local[1]")
        where = udf(lambda _: sys.executable)
        print(spark.range(1).select(where("id")).first()[0])
        stop_local_jvm()
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "PYSPARK_PYTHON"}
    env["PATH"] = f"{fake.parent}:{env['PATH']}"
    ran = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=180
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert ran.stdout.strip().splitlines()[-1] == sys.executable


def test_the_processes_below_a_jvm_are_found_at_every_depth(tmp_path) -> None:
    """`descendants` reads each process's parent from /proc/PID/stat, after the command (which
    may hold spaces and parentheses): the JVM's sh, its awk and promtool, not its siblings."""
    table = {
        10: ("java", 1),
        11: ("sh", 10),
        12: ("awk (x) y", 11),
        13: ("promtool", 11),
        20: ("x", 1),
    }
    for pid, (command, parent) in table.items():
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "stat").write_text(f"{pid} ({command}) S {parent} 1 1 0\n")
    (tmp_path / "self").mkdir()  # not a process number: skipped
    assert sorted(descendants(10, tmp_path)) == [11, 12, 13]
    assert descendants(13, tmp_path) == []


def test_a_helper_orphaned_by_its_shell_is_still_ended(tmp_path) -> None:
    """A task's shell gone before its child (killed while it started the block writer) leaves
    an orphan: the driver adopts it (`adopt_orphans`) and `end_descendants` ends it with the
    rest. Run in a process of its own: pytest's is not made a subreaper."""
    script = textwrap.dedent(
        """
        import os, subprocess
        from spark.session import adopt_orphans, end_descendants

        adopt_orphans()
        start = "sleep 600 >/dev/null 2>&1 & echo $!"  # the shell exits, its child runs on
        shell = subprocess.run(["sh", "-c", start], capture_output=True, text=True)
        orphan = int(shell.stdout)
        with open(f"/proc/{orphan}/stat") as stat:
            print("parent", stat.read().rsplit(")", 1)[1].split()[1] == str(os.getpid()))
        end_descendants()
        print("ended", not os.path.exists(f"/proc/{orphan}"))
        """
    )
    ran = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert ran.stdout.split() == ["parent", "True", "ended", "True"]


def test_column_functions_ask_the_jvm_nothing_but_the_call(spark, monkeypatch) -> None:
    """PySpark's lookups of the functions' class and method by name are answered once per JVM
    (`spark.jvm_lookups`): building a Column is its call alone (and the freeing of Java objects
    Python no longer holds), no reflection round trip."""
    from pyspark.sql import functions as F

    client = spark.sparkContext._gateway._gateway_client
    sent: list[str] = []
    send = client.send_command

    def recorded(command, *args, **kwargs):
        sent.append(command.split("\n", 1)[0])
        return send(command, *args, **kwargs)

    def column():
        return F.when(F.col("x") > F.lit(1), F.coalesce(F.col("y"), F.lit(2)))

    column()  # each function looked up once
    monkeypatch.setattr(client, "send_command", recorded)
    column()
    assert "r" not in sent  # py4j's reflection command
    assert sent.count("c") >= 5  # the calls themselves
