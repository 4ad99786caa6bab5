"""`kvq-exporter` as operators run it: a process serving HTTP, exiting cleanly on SIGTERM."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest
import requests

from devcluster.cluster import DevCluster
from devkit.processes import ManagedProcess, http_ok, server_port
from kvq.contract.archive_record import from_line

P = "client.quota.callback.static."


@pytest.fixture
def cluster(tmp_path):
    # a volume of its own size (1 TiB, nearly all free), not the host disk: a healthy cluster
    with DevCluster(
        brokers=2, log_dirs_per_broker=2, data_dir=tmp_path / "data", capacity_bytes=1 << 40
    ) as dc:
        yield dc


def write_config(tmp_path, cluster, archive_dir):
    path = tmp_path / "kvq.properties"
    path.write_text(
        f"{P}kafka.admin.bootstrap.servers={cluster.bootstrap}\n"
        f"{P}storage.per.volume.limit.min.available.ratio=0.05\n"
        f"{P}storage.check.interval=PT1S\n"
        f"kvq.exporter.archive.dir={archive_dir}\n"
        "kvq.cluster.name=test-cluster\n"
    )
    return path


def test_serves_metrics_promtool_accepts_and_exits_cleanly_on_sigterm(tmp_path, cluster):
    config = write_config(tmp_path, cluster, tmp_path / "archive")
    port = server_port()
    argv = [sys.executable, "-m", "exporter.cli", "--config", str(config)]
    process = ManagedProcess([*argv, "--listen", f"127.0.0.1:{port}"], tmp_path / "exporter.log")
    try:
        base = f"http://127.0.0.1:{port}"
        process.wait_ready(lambda: http_ok(base + "/ready"), timeout=30, what="exporter /ready")
        assert http_ok(base + "/healthz")
        metrics = requests.get(base + "/metrics", timeout=5).text
        assert 'kafka_volume_quota_throttle_factor{cluster="test-cluster"} 1.0' in metrics
        assert 'kafka_volume_quota_active_brokers{cluster="test-cluster"} 2.0' in metrics
        assert "kafka_volume_quota_poll_duration_seconds_bucket" in metrics
        check = subprocess.run(
            ["promtool", "check", "metrics"], input=metrics, capture_output=True, text=True
        )
        assert check.returncode == 0 and check.stdout + check.stderr == "", check.stderr
        status = requests.get(base + "/status", timeout=5).json()
        assert status["state"] == "valid" and status["cluster"] == "test-cluster"
        process.signal(signal.SIGTERM)
        assert process.proc.wait(timeout=20) == 0
    finally:
        process.stop()
    assert "Traceback" not in process.log_text()
    (hour_file,) = (tmp_path / "archive" / "test-cluster").glob("*/*.jsonl")
    records = [from_line(line) for line in hour_file.read_text().splitlines()]
    assert records and all(cluster == "test-cluster" for cluster, _ in records)
    assert all(observation.succeeded for _, observation in records)


def test_once_prints_the_observation_and_factor_and_exits_by_outcome(tmp_path, cluster):
    config = write_config(tmp_path, cluster, tmp_path / "archive")
    argv = [sys.executable, "-m", "exporter.cli", "--config", str(config), "--once"]
    ok = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0, ok.stderr
    document = json.loads(ok.stdout)
    assert document["observation"]["outcome"] == "success"
    assert len(document["observation"]["log_dirs"]) == 4
    assert document["status"]["throttle_factor"] == 1.0

    requests.put(
        f"{cluster.control_url}/brokers/1/faults", json={"fail_describe_log_dirs": True}, timeout=5
    ).raise_for_status()
    failed = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert failed.returncode == 1
    assert json.loads(failed.stdout)["observation"]["failure_stage"] == "describe_log_dirs"
