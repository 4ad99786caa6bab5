"""kvq-backfill's output as users meet it: relative and odd output paths, SIGINT/SIGTERM at each
stage (what Ctrl-C, Kubernetes and `timeout` send), a full output disk. docs/backfill.md's
how-to from a fresh folder and a second --blocks run into the same output are in
tests/docs/test_examples_live.py.

Real `kvq-backfill` processes on a generated archive. Every process a run starts (Python, the
JVM, its launcher) inherits a marker in its environment; after the run exits, none may be left."""

from __future__ import annotations

import contextlib
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from devkit.archive_generator import ArchivePlan, generate, write_config
from devkit.processes import start_dying_with_parent
from tests.spark.backfill_cli import run_backfill

REPO = Path(__file__).resolve().parents[2]
MARKER = "KVQ_BACKFILL_TEST_RUN"
WAIT_SECONDS = 300


@pytest.fixture(scope="module")
def archive(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("backfill-output")
    generate(ArchivePlan(brokers=3, dirs_per_broker=2, hours=2), folder / "archive")
    write_config(folder / "kvq.properties")
    return folder / "archive"


@pytest.fixture
def cwd(tmp_path, archive) -> Path:
    """A fresh working directory holding kvq.properties, as in docs/backfill.md's how-to."""
    folder = tmp_path / "cwd"
    folder.mkdir()
    shutil.copy(archive.with_name("kvq.properties"), folder / "kvq.properties")
    return folder


def run_processes(marker: str) -> dict[int, str]:
    """pid -> command line of every process whose environment holds `marker`."""
    wanted = f"{MARKER}={marker}".encode()
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            environment = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
            command = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:  # exited meanwhile
            continue
        if wanted in environment:
            found[int(entry)] = command.decode(errors="replace")[:200]
    return found


class Backfill:
    """A `kvq-backfill` process started in `cwd`, its stderr read line by line as it comes."""

    def __init__(self, cwd: Path, *flags: str, env: dict[str, str] | None = None) -> None:
        self.marker = str(cwd)
        self.process = start_dying_with_parent(
            [sys.executable, "-m", "spark.cli", *flags],
            cwd=cwd,
            env={**os.environ, "PYTHONPATH": str(REPO), MARKER: self.marker, **(env or {})},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.err: list[str] = []
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.process.stderr:
            self.err.append(line)
            self._lines.put(line)
        self._lines.put(None)

    def wait_for_line(self, text: str) -> None:
        while (line := self._lines.get(timeout=WAIT_SECONDS)) is not None:
            if text in line:
                return
        pytest.fail(f"kvq-backfill ended before printing {text!r}:\n{''.join(self.err)}")

    def finish(self) -> tuple[int, str, str, dict[int, str]]:
        """(exit code, stdout, stderr, what of the run was still running when it exited)."""
        code = self.process.wait(WAIT_SECONDS)
        left = run_processes(self.marker)
        self.stop_leftovers()  # they hold its pipes open
        out = self.process.stdout.read()
        self._reader.join(WAIT_SECONDS)
        return code, out, "".join(self.err), left

    def stop_leftovers(self) -> None:
        """Whatever of this run still runs: a JVM still exiting by itself (a finished run's exits
        once it sees its stdin closed) gets 30 s, then it is killed, as after a failed test."""
        for _ in range(300):
            if self.process.poll() is not None and not run_processes(self.marker):
                return
            time.sleep(0.1)  # polling: another process's exit has no event to wait on here
        for pid in run_processes(self.marker):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.process.wait()


def backfill(cwd: Path, *flags: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    run = Backfill(cwd, *flags, env=env)
    try:
        code, out, err, _ = run.finish()
    finally:
        run.stop_leftovers()
    return code, out, err


@pytest.mark.parametrize("output", ["out", "./out", "../x/out"])
def test_a_relative_output_is_resolved_against_the_cwd(
    archive, tmp_path, spark, monkeypatch, output
):
    """In-process, so Spark's JVM runs in another directory than the one the paths are
    relative to: every path handed to it must be absolute."""
    here = tmp_path / "x"
    here.mkdir()
    monkeypatch.chdir(here)
    code = run_backfill(archive, archive.with_name("kvq.properties"), Path(output))
    assert code == 0
    written = here / "out"
    assert (written / "kafka.om").read_text().endswith("# EOF\n")
    assert [p.name for p in written.iterdir()] == ["kafka.om"]


def test_an_output_folder_with_glob_characters_in_its_name(archive, tmp_path, spark):
    """Spark expands {a,b} in the paths it reads (the successes table under the output)."""
    output = tmp_path / "run {1,2} [a]*"
    assert run_backfill(archive, archive.with_name("kvq.properties"), output) == 0
    assert [p.name for p in output.iterdir()] == ["kafka.om"]


def jvm_started(run: Backfill) -> None:
    """Wait until this run's JVM process exists (Spark is starting)."""
    run.wait_for_line("starting Spark")
    for _ in range(WAIT_SECONDS * 10):
        if any("java" in c for p, c in run_processes(run.marker).items() if p != run.process.pid):
            return
        if run.process.poll() is not None:
            pytest.fail(f"kvq-backfill ended while Spark started:\n{''.join(run.err)}")
        time.sleep(0.1)  # polling: a process appearing has no event to wait on
    pytest.fail("no JVM started")


STAGES = {
    # SIGINT while the JVM starts (and writes its class archive at exit: the longest-lived case)
    "spark-starting": (signal.SIGINT, jvm_started, ()),
    # SIGTERM while the Spark job writes the part files
    "spark-job": (
        signal.SIGTERM,
        lambda run: run.wait_for_line("computing and writing the series"),
        (),
    ),
    # SIGTERM while the driver writes kafka.om (30 MB at a 1 s step: ~1 s here); "writing /",
    # the path, not "computing and writing the series"
    "concatenation": (
        signal.SIGTERM,
        lambda run: run.wait_for_line("writing /"),
        ("--step", "PT1S"),
    ),
}


@pytest.mark.parametrize("stage", STAGES)
def test_an_interrupt_leaves_no_jvm_no_partial_file_and_no_debris(archive, cwd, stage):
    signum, reached, flags = STAGES[stage]
    cache = cwd.parent / "class-cache"  # empty: the JVM would write its class archive at exit
    run = Backfill(
        cwd,
        *("--archive", str(archive), "--config", "kvq.properties", "--output", "out", *flags),
        env={"KVQ_CACHE_DIR": str(cache)},
    )
    try:
        reached(run)
        run.process.send_signal(signum)
        code, _, err, left = run.finish()
    finally:
        run.stop_leftovers()
    name = signal.Signals(signum).name
    assert code == 128 + signum, err
    assert f"kvq-backfill: stopped by {name}" in err and "Traceback" not in err, err
    assert "saving Spark's classes" not in err  # the stopped JVM saved none
    assert not left, f"still running after kvq-backfill exited: {left}"
    assert list((cwd / "out").iterdir()) == [], "a partial file or a work folder is left"
    assert not list(cache.glob("*.tmp")), "a partial class archive is left"


@pytest.mark.parametrize(
    ("size", "failing"),
    [
        ("256k", "kafka.om"),  # the part files (128k) fit, the OpenMetrics file (500k) does not
        ("96k", ".spark-parts"),  # the successes table (52k) fits, Spark's part files do not
    ],
)
def test_a_full_output_disk_is_one_line_naming_the_file(archive, cwd, mount_tmpfs, size, failing):
    out = cwd / "out"
    mount_tmpfs(out, size)
    code, _, err = backfill(
        cwd, "--archive", str(archive), "--config", "kvq.properties", "--output", "out"
    )
    assert code == 1, err
    said = [line for line in err.splitlines() if line.startswith("kvq-backfill: ")]
    assert said == [
        f"kvq-backfill: cannot write {'the part files in ' if failing == '.spark-parts' else ''}"
        f"{out / failing}: No space left on device"
    ], err
    assert "Traceback" not in err and "BufferError" not in err
    assert list(out.iterdir()) == [], "a partial file or a work folder is left"


WRITER_STAND_IN = """#!/bin/sh
# Stands in for the block writer: records that it started, then runs until it is stopped.
echo "$@" > "$KVQ_TEST_PROMTOOL_STARTED/$$"
exec sleep 600
"""


def test_an_interrupt_while_the_block_writer_runs_stops_it_and_keeps_the_previous_blocks(
    archive, cwd, tmp_path
):
    """SIGTERM while the executors' block writer builds the blocks: every writer run is stopped,
    the previous run's blocks stay as they were (no partial block where Prometheus would load
    it), and nothing else is left in the output. The kvq-tsdb-blocks and promtool on PATH are
    stand-ins that run until stopped: the real ones build this archive's blocks in a fraction of
    a second, too soon to be interrupted reliably."""
    stand_in, started = tmp_path / "bin", tmp_path / "started"
    stand_in.mkdir()
    started.mkdir()
    for writer in ("kvq-tsdb-blocks", "promtool"):
        (stand_in / writer).write_text(WRITER_STAND_IN)
        (stand_in / writer).chmod(0o755)
    previous = cwd / "out" / "blocks" / "01KPREVIOUSRUN0000000000000"
    previous.mkdir(parents=True)
    (previous / "meta.json").write_text("{}")
    run = Backfill(
        cwd,
        *("--archive", str(archive), "--config", "kvq.properties", "--output", "out", "--blocks"),
        env={
            "PATH": f"{stand_in}{os.pathsep}{os.environ['PATH']}",
            "KVQ_TEST_PROMTOOL_STARTED": str(started),
        },
    )
    try:
        run.wait_for_line("computing the series and writing their blocks")
        for _ in range(WAIT_SECONDS * 10):
            if any(started.iterdir()):
                break
            time.sleep(0.1)  # polling: the stand-in's start has no event to wait on
        assert any(started.iterdir()), "the block writer never started"
        run.process.send_signal(signal.SIGTERM)
        code, _, err, left = run.finish()
    finally:
        run.stop_leftovers()
    assert code == 143, err
    assert "kvq-backfill: stopped by SIGTERM" in err and "Traceback" not in err, err
    assert not left, f"still running after kvq-backfill exited: {left}"
    assert sorted(p.name for p in (cwd / "out").iterdir()) == ["blocks"]
    assert [p.name for p in (cwd / "out" / "blocks").iterdir()] == [previous.name]


def test_a_full_disk_while_building_blocks_is_one_line_and_keeps_the_previous_blocks(
    archive, cwd, mount_tmpfs
):
    """The tasks' block writer builds the blocks in the output's staging folder: a disk that holds
    the successes table but not the blocks fails them in one line naming the folder and the
    cause; nothing is left in the output."""
    out = cwd / "out"
    mount_tmpfs(out, "256k")
    code, _, err = backfill(
        cwd, "--archive", str(archive), "--config", "kvq.properties", "--output", "out", "--blocks"
    )
    assert code == 1, err
    said = [line for line in err.splitlines() if line.startswith("kvq-backfill: ")]
    assert len(said) == 1, err
    assert said[0].startswith(f"kvq-backfill: cannot build the blocks in {out / '.blocks-staging'}")
    assert "no space left on device" in said[0].lower(), err
    assert "Traceback" not in err
    assert list(out.iterdir()) == []
