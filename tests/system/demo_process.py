"""`python -m demo ...` as a test runs it: output captured, stopped cleanly past a timeout."""

from __future__ import annotations

import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from devkit.processes import start_dying_with_parent

ROOT = Path(__file__).resolve().parents[2]


class DemoProcess:
    """`python -m demo *args` started in the background; ``result()`` waits for it. Its output
    goes to temp files, not pipes: a demo nobody reads yet (another one is being waited for) never
    blocks on a full pipe."""

    def __init__(self, *args: str, timeout: float = 900):
        self.args = args
        self.timeout = timeout
        self._deadline = time.monotonic() + timeout
        self._out = tempfile.TemporaryFile("w+")  # noqa: SIM115 - closed in close()
        self._err = tempfile.TemporaryFile("w+")  # noqa: SIM115 - closed in close()
        self.process = start_dying_with_parent(
            [sys.executable, "-m", "demo", *args],
            cwd=ROOT,
            stdout=self._out,
            stderr=self._err,
            text=True,
        )

    def result(self) -> subprocess.CompletedProcess:
        """Its exit code and output; past the timeout (counted from its start) it is interrupted
        (SIGINT) so that it stops its Kafka JVMs and unmounts its file systems itself, as after
        Ctrl-C, and the test fails."""
        try:
            self.process.wait(timeout=max(0.0, self._deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.stop()
            out = self._read(self._out)
            pytest.fail(
                f"demo {' '.join(self.args)} still running after {self.timeout:.0f} s:\n"
                f"{out[-3000:]}"
            )
        return subprocess.CompletedProcess(
            self.process.args, self.process.returncode, self._read(self._out), self._read(self._err)
        )

    def stop(self) -> None:
        """Interrupt it if it still runs (as Ctrl-C), killed if it has not stopped 60 s later."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    @staticmethod
    def _read(file) -> str:
        file.seek(0)
        return file.read()

    def close(self) -> None:
        self.stop()
        self._out.close()
        self._err.close()


def run_demo(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    """`python -m demo *args` to its end (see DemoProcess.result)."""
    demo = DemoProcess(*args, timeout=timeout)
    try:
        return demo.result()
    finally:
        demo.close()
