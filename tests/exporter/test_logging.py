"""Every line the exporter writes goes through Python logging in the chosen format: no raw client
lines on stderr, and one line saying what failed instead of the client's every reconnect."""

import json
import re
import socket
import subprocess
import sys

import pytest

P = "client.quota.callback.static."
LOGFMT = re.compile(r'^ts=\S+Z level=(debug|info|warn|error) logger=\S+ msg=("(\\.|[^"\\])*"|\S+)')


def unreachable_bootstrap() -> str:
    with socket.socket() as sock:  # a loopback port nobody listens on once closed
        sock.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{sock.getsockname()[1]}"


@pytest.mark.parametrize("fmt", ["logfmt", "json"])
def test_an_unreachable_bootstrap_logs_lines_in_the_format_naming_the_address(tmp_path, fmt):
    path = tmp_path / "kvq.properties"
    bootstrap = unreachable_bootstrap()
    path.write_text(
        f"{P}kafka.admin.bootstrap.servers={bootstrap}\n"
        f"{P}storage.per.volume.limit.min.available.ratio=0.05\n"
        "kvq.exporter.request.timeout=PT2S\n"
    )
    result = subprocess.run(
        [sys.executable, "-m", "exporter.cli", "--config", str(path), "--once"]
        + ["--log.format", fmt],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1  # the poll failed
    lines = result.stderr.splitlines()
    assert not [line for line in lines if line.startswith("%")], result.stderr
    if fmt == "json":
        records = [json.loads(line) for line in lines]
    else:
        assert all(LOGFMT.match(line) for line in lines), result.stderr
        records = [{"logger": line.split(" logger=")[1].split(" ")[0]} for line in lines]
    loggers = [r["logger"] for r in records]
    assert loggers == ["kvq.exporter"], "kafka-python's reconnect lines stay quiet"
    assert f"cannot reach Kafka at {bootstrap}" in result.stderr
