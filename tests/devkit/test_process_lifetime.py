"""Servers started by a test, bench or demo do not outlive it: a SIGKILLed parent takes its
servers with it (the kernel's parent-death signal), and an entry point stopped by SIGTERM stops its
Kafka JVMs and unmounts their tmpfs on the way out; so does `python -m demo`, and so does pytest
(its fixtures' finalizers run, as after Ctrl-C)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from devkit.processes import (
    ManagedProcess,
    ProcessExitedError,
    start_dying_with_parent,
    wait_until,
)
from tests.kafka_support import mounted_paths

REPO = Path(__file__).resolve().parents[2]

SERVER_OF_A_KILLED_PARENT = """
import sys, time
from pathlib import Path
from devkit.processes import ManagedProcess
server = ManagedProcess([sys.executable, "-c", "import time; time.sleep(600)"], Path(sys.argv[1]))
print(server.proc.pid, flush=True)
time.sleep(600)
"""

KAFKA_OF_A_TERMINATED_ENTRY_POINT = """
import sys, threading
from pathlib import Path
from devkit.kafka_cluster import KafkaCluster
from devkit.processes import run_until_interrupted

def main():
    with KafkaCluster(Path(sys.argv[1]), nodes=1, log_dir_bytes=16 << 20) as kafka:
        print(*(node.process.proc.pid for node in kafka.node_list), flush=True)
        threading.Event().wait()

raise SystemExit(run_until_interrupted(main))
"""


A_TEST_HOLDING_A_DEVCLUSTER_PROCESS = """
import time
from tests.devcluster.test_cli import Running

def test_hold(tmp_path):
    running = Running("--data-dir", str(tmp_path / "data"), "--brokers", "1",
                      "--log-dirs-per-broker", "1", "--base-port", "0", "--control-port", "0")
    running.proc.stderr.readline()  # its last line while it runs: a write to a pipe whose
    # reader was killed would end it by itself (EPIPE), whatever started it
    print(f"started={running.proc.pid}", flush=True)
    time.sleep(600)
"""

A_TEST_HOLDING_A_TMPFS = """
import time

def test_hold(mount_tmpfs, tmp_path):
    mount_tmpfs(tmp_path / "disk")
    print(f"started={tmp_path / 'disk'}", flush=True)
    time.sleep(600)
"""


def alive(pid: int) -> bool:
    """Running (a zombie nobody reaped yet counts as dead)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


@contextlib.contextmanager
def python_child(*args: str) -> Iterator[subprocess.Popen]:
    """`python *args` in the repository, its stdout read by the test; killed if still running."""
    process = start_dying_with_parent(
        [sys.executable, *args],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(10)
        assert process.stdout is not None
        process.stdout.close()


@contextlib.contextmanager
def child_pytest(tmp_path: Path, test_source: str) -> Iterator[tuple[subprocess.Popen, str]]:
    """pytest on one test file of `test_source`, with this project's fixtures (tests/conftest.py);
    yields the process and what its test printed after ``started=`` once it did."""
    test_file = tmp_path / "child" / "test_hold.py"
    test_file.parent.mkdir()
    test_file.write_text(test_source)
    pytest_argv = ["-m", "pytest", "-p", "tests.conftest", "-p", "no:cacheprovider"]
    options = ["-s", "-q", "--rootdir", str(test_file.parent), f"--basetemp={tmp_path / 'base'}"]
    with python_child(*pytest_argv, *options, str(test_file)) as pytest_process:
        assert pytest_process.stdout is not None
        for line in pytest_process.stdout:
            if line.startswith("started="):
                break
        else:
            pytest.fail("the child pytest ended before its test started what it holds")
        yield pytest_process, line.removeprefix("started=").strip()


def children(pid: int) -> list[int]:
    """The processes whose parent is `pid`."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            fields = stat.read_text().rpartition(")")[2].split()
            if int(fields[1]) == pid:
                found.append(int(stat.parent.name))
    return found


def kill_leftovers(pids: list[int]) -> None:
    for pid in pids:
        if alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_a_server_dies_with_the_process_that_started_it_even_when_that_is_sigkilled(tmp_path):
    pids: list[int] = []
    with python_child("-c", SERVER_OF_A_KILLED_PARENT, str(tmp_path / "server.log")) as parent:
        try:
            assert parent.stdout is not None
            pids = [int(parent.stdout.readline())]
            assert alive(pids[0])
            parent.kill()  # no clean-up runs: only the kernel can stop the server now
            parent.wait(10)
            wait_until(lambda: not alive(pids[0]), timeout=15, what="the orphaned server gone")
        finally:
            kill_leftovers(pids)


def test_a_process_a_test_started_dies_with_a_sigkilled_pytest(tmp_path):
    """The tests' own process helpers (here test_cli's kvq-devcluster) start through
    `start_dying_with_parent`: a bare Popen's process would live on, ports and all."""
    pids: list[int] = []
    with child_pytest(tmp_path, A_TEST_HOLDING_A_DEVCLUSTER_PROCESS) as (pytest_process, pid):
        try:
            pids = [int(pid)]
            assert alive(pids[0])
            pytest_process.kill()
            pytest_process.wait(10)
            wait_until(lambda: not alive(pids[0]), timeout=15, what="the test's devcluster gone")
        finally:
            kill_leftovers(pids)


def test_sigterm_to_pytest_runs_the_fixtures_finalizers_and_unmounts_their_tmpfs(tmp_path):
    """As Ctrl-C does; Python's default SIGTERM would end pytest at once, the tmpfs mounted."""
    with child_pytest(tmp_path, A_TEST_HOLDING_A_TMPFS) as (pytest_process, disk):
        try:
            assert disk in mounted_paths()
            pytest_process.send_signal(signal.SIGTERM)
            exit_code = pytest_process.wait(60)
            wait_until(lambda: disk not in mounted_paths(), timeout=15, what=f"{disk} unmounted")
            assert exit_code == pytest.ExitCode.INTERRUPTED
        finally:
            if disk in mounted_paths():
                subprocess.run(["umount", "-l", disk], check=False)


def test_a_program_that_does_not_exist_fails_at_start_naming_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="/no/such/prometheus"):
        ManagedProcess(["/no/such/prometheus", "--version"], tmp_path / "log")
    with pytest.raises(FileNotFoundError, match="no-such-program"):
        ManagedProcess(["no-such-program"], tmp_path / "log")


def test_waiting_on_a_server_that_exited_fails_at_once_with_its_own_words(tmp_path):
    argv = [sys.executable, "-c", "import sys; sys.exit('address already in use')"]
    with ManagedProcess(argv, tmp_path / "server.log") as server:
        with pytest.raises(ProcessExitedError, match="(?s)exited with 1.*address already in use"):
            server.wait_ready(lambda: False, timeout=60, what="server ready")
        assert server.proc.returncode == 1  # failed on the exit, not after the 60 s


def test_sigterm_to_an_entry_point_stops_its_kafka_jvm_and_unmounts_its_log_dirs(
    tmp_path, kafka_dist
):
    pids: list[int] = []
    work = tmp_path / "kafka"
    with python_child("-c", KAFKA_OF_A_TERMINATED_ENTRY_POINT, str(work)) as entry_point:
        try:
            assert entry_point.stdout is not None
            line = entry_point.stdout.readline()
            assert line, f"the cluster did not start; logs in {work}"
            pids = [int(pid) for pid in line.split()]
            mounts_of_the_cluster = {p for p in mounted_paths() if p.startswith(str(work))}
            assert mounts_of_the_cluster, "as root the log dirs are tmpfs mounts"
            entry_point.send_signal(signal.SIGTERM)
            assert entry_point.wait(120) == 128 + signal.SIGTERM
            assert not [pid for pid in pids if alive(pid)]
            assert not {p for p in mounted_paths() if p.startswith(str(work))}
        finally:
            kill_leftovers(pids)
            for path in mounted_paths():
                if path.startswith(str(work)):
                    subprocess.run(["umount", "-l", path], check=False)


def test_sigterm_to_the_demo_stops_every_process_of_its_stack_and_removes_its_files():
    """Before, SIGTERM only ended a `--keep` wait: the demo ran on to its end."""
    pids: list[int] = []
    with python_child("-m", "demo") as demo:
        try:
            assert demo.stdout is not None
            first = demo.stdout.readline()
            assert first.startswith("starting the demo stack in "), first
            work = Path(first.removeprefix("starting the demo stack in ").split()[0])
            for line in demo.stdout:
                if "exporter /metrics" in line:  # the stack is up, its URLs printed
                    break
            pids = children(demo.pid)
            assert len(pids) >= 4, "devcluster, exporter, enforcer, Prometheus, Alertmanager"
            demo.send_signal(signal.SIGTERM)
            assert demo.wait(60) == 128 + signal.SIGTERM
            assert not [pid for pid in pids if alive(pid)]
            assert not work.exists()
        finally:
            kill_leftovers(pids)
