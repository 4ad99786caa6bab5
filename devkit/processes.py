"""Start real servers for tests on free loopback ports, wait until ready, always stop them."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import logging
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Collection, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from kvq import interrupts

log = logging.getLogger(__name__)

T = TypeVar("T")


PORT_RESERVATION_SECONDS = 900.0
"""How long a port `server_port` handed out stays promised to its caller, across processes: long
enough to cover the seconds until its server binds it and a restart on the same port in the same
test (the enforcer, Alertmanager), short enough that a run's picks do not crowd the range."""


def server_port(host: str = "127.0.0.1", avoid: Collection[int] = ()) -> int:
    """A TCP port free on `host` now and below the kernel's ephemeral range, for a server that
    binds it seconds later or binds it again after a restart. What the kernel hands out for port 0
    is ephemeral: any outgoing connection may take it meanwhile. Below that range only our own
    servers bind, so a port is also reserved for PORT_RESERVATION_SECONDS in a registry every
    process of this user shares: the test lanes run side by side, and a port one of them picked
    for a server it starts after a Kafka cluster must not be picked by another meanwhile."""
    low = ephemeral_port_floor()
    with _port_registry():
        for _ in range(1000):
            port = random.randrange(max(1024, low - 12000), low)
            if port in avoid or _reserved(registry_entry(port)):
                continue
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                try:
                    sock.bind((host, port))
                except OSError:
                    continue
            registry_entry(port).touch()
            return port
    raise RuntimeError(f"no free TCP port on {host} below {low}")


def port_registry() -> Path:
    """The directory of reserved ports, one every process of this user shares."""
    return Path(tempfile.gettempdir()) / f"kvq-ports-{os.getuid()}"


def registry_entry(port: int) -> Path:
    """The file whose mtime is `port`'s reservation."""
    return port_registry() / str(port)


@contextlib.contextmanager
def _port_registry() -> Iterator[None]:
    """The registry held under an exclusive lock, so that two processes never pick one port."""
    registry = port_registry()
    registry.mkdir(mode=0o700, exist_ok=True)
    with open(registry / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _reserved(entry: Path) -> bool:
    try:
        return time.time() - entry.stat().st_mtime < PORT_RESERVATION_SECONDS
    except FileNotFoundError:
        return False


def ephemeral_port_floor() -> int:
    """The lowest port the kernel hands to outgoing connections (Linux default 32768)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


class ProcessExitedError(RuntimeError):
    """The process a test waited on exited before it was ready."""


def wait_until(
    predicate: Callable[[], T | None],
    timeout: float = 15.0,
    interval: float = 0.05,
    what: str = "",
    seen: Callable[[], str] | None = None,
) -> T:
    """Poll `predicate` until it returns something truthy; fail with `what` after `timeout` s,
    and with what `seen()` describes then (the state the wait last found), if given."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            result = predicate()
        except ProcessExitedError:
            raise  # waiting longer cannot help
        except Exception as exc:  # noqa: BLE001 - readiness probes fail until ready
            last_error = exc
        else:
            if result:
                return result
        time.sleep(interval)
    detail = f" (last error: {last_error!r})" if last_error else ""
    raise TimeoutError(f"not ready after {timeout:.0f}s: {what}{detail}{_last_seen(seen)}")


def _last_seen(seen: Callable[[], str] | None) -> str:
    if seen is None:
        return ""
    try:
        return f"; last seen: {seen()}"
    except Exception as exc:  # noqa: BLE001 - the timeout is the failure; this only adds to it
        return f"; last seen: unknown ({exc!r})"


def http_ok(url: str, timeout: float = 1.0) -> bool:
    """True when GET `url` answers 2xx."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return 200 <= response.status < 300
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
        return False


def start_dying_with_parent(argv: Sequence[str], **popen_options: Any) -> subprocess.Popen:
    """`subprocess.Popen(argv)` through util-linux's `setpriv --pdeathsig KILL`: the kernel kills
    the process when the thread that started it ends (PR_SET_PDEATHSIG, kept across exec), so no
    server outlives the test, bench or demo that started it, even one killed by SIGKILL, which runs
    no clean-up. Start it from a thread that lives as long as it (the main thread), not from a
    short-lived worker. Returns once setpriv has armed the signal and exec'd `argv`. Without
    setpriv (not Linux) a plain Popen, with a warning."""
    setpriv = _setpriv()
    if setpriv is None:
        return subprocess.Popen(argv, **popen_options)
    _check_runnable(argv[0], popen_options)
    process = subprocess.Popen([setpriv, "--pdeathsig", "KILL", "--", *argv], **popen_options)
    while process.poll() is None and _executable(process.pid) == setpriv:
        time.sleep(0.001)  # a parent killed before setpriv's prctl would leave an orphan
    return process


@functools.cache
def _setpriv() -> str | None:
    found = shutil.which("setpriv")
    if found is None:
        log.warning("no setpriv (util-linux): processes started here outlive a killed parent")
        return None
    return os.path.realpath(found)


def _check_runnable(program: str, popen_options: dict[str, Any]) -> None:
    """Popen's own error for a program it cannot run, which setpriv would only print."""
    if "/" in program:
        path = os.path.join(popen_options.get("cwd") or "", program)
        runnable = os.path.isfile(path) and os.access(path, os.X_OK)
    else:
        search_path = os.pathsep.join(os.get_exec_path(popen_options.get("env")))
        runnable = shutil.which(program, path=search_path) is not None
    if not runnable:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)


def _executable(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return None


def run_until_interrupted(main: Callable[[], int | None]) -> int:
    """A command's entry point: SIGINT and SIGTERM (`kill`, Kubernetes, systemd) unwind `main`
    through every `finally` and `with` as Ctrl-C does (`kvq.interrupts`), so the servers it
    started are stopped and its file systems unmounted; on Python's default SIGTERM the process
    dies at once and leaves them behind. Returns main's exit code, or 128 + the signal's number."""
    try:
        with interrupts.raised():
            return main() or 0
    except interrupts.Interrupted as exc:
        print(f"stopped by {exc.name}", file=sys.stderr)
        return exc.exit_code


class ManagedProcess:
    """A subprocess whose output goes to a log file and which is stopped on exit, even on error,
    and killed by the kernel when the thread that started it ends (`start_dying_with_parent`)."""

    def __init__(self, argv: Sequence[str], log_path: Path, env: dict | None = None, cwd=None):
        self.argv = list(argv)
        self.log_path = Path(log_path)
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = start_dying_with_parent(
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

    def wait_ready(self, predicate: Callable[[], T | None], timeout: float, what: str) -> T:
        """`wait_until(predicate)`, failing at once when the process has exited, and with the end
        of its log either way: a server that could not start says why."""

        def ready_or_exited() -> T | None:
            if not self.running:
                raise ProcessExitedError(f"{what}: exited with {self.proc.returncode}")
            return predicate()

        try:
            return wait_until(ready_or_exited, timeout=timeout, what=what)
        except (TimeoutError, ProcessExitedError) as exc:
            tail = "\n".join(self.log_text().splitlines()[-20:])
            raise type(exc)(f"{exc}; the end of its log:\n{tail}") from None

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
