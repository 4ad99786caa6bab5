"""--web.config.file: exporter-toolkit's format, real TLS and mTLS, real bcrypt, clear errors."""

from __future__ import annotations

import base64
import os
import shutil
import threading
from pathlib import Path

import bcrypt
import pytest
import requests

from devkit.tls_certificates import make_pki
from kvq.web.server import Response, Route, WebServer
from kvq.web.web_config import WebConfigError, load_web_config
from tests.docs.blocks import block as documented

HASH = bcrypt.hashpw(b"scrape-secret", bcrypt.gensalt(rounds=10)).decode()


class Token:
    schemes = ("Bearer",)

    def allows(self, header):
        return header == "Bearer hook"


def serve(web_config) -> WebServer:
    routes = [
        Route("/metrics", lambda _r: Response(200, b"up 1\n"), "metrics"),
        Route(
            "/webhook",
            lambda _r: Response.json(200, {"ok": True}),
            "webhook",
            methods=("POST",),
            credentials=Token(),
            max_body=100,
        ),
    ]
    return WebServer("test", "", ("127.0.0.1", 0), routes, web_config).start()


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "web.yml"
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


def tls_yaml(pki, extra: str = "") -> str:
    return (
        f"tls_server_config:\n  cert_file: {pki.server.cert}\n  key_file: {pki.server.key}\n"
        + extra
    )


def test_tls_serves_https_with_the_configured_certificate(tmp_path, pki):
    server = serve(load_web_config(write(tmp_path, tls_yaml(pki))))
    try:
        assert server.url.startswith("https://")
        assert requests.get(server.url + "/metrics", verify=pki.ca, timeout=5).text == "up 1\n"
        with pytest.raises(requests.exceptions.SSLError):
            requests.get(server.url + "/metrics", timeout=5)  # not a CA the system trusts
        with pytest.raises(requests.exceptions.ConnectionError):
            requests.get(server.url.replace("https", "http") + "/metrics", timeout=5)
    finally:
        server.stop()


def test_relative_paths_are_relative_to_the_config_file(tmp_path, pki):
    for pair in (pki.server,):
        shutil.copy(pair.cert, tmp_path / "s.crt")
        shutil.copy(pair.key, tmp_path / "s.key")
    config = load_web_config(
        write(tmp_path, "tls_server_config: {cert_file: s.crt, key_file: s.key}")
    )
    assert config.tls.cert_file == tmp_path / "s.crt"


def test_mtls_requires_a_client_certificate_from_the_client_ca(tmp_path, pki):
    extra = f"  client_ca_file: {pki.ca}\n  client_auth_type: RequireAndVerifyClientCert\n"
    server = serve(load_web_config(write(tmp_path, tls_yaml(pki, extra))))
    url = server.url + "/metrics"
    try:
        client = (str(pki.client.cert), str(pki.client.key))
        assert requests.get(url, verify=pki.ca, cert=client, timeout=5).status_code == 200
        stranger = (str(pki.stranger.cert), str(pki.stranger.key))
        for cert in (None, stranger):
            with pytest.raises(requests.exceptions.ConnectionError):
                requests.get(url, verify=pki.ca, cert=cert, timeout=5)
    finally:
        server.stop()


def test_a_rotated_certificate_is_served_without_a_restart(tmp_path, pki):
    shutil.copy(pki.server.cert, tmp_path / "s.crt")
    shutil.copy(pki.server.key, tmp_path / "s.key")
    server = serve(
        load_web_config(write(tmp_path, "tls_server_config: {cert_file: s.crt, key_file: s.key}"))
    )
    try:
        assert requests.get(server.url + "/metrics", verify=pki.ca, timeout=5).ok
        renewed = make_pki(tmp_path / "renewed")  # cert-manager writes the new pair in place
        (tmp_path / "s.key").write_bytes(renewed.server.key.read_bytes())
        (tmp_path / "s.crt").write_bytes(renewed.server.cert.read_bytes())
        assert requests.get(server.url + "/metrics", verify=renewed.ca, timeout=5).ok
        with pytest.raises(requests.exceptions.SSLError):
            requests.get(server.url + "/metrics", verify=pki.ca, timeout=5)
    finally:
        server.stop()


def test_basic_auth_users_with_bcrypt_guard_every_path(tmp_path):
    server = serve(load_web_config(write(tmp_path, f"basic_auth_users:\n  prometheus: '{HASH}'\n")))
    try:
        for path in ("/metrics", "/"):
            response = requests.get(server.url + path, timeout=5)
            assert response.status_code == 401
            assert response.headers["WWW-Authenticate"] == 'Basic realm="test"'
        wrong = requests.get(server.url + "/metrics", auth=("prometheus", "nope"), timeout=5)
        assert wrong.status_code == 401
        unknown = requests.get(server.url + "/metrics", auth=("who", "scrape-secret"), timeout=5)
        assert unknown.status_code == 401
        for _ in range(3):
            ok = requests.get(server.url + "/metrics", auth=("prometheus", "scrape-secret"))
            assert ok.status_code == 200
        too_long = requests.get(server.url + "/metrics", auth=("prometheus", "x" * 100))
        assert too_long.status_code == 401
    finally:
        server.stop()


def test_the_webhook_token_still_works_next_to_basic_auth_users(tmp_path):
    server = serve(load_web_config(write(tmp_path, f"basic_auth_users:\n  prometheus: '{HASH}'\n")))
    try:
        hook = requests.post(
            server.url + "/webhook", data=b"{}", headers={"Authorization": "Bearer hook"}
        )
        assert hook.status_code == 200
        refused = requests.post(server.url + "/webhook", data=b"{}")
        assert refused.status_code == 401
        assert refused.headers["WWW-Authenticate"] == 'Bearer realm="test", Basic realm="test"'
        assert (
            requests.get(
                server.url + "/metrics", headers={"Authorization": "Bearer hook"}
            ).status_code
            == 401
        )
    finally:
        server.stop()


def test_headers_from_http_server_config_are_sent(tmp_path):
    server = serve(
        load_web_config(
            write(tmp_path, "http_server_config:\n  headers:\n    X-Frame-Options: deny\n")
        )
    )
    try:
        assert requests.get(server.url + "/metrics", timeout=5).headers["X-Frame-Options"] == "deny"
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("tls_server_config: {cert_file: a}", "missing one of key or key_file"),
        ("tls_server_config: {key_file: a}", "missing one of cert or cert_file"),
        ("tls_server_confg: {}", "unknown key(s) tls_server_confg"),
        ("basic_auth_users: {u: plaintext}", "basic_auth_users.u: not a bcrypt hash"),
        ("basic_auth_users: [u]", "basic_auth_users must map user names"),
        ("rate_limit: {interval: 1s}", "rate_limit.burst=0 must be a whole number of at least 1"),
        ("rate_limit: {burst: 2, interval: soon}", "rate_limit.interval='soon' must be a Go"),
        ("rate_limit: {brust: 2}", "unknown key(s) brust in rate_limit"),
        ("http_server_config: {http2: maybe}", "http2 must be true or false"),
        (": : :", "not valid YAML"),
        (
            "tls_server_config: {cert_file: /nonexistent.crt, key_file: /nonexistent.key}",
            "No such file",
        ),
    ],
)
def test_invalid_files_name_the_file_and_the_problem(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(WebConfigError) as info:
        load_web_config(path)
    assert str(path) in str(info.value) and message in str(info.value)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("  client_auth_type: Sometimes\n", "client_auth_type='Sometimes' is invalid"),
        ("  client_auth_type: RequireAnyClientCert\n", "cannot be asked for with Python's ssl"),
        ("  client_ca_file: {ca}\n", "without a Client Auth Policy"),
        ("  client_auth_type: RequireAndVerifyClientCert\n", "needs client_ca_file"),
        ("  min_version: TLS14\n", "min_version='TLS14' is invalid"),
    ],
)
def test_invalid_tls_settings_are_refused(tmp_path, pki, extra, message):
    with pytest.raises(WebConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_web_config(write(tmp_path, tls_yaml(pki, extra.format(ca=pki.ca))))


def test_no_file_means_plain_http_without_auth():
    assert load_web_config(None) is None


def test_the_documented_example_loads_with_real_files(tmp_path, pki):
    """docs/http.md's --web.config.file, its certificate paths replaced by real files."""
    block = documented("docs/http.md", "tls_server_config:").text
    for placeholder, real in (
        ("/etc/kvq/tls/tls.crt", pki.server.cert),
        ("/etc/kvq/tls/tls.key", pki.server.key),
        ("/etc/kvq/tls/ca.crt", pki.ca),
    ):
        assert placeholder in block
        block = block.replace(placeholder, str(real))
    config = load_web_config(write(tmp_path, block))
    header = "Basic " + base64.b64encode(b"prometheus:change-me").decode()
    assert config.tls is not None and config.users.allows(header)
    assert config.headers == {"X-Frame-Options": "deny"}


def test_a_fifo_is_refused_instead_of_blocking_start_up(tmp_path):
    fifo = tmp_path / "web.fifo"
    os.mkfifo(fifo)
    outcome: list[BaseException] = []

    def load() -> None:
        try:
            load_web_config(fifo)
        except WebConfigError as exc:
            outcome.append(exc)

    reader = threading.Thread(target=load, daemon=True)
    reader.start()
    reader.join(timeout=10)
    if reader.is_alive():  # release the blocked open before failing
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        reader.join(timeout=10)
        pytest.fail("reading a FIFO as --web.config.file blocked")
    assert [str(e) for e in outcome] == [f"--web.config.file={fifo}: not a regular file"]


NODE_EXPORTER_FILE = """\
tls_server_config:
  cert_file: {cert}
  key_file: {key}
  client_ca_file: {ca}
  client_auth_type: RequireAndVerifyClientCert
  client_allowed_sans: [prometheus]
  cipher_suites: [TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256]
  curve_preferences: [X25519]
  prefer_server_cipher_suites: true
  min_version: TLS12
http_server_config:
  http2: true
  headers: {{X-Frame-Options: deny}}
rate_limit:
  burst: 3
  interval: 1m
"""


def test_a_file_node_exporter_takes_loads_with_warnings_for_what_is_not_honoured(tmp_path, pki):
    """Every key of exporter-toolkit's Config (web/tls_config.go) is accepted."""
    text = NODE_EXPORTER_FILE.format(cert=pki.server.cert, key=pki.server.key, ca=pki.ca)
    config = load_web_config(write(tmp_path, text))
    assert [w.split(" is ignored")[0] for w in config.warnings] == [
        "tls_server_config.cipher_suites",
        "tls_server_config.curve_preferences",
        "tls_server_config.prefer_server_cipher_suites",
        "http_server_config.http2",
    ]
    assert config.tls.allowed_sans == ("prometheus",)
    assert (config.rate_limit.burst, config.rate_limit.interval) == (3, 60.0)


def test_client_allowed_sans_lets_in_only_a_certificate_naming_one(tmp_path, pki):
    base = tls_yaml(
        pki, f"  client_ca_file: {pki.ca}\n  client_auth_type: RequireAndVerifyClientCert\n"
    )
    client = (str(pki.client.cert), str(pki.client.key))  # SAN DNS:prometheus
    for allowed, reaches in (("[prometheus]", True), ("[grafana, 127.0.0.1]", False)):
        server = serve(
            load_web_config(write(tmp_path, base + f"  client_allowed_sans: {allowed}\n"))
        )
        try:
            url = server.url + "/metrics"
            if reaches:
                assert requests.get(url, verify=pki.ca, cert=client, timeout=5).status_code == 200
            else:
                with pytest.raises(requests.exceptions.ConnectionError):
                    requests.get(url, verify=pki.ca, cert=client, timeout=5)
        finally:
            server.stop()


def test_rate_limit_answers_429_past_the_burst_for_every_client_together(tmp_path):
    server = serve(load_web_config(write(tmp_path, "rate_limit: {burst: 3, interval: 1h}\n")))
    try:
        statuses = [requests.get(server.url + "/metrics", timeout=5).status_code for _ in range(5)]
    finally:
        server.stop()
    assert statuses == [200, 200, 200, 429, 429]


def test_no_rate_limit_without_an_interval(tmp_path):
    assert load_web_config(write(tmp_path, "rate_limit: {burst: 0}\n")).rate_limit is None
