"""`kvq-backfill --remote sc://...` (or $SPARK_REMOTE) against a real Spark Connect server (the
one PySpark's wheel ships, started as `start-connect-server.sh` starts it): the same blocks and
the same OpenMetrics file as a local run; bad or dead URLs as one line; an interrupted run stops
the server's tasks and leaves the previous blocks as they were."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from devkit.archive_generator import ArchivePlan, generate, write_config
from devkit.processes import server_port, wait_until
from devkit.spark_connect import connect_server
from kvq.settings.config import GRACEFUL_SLOWDOWN, THROTTLE_POLICY
from spark.job import work_folders
from tests.spark.backfill_cli import dumped_samples, replayed_samples, run_backfill
from tests.spark.test_backfill_output import WRITER_STAND_IN, Backfill

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(900)  # Spark on a loaded machine: minutes


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[str]:
    # docs/backfill.md's server: its JVM options (on local[2], where the docs have a cluster)
    options = "-XX:-DontCompileHugeMethods"
    conf = {"spark.driver.extraJavaOptions": options, "spark.executor.extraJavaOptions": options}
    with connect_server(tmp_path_factory.mktemp("connect-server"), "local[2]", conf) as url:
        yield url


def remote_backfill(cwd: Path, *flags: str, env: dict[str, str] | None = None):
    """`kvq-backfill FLAGS` as a process of its own (a Connect client, as users run it)."""
    return subprocess.run(
        [sys.executable, "-m", "spark.cli", *flags],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_a_connect_server_builds_the_same_blocks_and_file_as_a_local_run(server, tmp_path, spark):
    """The blocks under graceful slowdown, whose windows the job reads twice (kept on the
    server as `spark.session.checkpointing` says for its master), hold the replay's samples
    (as a local run's do: test_equivalence.py); the file, under the proposal's policy, is a
    local run's byte for byte."""
    archive = tmp_path / "archive"
    generate(ArchivePlan(brokers=2, dirs_per_broker=2, hours=20), archive)  # two 18h ranges
    graceful = {THROTTLE_POLICY: GRACEFUL_SLOWDOWN}
    slowing = write_config(tmp_path / "graceful.properties", ratio=0.05, extra=graceful)
    config = write_config(tmp_path / "kvq.properties", ratio=0.05)
    local = tmp_path / "local"
    assert run_backfill(archive, config, local) == 0
    required = ("--archive", str(archive), "--config", str(config))

    flags = ("--output", "remote", "--blocks", "--remote", server)
    blocks = remote_backfill(tmp_path, "--archive", str(archive), "--config", str(slowing), *flags)
    assert blocks.returncode == 0, blocks.stderr
    assert f"connecting to the Spark Connect server {server}" in blocks.stderr
    remote = tmp_path / "remote"
    replayed = replayed_samples(archive, slowing, 60, tmp_path / "replay")
    assert dumped_samples(remote / "blocks", tmp_path) == replayed

    # $SPARK_REMOTE, as PySpark's own clients take it
    text = remote_backfill(tmp_path, *required, "--output", "remote", env={"SPARK_REMOTE": server})
    assert text.returncode == 0, text.stderr
    assert "connecting to the Spark Connect server" in text.stderr
    assert (remote / "kafka.om").read_bytes() == (local / "kafka.om").read_bytes()
    assert not any(folder.exists() for folder in work_folders(remote))


def test_a_url_that_is_not_spark_connect_or_finds_no_server_is_one_line(tmp_path):
    archive = tmp_path / "archive"
    generate(ArchivePlan(brokers=1, dirs_per_broker=1, hours=1), archive)
    config = write_config(tmp_path / "kvq.properties")
    required = ("--archive", str(archive), "--config", str(config), "--output", "out")

    wrong = remote_backfill(tmp_path, *required, "--remote", "http://spark:15002/;token=s3cret")
    assert wrong.returncode == 2, wrong.stderr
    assert "--remote 'http://spark:15002/;token=***' is not a Spark Connect URL" in wrong.stderr
    assert "s3cret" not in wrong.stderr

    both = remote_backfill(tmp_path, *required, "--remote", "sc://spark", "--master", "local[1]")
    assert both.returncode == 2 and "not allowed with argument" in both.stderr, both.stderr

    closed = server_port()  # nothing listens there
    started = time.monotonic()
    url = f"sc://127.0.0.1:{closed}"
    dead = remote_backfill(tmp_path, *required, "--remote", f"{url}/;token=s3cret")
    assert dead.returncode == 1, dead.stderr
    said = [line for line in dead.stderr.splitlines() if line.startswith("kvq-backfill: ")]
    assert len(said) == 1, dead.stderr
    assert said[0].startswith(f"kvq-backfill: no Spark Connect server answers at {url}/: ")
    assert "Connection refused" in said[0] and "Traceback" not in dead.stderr
    assert "s3cret" not in dead.stderr and "RETRIES_EXCEEDED" not in dead.stderr
    assert time.monotonic() - started < 120  # not PySpark's ten minutes of retries


def test_an_interrupt_stops_the_servers_tasks_and_keeps_the_previous_blocks(server, tmp_path):
    """SIGTERM to the client while the server's tasks run the block writer (a stand-in that runs
    until stopped): the client exits as a local run does, every writer on the server ends, the
    previous blocks stay as they were, and the server takes the next run."""
    archive = tmp_path / "archive"
    generate(ArchivePlan(brokers=2, dirs_per_broker=1, hours=2), archive)
    config = write_config(tmp_path / "kvq.properties")
    stand_in, started = tmp_path / "bin", tmp_path / "started"
    stand_in.mkdir()
    started.mkdir()
    writer = stand_in / "kvq-tsdb-blocks"  # the server's tasks do not see this test's env
    writer.write_text(WRITER_STAND_IN.replace("$KVQ_TEST_PROMTOOL_STARTED", str(started)))
    writer.chmod(0o755)
    previous = tmp_path / "out" / "blocks" / "01KPREVIOUSRUN0000000000000"
    previous.mkdir(parents=True)
    (previous / "meta.json").write_text("{}")
    flags = ("--archive", str(archive), "--config", str(config), "--output", "out", "--blocks")
    run = Backfill(
        tmp_path,
        *flags,
        "--remote",
        server,
        # The client finds the writer on its PATH and hands the server's tasks its path.
        env={"PATH": f"{stand_in}{os.pathsep}{os.environ['PATH']}"},
    )
    try:
        run.wait_for_line("computing the series and writing their blocks")
        wait_until(lambda: writers(started), timeout=300, what="the block writer started")
        run.process.send_signal(signal.SIGTERM)
        code, _, err, _ = run.finish()
    finally:
        run.stop_leftovers()
    assert code == 143, err
    assert "kvq-backfill: stopped by SIGTERM" in err and "Traceback" not in err, err
    wait_until(lambda: not alive(writers(started)), timeout=60, what="the server's writers ended")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["blocks"]
    assert [p.name for p in (tmp_path / "out" / "blocks").iterdir()] == [previous.name]

    again = remote_backfill(tmp_path, *flags[:-1], "--remote", server)
    assert again.returncode == 0, again.stderr


def writers(started: Path) -> list[int]:
    """The pids the stand-in writers recorded (a file each, named by pid)."""
    return [int(p.name) for p in started.iterdir() if p.name.isdigit()]


def alive(pids: list[int]) -> list[int]:
    return [pid for pid in pids if Path(f"/proc/{pid}").exists()]
