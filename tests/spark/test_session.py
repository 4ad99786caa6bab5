"""The local session's Python workers run the interpreter that runs kvq, whatever `python3` is
first on PATH (another Python version is refused by Spark: PYTHON_VERSION_MISMATCH)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from spark.session import runs_here


def test_only_a_local_master_runs_the_workers_here() -> None:
    assert runs_here(None) and runs_here("local[1]") and runs_here("local[*]")
    assert not runs_here("spark://master:7077") and not runs_here("k8s://https://api:6443")


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
