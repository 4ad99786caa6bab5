"""A kvq-enforcer process as users run it (`python -m enforcer.cli`), for bench and the demo."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from devkit.kafka_cluster import kafka_admin_settings
from devkit.processes import ManagedProcess, http_ok, server_port, wait_until

TOKEN = "bench-token"
"""The bearer token its webhook takes."""
P = "client.quota.callback.static."


def log_times(log: Path, text: str) -> list[float]:
    """The Unix times of the lines of an enforcer's log (logfmt, `ts=` first) containing
    `text`."""
    times = []
    for line in log.read_text(errors="replace").splitlines():
        if text in line and line.startswith("ts="):
            stamp = line.split()[0][3:]
            times.append(datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp())
    return times


@dataclass(frozen=True)
class RunningEnforcer:
    url: str
    pid: int


def write_config(
    admin_properties: Mapping[str, str],
    work_dir: Path,
    cluster: str = "bench",
    settings: Mapping[str, str] | None = None,
) -> Path:
    """`work_dir/kvq.properties` of the enforcer `running_enforcer` starts (and its token file):
    `settings` over a produce base of 10 MB/s, for `admin_properties` as cluster `cluster`."""
    (work_dir / "token").write_text(TOKEN + "\n")
    properties = {
        **kafka_admin_settings(admin_properties),
        f"{P}storage.per.volume.limit.min.available.ratio": "0.05",
        f"{P}produce": "10000000",
        "kvq.cluster.name": cluster,
        "kvq.enforcer.auth.bearer.token.file": str(work_dir / "token"),
        **(settings or {}),
    }
    config = work_dir / "kvq.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in properties.items()))
    return config


@contextlib.contextmanager
def running_enforcer(
    admin_properties: Mapping[str, str],
    work_dir: Path,
    threads: int = 4,
    code: Path | None = None,
    cluster: str = "bench",
    settings: Mapping[str, str] | None = None,
) -> Iterator[RunningEnforcer]:
    """A kvq-enforcer for `admin_properties` as cluster `cluster`, with `settings` over a
    produce base of 10 MB/s; yields it once it answers /healthz, stops it on exit. `code`:
    run the enforcer of that checkout instead of this one."""
    config = write_config(admin_properties, work_dir, cluster, settings)
    port = server_port()
    url = f"http://127.0.0.1:{port}"
    argv = [
        sys.executable, "-m", "enforcer.cli", "--config", str(config),
        "--listen", f"127.0.0.1:{port}", "--journal", str(work_dir / "journal.sqlite3"),
        "--threads", str(threads),
    ]  # fmt: skip
    env = {"PYTHONPATH": str(code)} if code is not None else None
    with ManagedProcess(argv, work_dir / "enforcer.log", env=env, cwd=code) as process:
        wait_until(lambda: http_ok(url + "/healthz"), 60, what="kvq-enforcer /healthz")
        if not process.running:
            raise RuntimeError(f"kvq-enforcer exited:\n{process.log_text()[-2000:]}")
        yield RunningEnforcer(url, process.proc.pid)
