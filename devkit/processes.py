"""Start real servers for tests on free loopback ports, wait until ready, always stop them."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Collection, Iterator, Sequence
from pathlib import Path


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on `host` right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def server_port(host: str = "127.0.0.1", avoid: Collection[int] = ()) -> int:
    """A TCP port free on `host` now and below the kernel's ephemeral range, for a server that
    binds it seconds later or binds it again after a restart. `free_port` hands out an ephemeral
    port, which any outgoing connection (of the cluster's own nodes, say) may take meanwhile."""
    low = ephemeral_port_floor()
    for _ in range(1000):
        port = random.randrange(max(1024, low - 12000), low)
        if port in avoid:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free TCP port on {host} below {low}")


def ephemeral_port_floor() -> int:
    """The lowest port the kernel hands to outgoing connections (Linux default 32768)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def wait_until(
    predicate: Callable[[], object], timeout: float = 15.0, interval: float = 0.05, what: str = ""
) -> object:
    """Poll `predicate` until it returns something truthy; fail with `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            result = predicate()
        except Exception as exc:  # noqa: BLE001 - readiness probes fail until ready
            last_error = exc
        else:
            if result:
                return result
        time.sleep(interval)
    detail = f" (last error: {last_error!r})" if last_error else ""
    raise TimeoutError(f"not ready after {timeout:.0f}s: {what}{detail}")


def http_ok(url: str, timeout: float = 1.0) -> bool:
    """True when GET `url` answers 2xx."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return 200 <= response.status < 300
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
        return False


class ManagedProcess:
    """A subprocess whose output goes to a log file and which is stopped on exit, even on error."""

    def __init__(self, argv: Sequence[str], log_path: Path, env: dict | None = None, cwd=None):
        self.argv = list(argv)
        self.log_path = Path(log_path)
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            self.argv,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
            cwd=cwd,
            start_new_session=True,
        )

    @property
    def running(self) -> bool:
        return self.proc.poll() is None

    def log_text(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(errors="replace")

    def signal(self, sig: int) -> None:
        if self.running:
            self.proc.send_signal(sig)

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM, then SIGKILL the whole process group after `timeout` seconds."""
        if self.running:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        self._log.close()
        return self.proc.returncode

    def __enter__(self) -> ManagedProcess:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


@contextlib.contextmanager
def managed(argv: Sequence[str], log_path: Path, **kwargs) -> Iterator[ManagedProcess]:
    process = ManagedProcess(argv, log_path, **kwargs)
    try:
        yield process
    finally:
        process.stop()
