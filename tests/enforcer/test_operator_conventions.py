"""`kvq-enforcer` with the flags and logs a Prometheus exporter's operator expects."""

from __future__ import annotations

import json
import signal
import sys

import requests

from devkit.processes import ManagedProcess, http_ok, server_port

P = "client.quota.callback.static."


def test_every_interface_telemetry_path_and_json_logs(tmp_path):
    config = tmp_path / "kvq.properties"
    config.write_text(
        f"{P}kafka.admin.bootstrap.servers=127.0.0.1:1\n"
        f"{P}storage.per.volume.limit.min.available.ratio=0.05\n"
        f"kvq.enforcer.journal={tmp_path / 'journal.sqlite3'}\n"
    )
    port = server_port()
    argv = [sys.executable, "-m", "enforcer.cli", "--config", str(config), "--insecure-no-auth"]
    argv += ["--web.listen-address", f":{port}", "--web.telemetry-path", "/kvq/metrics"]
    process = ManagedProcess([*argv, "--log.format", "json"], tmp_path / "enforcer.log")
    try:
        base = f"http://127.0.0.2:{port}"  # reaches a socket bound to every interface only
        process.wait_ready(lambda: http_ok(base + "/ready"), timeout=30, what="enforcer /ready")
        metrics = requests.get(base + "/kvq/metrics", timeout=5)
        assert metrics.status_code == 200 and "kafka_volume_quota_enforcer" in metrics.text
        assert requests.get(base + "/metrics", timeout=5).status_code == 404
        process.signal(signal.SIGTERM)
        assert process.proc.wait(timeout=20) == 0
    finally:
        process.stop()
    records = [json.loads(line) for line in process.log_text().splitlines()]  # JSON only
    assert any(r["msg"].startswith("listening on http://") for r in records), records
