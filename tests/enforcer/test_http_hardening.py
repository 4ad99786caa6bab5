"""The real kvq-enforcer in front of devcluster under what anyone on the network can send:
idle and slow connections, huge unauthenticated bodies, TLS and basic auth from a web config."""

from __future__ import annotations

import contextlib
import socket
import sys

import pytest
import requests

from devkit.processes import ManagedProcess, server_port, wait_until
from devkit.tls_certificates import make_pki
from devkit.web_clients import held_connections, write_web_config
from tests.enforcer.test_integration import (
    CLUSTER,
    REPO,
    TOKEN,
    Enforcer,
    alter_count,
    firing,
    quotas,
)

pytestmark = pytest.mark.integration


def open_connections(e: Enforcer) -> float:
    return e.metric("kafka_volume_quota_http_open_connections")


def test_a_webhook_is_answered_while_500_idle_and_slow_connections_are_open(dc, enforcer):
    with (
        held_connections(("127.0.0.1", enforcer.port), 400),
        held_connections(
            ("127.0.0.1", enforcer.port), 100, b"POST /webhook HTTP/1.1\r\nHost: x\r\nContent-"
        ),
    ):
        wait_until(lambda: open_connections(enforcer) >= 500, what="500 connections held")
        response = requests.post(
            enforcer.url + "/webhook",
            json=firing(0.5),
            headers={"Authorization": f"Bearer {TOKEN}"},
            timeout=5,
        )
        assert response.status_code == 200, response.text
    assert quotas(dc) == {(("user", None),): {"producer_byte_rate": 524288.0}}


def test_an_unauthenticated_300_mb_post_is_refused_from_its_head(enforcer):
    head = b"POST /webhook HTTP/1.1\r\nHost: x\r\nContent-Length: 300000000\r\n"
    for extra, status in ((b"", b"401"), (f"Authorization: Bearer {TOKEN}\r\n".encode(), b"413")):
        with socket.create_connection(("127.0.0.1", enforcer.port), timeout=5) as sock:
            sock.sendall(head + extra + b"\r\n")  # and not one byte of the body
            assert sock.recv(200).startswith(b"HTTP/1.1 " + status + b" ")
    assert (
        enforcer.metric('kafka_volume_quota_enforcer_webhooks_total{outcome="unauthorized"}') == 1
    )
    assert enforcer.metric('kafka_volume_quota_enforcer_webhooks_total{outcome="too_large"}') == 1


def test_tls_and_basic_auth_from_the_web_config_and_the_token_for_the_webhook(tmp_path, dc):
    pki = make_pki(tmp_path / "pki")
    web = write_web_config(tmp_path / "web.yml", pki, prometheus="scrape")
    e = Enforcer(tmp_path, dc)
    port = server_port()
    argv = [sys.executable, "-m", "enforcer.cli", "--config", str(e.config)]
    argv += ["--listen", f"127.0.0.1:{port}", "--journal", str(e.journal)]
    process = ManagedProcess([*argv, "--web.config.file", str(web)], tmp_path / "e.log", cwd=REPO)
    url = f"https://127.0.0.1:{port}"
    try:
        with requests.Session() as http:
            http.trust_env = False  # a REQUESTS_CA_BUNDLE would win over http.verify
            http.verify = str(pki.ca)

            def ready():
                assert process.running, process.log_text()
                with contextlib.suppress(requests.ConnectionError):
                    return http.get(url + "/ready", auth=("prometheus", "scrape")).ok

            wait_until(ready, timeout=20, what="enforcer over https")
            assert http.get(url + "/metrics").status_code == 401
            metrics = http.get(url + "/metrics", auth=("prometheus", "scrape"))
            assert "kafka_volume_quota_build_info{" in metrics.text
            hook = http.post(
                url + "/webhook", json=firing(1.0), headers={"Authorization": f"Bearer {TOKEN}"}
            )
            assert hook.status_code == 200, hook.text
            assert http.post(url + "/webhook", json=firing(0.0)).status_code == 401
        assert alter_count(dc) == 0 and quotas(dc) == {}
    finally:
        process.stop()


def test_a_bad_web_config_exits_2_naming_the_problem(tmp_path, dc):
    e = Enforcer(tmp_path, dc)
    web = tmp_path / "web.yml"
    web.write_text("tls_server_config:\n  cert_file: server.crt\n")
    argv = [sys.executable, "-m", "enforcer.cli", "--config", str(e.config)]
    process = ManagedProcess([*argv, "--web.config.file", str(web)], tmp_path / "e.log", cwd=REPO)
    assert process.proc.wait(timeout=30) == 2
    assert f"--web.config.file={web}: tls_server_config: missing one of key" in process.log_text()
    assert CLUSTER  # the config itself was valid
