"""The exporter's HTTP face as Prometheus and operators meet it: idle connections, gzip, HEAD,
the landing page, build info and process metrics, TLS and basic auth from --web.config.file."""

from __future__ import annotations

import contextlib
import gzip
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from devcluster.cluster import DevCluster
from devkit.processes import ManagedProcess, http_ok, server_port, wait_until
from devkit.tls_certificates import make_pki
from devkit.web_clients import held_connections, write_web_config
from exporter.cli import build_parser
from exporter.exporter_app import Exporter
from exporter.http_server import exporter_routes
from exporter.settings import OTHER_PATHS, ExporterSettings

P = "client.quota.callback.static."
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def cluster(tmp_path):
    # a volume of its own size (1 TiB, nearly all free), not the host disk: a healthy cluster
    with DevCluster(
        brokers=2, log_dirs_per_broker=2, data_dir=tmp_path / "data", capacity_bytes=1 << 40
    ) as dc:
        yield dc


def write_config(tmp_path: Path, cluster) -> Path:
    path = tmp_path / "kvq.properties"
    path.write_text(
        f"{P}kafka.admin.bootstrap.servers={cluster.bootstrap}\n"
        f"{P}storage.per.volume.limit.min.available.ratio=0.05\n"
        "kvq.cluster.name=test-cluster\n"
    )
    return path


@contextlib.contextmanager
def exporter_process(tmp_path: Path, cluster, *flags: str):
    port = server_port()
    argv = [sys.executable, "-m", "exporter.cli", "--config", str(write_config(tmp_path, cluster))]
    argv += ["--listen", f"127.0.0.1:{port}", *flags]
    process = ManagedProcess(argv, tmp_path / "exporter.log", cwd=REPO)
    try:
        yield process, port
    finally:
        process.stop()


def threads_of(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    raise AssertionError("no Threads line")


def sample(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no {name}")


def test_500_idle_connections_cost_no_thread_and_metrics_are_still_served(tmp_path, cluster):
    with exporter_process(tmp_path, cluster) as (process, port):
        base = f"http://127.0.0.1:{port}"
        process.wait_ready(lambda: http_ok(base + "/ready"), timeout=30, what="exporter /ready")
        threads_before = threads_of(process.proc.pid)
        with held_connections(("127.0.0.1", port), 500):

            def held() -> bool:
                text = requests.get(base + "/metrics", timeout=5).text
                return sample(text, "kafka_volume_quota_http_open_connections") >= 500

            wait_until(held, what="500 idle connections held")
            assert threads_of(process.proc.pid) <= threads_before + 2
            assert requests.get(base + "/metrics", timeout=5).status_code == 200


def test_metrics_gzip_head_landing_page_build_info_and_process(tmp_path, cluster):
    with exporter_process(tmp_path, cluster) as (process, port):
        base = f"http://127.0.0.1:{port}"
        process.wait_ready(lambda: http_ok(base + "/ready"), timeout=30, what="exporter /ready")
        zipped = requests.get(base + "/metrics", headers={"Accept-Encoding": "gzip"}, stream=True)
        assert zipped.headers["Content-Encoding"] == "gzip"
        text = gzip.decompress(zipped.raw.read()).decode()
        assert 'kafka_volume_quota_throttle_factor{cluster="test-cluster"} 1.0' in text
        assert "kafka_volume_quota_build_info{" in text and 'program="kvq-exporter"' in text
        assert sample(text, "process_resident_memory_bytes") > 0
        check = subprocess.run(
            ["promtool", "check", "metrics"], input=text, capture_output=True, text=True
        )
        assert check.returncode == 0 and check.stdout + check.stderr == "", check.stderr
        head = requests.head(base + "/status", timeout=5)
        assert head.status_code == 200 and int(head.headers["Content-Length"]) > 0
        assert head.content == b""
        landing = requests.get(base + "/", timeout=5).text
        for path in ("/metrics", "/status", "/ready", "/healthz"):
            assert f'<a href="{path}">' in landing


def test_the_gzip_is_made_once_per_poll_not_per_scrape(cluster):
    settings = ExporterSettings.build(
        {
            P + "kafka.admin.bootstrap.servers": cluster.bootstrap,
            P + "storage.per.volume.limit.min.available.ratio": "0.1",
            P + "storage.check.interval": "PT1H",
            "kvq.exporter.listen": "127.0.0.1:0",
        },
        environ={},
    )
    exporter = Exporter(settings)
    try:
        server = exporter.start()
        wait_until(exporter.poller.ready.is_set, timeout=30, what="first poll")
        bodies = [
            requests.get(server.url + "/metrics", headers={"Accept-Encoding": "gzip"}).text
            for _ in range(3)
        ]
        assert all("kafka_volume_quota_throttle_factor" in body for body in bodies)
        assert server.gzip.compressions == 1
    finally:
        exporter.stop()


def test_tls_and_basic_auth_from_web_config_file(tmp_path, cluster):
    pki = make_pki(tmp_path / "pki")
    web = write_web_config(tmp_path / "web.yml", pki, prometheus="scrape")
    with exporter_process(tmp_path, cluster, "--web.config.file", str(web)) as (process, port):
        url = f"https://127.0.0.1:{port}/metrics"

        def up():
            assert process.running, process.log_text()
            with contextlib.suppress(requests.ConnectionError):
                return requests.get(url, verify=pki.ca, auth=("prometheus", "scrape")).ok

        wait_until(up, timeout=30, what="exporter over https")
        assert requests.get(url, verify=pki.ca, timeout=5).status_code == 401
        assert "serving https://" in process.log_text()


def test_a_bad_web_config_file_exits_2_and_says_why(tmp_path, cluster):
    web = tmp_path / "web.yml"
    web.write_text("basic_auth_users:\n  prometheus: plain-password\n")
    argv = [sys.executable, "-m", "exporter.cli", "--config", str(write_config(tmp_path, cluster))]
    result = subprocess.run(
        [*argv, "--web.config.file", str(web)], capture_output=True, text=True, cwd=REPO
    )
    assert result.returncode == 2
    assert f"--web.config.file={web}: basic_auth_users.prometheus: not a bcrypt hash" in (
        result.stderr
    )
    assert "plain-password" not in result.stderr


def test_every_served_path_is_refused_as_the_telemetry_path():
    """--web.telemetry-path is checked before the routes exist (OTHER_PATHS); it must name them."""
    routes = exporter_routes(lambda: b"", lambda: b"", lambda: True, dict, "/kvq/metrics")
    served = {route.path for route in routes} - {"/kvq/metrics"}
    assert served == set(OTHER_PATHS)
    for path in served:
        with pytest.raises(SystemExit) as refused:
            build_parser().parse_args(["--web.telemetry-path", path])
        assert refused.value.code == 2
