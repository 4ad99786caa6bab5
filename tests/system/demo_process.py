"""`python -m demo ...` as a test runs it: output captured, stopped cleanly past a timeout."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from devkit.processes import start_dying_with_parent

ROOT = Path(__file__).resolve().parents[2]


def run_demo(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    """`python -m demo *args`; past the timeout it is interrupted (SIGINT) so that it stops its
    Kafka JVMs and unmounts its file systems itself, as after Ctrl-C."""
    process = start_dying_with_parent(
        [sys.executable, "-m", "demo", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)
        pytest.fail(f"demo {' '.join(args)} still running after {timeout:.0f} s:\n{out[-3000:]}")
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)
