"""`kvq-backfill --help`'s spark-submit line, run as shown from outside a source checkout (it
finds the installed module, not a path that only exists in a checkout) against a real Spark
standalone cluster (a master and two workers on this machine, each a JVM of its own), where
the executors build the blocks: the same samples as `local[*]` and the plain-Python replay."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pyspark
import pytest

from devkit.archive_generator import ArchivePlan, generate, write_config
from devkit.processes import managed, server_port, wait_until
from kvq.settings.config import GRACEFUL_SLOWDOWN, THROTTLE_POLICY
from spark.cli import build_parser
from tests.spark.backfill_cli import dumped_samples, replayed_samples


def help_spark_submit_line() -> str:
    epilog = build_parser().epilog or ""
    joined = re.sub(r"\\\n\s*", "", epilog)
    (line,) = [s.strip() for s in joined.splitlines() if s.strip().startswith("spark-submit")]
    return line


def spark_submit(
    tmp_path: Path, master: str, archive: Path, config: Path, output: Path, *extra: str
) -> None:
    """The help's spark-submit line against `master`, run from outside a source checkout,
    `extra` flags after it."""
    line = help_spark_submit_line()
    assert "spark/cli.py" not in line
    command = (
        line.replace("spark://host:7077", master)
        .replace("--archive ...", f"--archive {archive}")
        .replace("--config ...", f"--config {config}")
        .replace("--output ...", f"--output {output}")
    )
    command = " ".join([command, *extra])
    venv_bin = str(Path(sys.executable).parent)
    env = {
        **os.environ,
        "PATH": f"{venv_bin}:{os.environ['PATH']}",
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }
    workdir = tmp_path / "elsewhere"  # not a source checkout
    workdir.mkdir(exist_ok=True)
    result = subprocess.run(
        ["bash", "-c", command], cwd=workdir, env=env, capture_output=True, text=True, timeout=900
    )
    assert result.returncode == 0, command + "\n" + result.stderr[-3000:]


def alive_workers(web_ui: int) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{web_ui}/json/", timeout=5) as answer:
        state = json.load(answer)
    return sum(1 for worker in state["workers"] if worker["state"] == "ALIVE")


@contextlib.contextmanager
def standalone_cluster(folder: Path, workers: int = 2) -> Iterator[str]:
    """A Spark standalone master and `workers` workers (one core each) on loopback, each a JVM
    of pyspark's own `spark-class`; yields the master's URL once every worker registered."""
    spark_class = str(Path(pyspark.__file__).parent / "bin" / "spark-class")
    env = {"SPARK_LOCAL_IP": "127.0.0.1", "SPARK_DAEMON_MEMORY": "256m"}
    port, web_ui = server_port(), server_port()
    folder.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        stack.enter_context(
            managed(
                [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                 "--port", str(port), "--webui-port", str(web_ui)],
                folder / "master.log",
                env=env,
            )
        )  # fmt: skip
        url = f"spark://127.0.0.1:{port}"
        for number in range(workers):
            work = folder / f"worker-{number}"
            work.mkdir(parents=True)
            stack.enter_context(
                managed(
                    [spark_class, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                     "--cores", "1", "--memory", "1g", "--webui-port", str(server_port()),
                     "--work-dir", str(work), url],
                    folder / f"worker-{number}.log",
                    env=env,
                )
            )  # fmt: skip
        wait_until(
            lambda: alive_workers(web_ui) == workers,
            timeout=300,
            interval=0.5,
            what=f"{workers} Spark workers registered with the master",
        )
        yield url


@pytest.mark.timeout(1500)  # three Spark JVMs and a run: minutes on a loaded machine
def test_a_standalone_cluster_builds_the_same_blocks_as_the_replay(tmp_path):
    """The help's spark-submit line with --blocks against a master and two workers, run from
    outside a source checkout (it finds the installed module): the executors (in the workers'
    JVMs) write the blocks, the driver moves them into OUTPUT/blocks, and they hold the same
    samples as the replay (which `kvq-backfill --blocks` in local[*] holds too:
    test_equivalence.py). Under graceful slowdown, with docs/backfill.md's checkpoint
    directory: its windows checkpointed there."""
    archive = tmp_path / "archive"
    generate(ArchivePlan(brokers=2, dirs_per_broker=2, hours=20), archive)  # two 18h ranges
    graceful = {THROTTLE_POLICY: GRACEFUL_SLOWDOWN}
    config = write_config(tmp_path / "kvq.properties", ratio=0.05, extra=graceful)
    expected = replayed_samples(archive, config, 60, tmp_path / "replay")

    cluster = tmp_path / "cluster"
    with standalone_cluster(tmp_path / "spark") as master:
        checkpoints = tmp_path / "checkpoints"
        master_flags = f"{master} --executor-memory 512m --conf spark.checkpoint.dir={checkpoints}"
        spark_submit(tmp_path, master_flags, archive, config, cluster / "x", "--blocks")
    assert list(checkpoints.glob("*/rdd-*"))  # the windows, checkpointed where the docs say
    assert [p.name for p in cluster.iterdir()] == ["x"]
    out = cluster / "x"
    assert [p.name for p in out.iterdir()] == ["blocks"]  # no work folder left
    assert dumped_samples(out / "blocks", tmp_path) == expected
    # the tasks ran in the workers' executors: each worker ran one for the application
    for number in range(2):
        assert list((tmp_path / "spark" / f"worker-{number}").glob("app-*/*/stderr"))
