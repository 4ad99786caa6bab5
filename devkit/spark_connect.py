"""A Spark Connect server on loopback, as `start-connect-server.sh` starts one, for the tests and
the bench of `kvq-backfill --remote`: pyspark's own `spark-submit` and the Connect jar its wheel
ships, a JVM stopped with the block."""

from __future__ import annotations

import contextlib
import os
import socket
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import pyspark

from devkit.processes import ManagedProcess, server_port

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


def accepts(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1.0)
        return sock.connect_ex(("127.0.0.1", port)) == 0


@contextlib.contextmanager
def connect_server(
    folder: Path, master: str = "local[2]", conf: Mapping[str, str] | None = None
) -> Iterator[str]:
    """A Connect server (its driver a JVM of its own, `master` its executors) with `conf`; yields
    its `sc://` URL once it takes connections; its log is `folder`/connect-server.log."""
    home = Path(pyspark.__file__).parent
    port = server_port()
    settings = {
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
        "spark.ui.enabled": "false",
        "spark.sql.session.timeZone": "UTC",
        **(conf or {}),
    }
    argv = [str(home / "bin" / "spark-submit"), "--class", SERVER_CLASS, "--master", master]
    for key, value in settings.items():
        argv += ["--conf", f"{key}={value}"]
    argv += ["--name", "Spark Connect server", "spark-internal"]
    folder.mkdir(parents=True, exist_ok=True)
    env = {
        "SPARK_HOME": str(home),
        "SPARK_LOCAL_IP": "127.0.0.1",
        # Its Python workers and TRANSFORM scripts run with the client's interpreter and tools.
        "PYSPARK_PYTHON": sys.executable,
        "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
    }
    with ManagedProcess(argv, folder / "connect-server.log", env=env) as server:
        server.wait_ready(lambda: accepts(port), timeout=300, what="Spark Connect server")
        yield f"sc://127.0.0.1:{port}"
