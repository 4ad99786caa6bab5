"""`kvq-exporter` with the flags and logs a Prometheus exporter's operator expects:
`--web.listen-address :PORT`, `--web.telemetry-path`, JSON-only logs that report changes, not
every poll."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys

import pytest
import requests

from devcluster.cluster import DevCluster
from devkit.processes import ManagedProcess, http_ok, server_port, wait_until

P = "client.quota.callback.static."
POLLS = re.compile(r"^kafka_volume_quota_poll_duration_seconds_count\{[^}]*\} (\S+)$", re.M)


@pytest.fixture
def cluster(tmp_path):
    # a volume of its own size (1 TiB, nearly all free), not the host disk: a healthy cluster
    with DevCluster(
        brokers=2, log_dirs_per_broker=2, data_dir=tmp_path / "data", capacity_bytes=1 << 40
    ) as dc:
        yield dc


def write_config(tmp_path, bootstrap: str):
    path = tmp_path / "kvq.properties"
    path.write_text(
        f"{P}kafka.admin.bootstrap.servers={bootstrap}\n"
        f"{P}storage.per.volume.limit.min.available.ratio=0.05\n"
        f"{P}storage.check.interval=PT0.2S\n"
        "kvq.cluster.name=conventions\n"
    )
    return path


def polls(url: str) -> float:
    return float(POLLS.search(requests.get(url, timeout=5).text).group(1))


def test_every_interface_telemetry_path_and_json_logs_of_changes_only(tmp_path, cluster):
    port = server_port()
    argv = [
        sys.executable,
        "-m",
        "exporter.cli",
        "--config",
        str(write_config(tmp_path, cluster.bootstrap)),
    ]
    argv += ["--web.listen-address", f":{port}", "--web.telemetry-path", "/kvq/metrics"]
    argv += ["--log.format", "json"]
    process = ManagedProcess(argv, tmp_path / "exporter.log")
    try:
        # 127.0.0.2 reaches a socket bound to every interface, not one bound to 127.0.0.1
        base = f"http://127.0.0.2:{port}"
        process.wait_ready(lambda: http_ok(base + "/ready"), timeout=30, what="exporter /ready")
        metrics = base + "/kvq/metrics"
        assert 'kafka_volume_quota_throttle_factor{cluster="conventions"} 1.0' in (
            requests.get(metrics, timeout=5).text
        )
        assert requests.get(base + "/metrics", timeout=5).status_code == 404
        assert 'href="/kvq/metrics"' in requests.get(base + "/", timeout=5).text
        start = polls(metrics)
        wait_until(lambda: polls(metrics) >= start + 5, timeout=30, what="5 more polls")
        cluster.set_log_dir(0, 0, usable_bytes=0)  # a full volume: the factor changes to 0
        wait_until(
            lambda: 'throttle_factor{cluster="conventions"} 0.0' in requests.get(metrics).text,
            timeout=30,
            what="factor 0",
        )
        changed = polls(metrics)
        wait_until(lambda: polls(metrics) >= changed + 5, timeout=30, what="5 more polls")
        process.signal(signal.SIGTERM)
        assert process.proc.wait(timeout=20) == 0
    finally:
        process.stop()
    records = [json.loads(line) for line in process.log_text().splitlines()]  # JSON only
    serving = [r for r in records if r["msg"].startswith("serving ")]
    assert len(serving) == 1 and serving[0]["msg"].endswith("/kvq/metrics for cluster conventions")
    polls_logged = [r for r in records if r["msg"].startswith("poll ok")]
    assert [(r["level"], r["msg"]) for r in polls_logged] == [
        ("info", "poll ok: 2 brokers, 4 log dirs, factor 1.0"),
        ("info", "poll ok: 2 brokers, 4 log dirs, factor 0.0"),
    ]


@pytest.mark.parametrize(
    ("flag", "value", "says"),
    [
        (
            "--web.listen-address",
            "9898",
            "argument --web.listen-address/--listen: '9898': must be HOST:PORT",
        ),
        ("--listen", "host:http", "argument --web.listen-address/--listen: 'host:http'"),
        (
            "--web.telemetry-path",
            "metrics",
            "argument --web.telemetry-path: 'metrics': must be a URL path",
        ),
        (
            "--web.telemetry-path",
            "/status",
            "argument --web.telemetry-path: '/status' is already served",
        ),
        ("--cluster-name", "a b", "argument --cluster-name: 'a b': must be a name of A-Z a-z"),
        ("--cluster-label", "le", "argument --cluster-label: 'le': le is a label the series"),
    ],
)
def test_a_bad_flag_value_is_refused_naming_the_flag(tmp_path, flag, value, says):
    config = write_config(tmp_path, "127.0.0.1:1")
    result = subprocess.run(
        [sys.executable, "-m", "exporter.cli", "--config", str(config), flag, value],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    last = result.stderr.splitlines()[-1]
    assert last.startswith("kvq-exporter: error: ") and says in last, result.stderr
    assert "kvq.exporter.listen" not in last and "kvq.cluster.name" not in last
    assert "kvq.cluster.label" not in last


def check_config(tmp_path, *lines: str) -> subprocess.CompletedProcess:
    config = write_config(tmp_path, "127.0.0.1:1")
    config.write_text(config.read_text() + "".join(f"{line}\n" for line in lines))
    return subprocess.run(
        [sys.executable, "-m", "exporter.cli", "--config", str(config), "--check-config"],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_typo_in_a_plugin_key_is_an_error_naming_the_file_and_the_key(tmp_path):
    result = check_config(tmp_path, f"{P}excluded.principal.names.list=User:admin")
    assert result.returncode == 2
    assert result.stderr.startswith(f"kvq-exporter: 1 configuration error(s) in {tmp_path}")
    assert (
        f"{P}excluded.principal.names.list is not a property of the quota plugin; "
        f"did you mean {P}excluded.principal.name.list?"
    ) in result.stderr


def test_a_plugin_key_we_ignore_is_a_warning_that_says_so(tmp_path):
    result = check_config(tmp_path, f"{P}kafka.clientIdPrefix=__strimzi")
    assert result.returncode == 0, result.stderr
    assert "level=warn" in result.stderr
    assert "kafka.clientIdPrefix is a Strimzi plugin key this tool ignores" in result.stderr


@pytest.mark.parametrize(
    ("written", "suggested"), [("5s", "PT5S"), ("PT5", "PT5S"), ("30", "PT30S")]
)
def test_a_duration_slip_gets_a_did_you_mean(tmp_path, written, suggested):
    result = check_config(tmp_path, f"{P}throttle.factor.validity.duration={written}")
    assert result.returncode == 2
    assert f"validity.duration={written}: not an ISO 8601 duration" in result.stderr
    assert f"did you mean {suggested}?" in result.stderr


def test_a_lowercase_duration_is_accepted_as_javas_duration_parse_accepts_it(tmp_path):
    result = check_config(tmp_path, f"{P}throttle.factor.validity.duration=pt5s")
    assert result.returncode == 0, result.stderr
    assert f"{P}throttle.factor.validity.duration=PT5S" in result.stdout


def test_a_web_config_file_node_exporter_takes_starts_with_warnings(tmp_path):
    web = tmp_path / "web.yml"
    web.write_text(
        "http_server_config: {http2: true}\nrate_limit: {burst: 10, interval: 1s}\n"
        "tls_server_config: {}\n"
    )
    config = write_config(tmp_path, "127.0.0.1:1")
    result = subprocess.run(
        [sys.executable, "-m", "exporter.cli", "--config", str(config), "--check-config"]
        + ["--web.config.file", str(web)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert f"--web.config.file={web}: http_server_config.http2 is ignored" in result.stderr
