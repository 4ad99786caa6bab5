"""kvq.web's server on loopback: connection limits and deadlines, checks before the body, HTTP."""

from __future__ import annotations

import gzip
import socket
import threading
import time

import pytest
import requests

from devkit.processes import wait_until
from devkit.web_clients import held_connections
from kvq.web.server import ConnectionLimits, Response, Route, WebServer

BIG = b"".join(b'family_%d{label="value"} %d\n' % (i, i) for i in range(2000))


class Token:
    schemes = ("Bearer",)

    def allows(self, header):
        return header == "Bearer good"


def make_server(limits: ConnectionLimits | None = None, **kwargs) -> WebServer:
    seen: list[bytes] = []
    state = {"body": BIG, "tail": b""}
    routes = [
        Route(
            "/metrics",
            lambda _r: Response(200, state["body"], compressible=True, tail=state["tail"]),
            "metrics",
        ),
        Route(
            "/post",
            lambda r: seen.append(r.body) or Response.json(200, {"length": len(r.body)}),
            "a POST with credentials",
            methods=("POST",),
            credentials=Token(),
            max_body=1000,
        ),
    ]
    server = WebServer("test-server", "for tests", ("127.0.0.1", 0), routes, None, limits, **kwargs)
    server.seen = seen
    server.state = state
    return server.start()


@pytest.fixture
def server():
    s = make_server()
    yield s
    s.stop()


def raw(server: WebServer, data: bytes, timeout: float = 5.0) -> bytes:
    """Send `data` on a new connection; everything the server answers until it closes."""
    with socket.create_connection(server.bound, timeout=timeout) as sock:
        sock.sendall(data)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_500_idle_and_slow_connections_neither_block_a_request_nor_cost_threads(server):
    threads_before = threading.active_count()
    with (
        held_connections(server.bound, 400),
        held_connections(server.bound, 100, b"POST /post HTTP/1.1\r\nHost: x\r\n"),
    ):
        wait_until(lambda: server.open_connections >= 500, what="500 connections accepted")
        assert threading.active_count() <= threads_before + 1  # at most a lazily started worker
        response = requests.post(
            server.url + "/post", data=b"{}", headers={"Authorization": "Bearer good"}, timeout=5
        )
        assert response.status_code == 200 and response.json() == {"length": 2}


def test_idle_connections_are_closed_and_the_oldest_idle_makes_room_at_the_limit():
    server = make_server(ConnectionLimits(max_connections=20, idle_timeout=0.5))
    try:
        with held_connections(server.bound, 20) as idle:
            assert requests.get(server.url + "/metrics", timeout=5).status_code == 200
            assert server.dropped["evicted"] >= 1
            idle[-1].settimeout(5)
            assert idle[-1].recv(10) == b""  # closed by the idle timeout
        assert server.dropped["idle_timeout"] >= 1
    finally:
        server.stop()


def test_a_request_sent_slowly_is_cut_at_the_read_deadline():
    server = make_server(ConnectionLimits(read_timeout=0.5))
    try:
        with socket.create_connection(server.bound, timeout=5) as sock:
            started = time.monotonic()
            answer = b""
            for byte in b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 200:
                try:
                    sock.sendall(bytes([byte]))
                except OSError:
                    break
                time.sleep(0.02)
                if time.monotonic() - started > 4:
                    break
            answer = sock.recv(1000)
        assert answer.startswith(b"HTTP/1.1 408 ")
        assert server.dropped["read_timeout"] == 1
    finally:
        server.stop()


def test_credentials_and_length_are_answered_before_a_byte_of_the_body(server):
    big = b"POST /post HTTP/1.1\r\nHost: x\r\nContent-Length: 300000000\r\n"
    assert raw(server, big + b"\r\n").startswith(b"HTTP/1.1 401 ")
    assert raw(server, big + b"Authorization: Bearer good\r\n\r\n").startswith(b"HTTP/1.1 413 ")
    assert server.seen == []


def test_expect_100_continue_is_honoured_after_the_checks(server):
    with socket.create_connection(server.bound, timeout=5) as sock:
        sock.sendall(
            b"POST /post HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer good\r\n"
            b"Content-Length: 3\r\nExpect: 100-continue\r\n\r\n"
        )
        assert sock.recv(100) == b"HTTP/1.1 100 Continue\r\n\r\n"
        sock.sendall(b"abc")
        assert sock.recv(1000).startswith(b"HTTP/1.1 200 ")
    assert server.seen == [b"abc"]


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"GARBAGE\r\n\r\n", 400),
        (b"GET /metrics HTTP/2.0\r\n\r\n", 505),
        (b"GET /metrics HTTP/1.1\r\nBad Header\r\n\r\n", 400),
        (b"GET /metrics HTTP/1.1\r\nX: a\x01b\r\n\r\n", 400),
        (b"GET /metrics HTTP/1.1\r\nX: " + b"a" * 20000 + b"\r\n\r\n", 431),
        (b"POST /post HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 411),
        (b"POST /post HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400),
        (b"POST /post HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400),
        (b"POST /post HTTP/1.1\r\nContent-Length: \xd9\xa1\r\n\r\n", 400),
        (b"GET /nowhere HTTP/1.1\r\n\r\n", 404),
        (b"DELETE /metrics HTTP/1.1\r\n\r\n", 405),
    ],
)
def test_malformed_or_unwanted_requests_get_a_json_error(server, request_bytes, status):
    answer = raw(server, request_bytes)
    assert answer.startswith(b"HTTP/1.1 %d " % status), answer[:200]
    assert b"Content-Type: application/json" in answer
    assert b'"error": ' in answer


def test_head_gives_the_headers_of_get_without_the_body(server):
    answer = raw(server, b"HEAD /metrics HTTP/1.1\r\nConnection: close\r\n\r\n")
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 ")
    assert b"Content-Length: %d" % len(BIG) in head
    assert body == b""


def test_keep_alive_serves_several_requests_on_one_connection(server):
    with requests.Session() as session:
        for _ in range(3):
            assert session.get(server.url + "/metrics", timeout=5).content == BIG
    assert server.open_connections <= 1


def test_gzip_when_asked_compressed_once_per_distinct_body(server):
    def fetch(**headers):
        return requests.get(server.url + "/metrics", headers=headers, stream=True, timeout=5)

    plain = fetch(**{"Accept-Encoding": "identity"})
    assert "Content-Encoding" not in plain.headers and plain.raw.read() == BIG
    for _ in range(3):
        zipped = fetch(**{"Accept-Encoding": "gzip"})
        assert zipped.headers["Content-Encoding"] == "gzip"
        assert zipped.headers["Vary"] == "Accept-Encoding"
        data = zipped.raw.read()
        assert len(data) < len(BIG) / 5 and gzip.decompress(data) == BIG
    assert server.gzip.compressions == 1
    server.state["body"] = BIG + b"one_more 1\n"
    assert gzip.decompress(fetch(**{"Accept-Encoding": "gzip"}).raw.read()).endswith(b"more 1\n")
    assert server.gzip.compressions == 2


def test_a_changing_tail_is_a_second_gzip_member_and_keeps_the_cache(server):
    for n in range(3):
        server.state["tail"] = b"live_seconds %d\n" % n
        response = requests.get(server.url + "/metrics", headers={"Accept-Encoding": "gzip"})
        assert response.content == BIG + b"live_seconds %d\n" % n  # requests decodes gzip
    assert server.gzip.compressions == 1


def test_gzip_refused_with_q_0(server):
    response = requests.get(server.url + "/metrics", headers={"Accept-Encoding": "gzip;q=0"})
    assert "Content-Encoding" not in response.headers


def test_landing_page_links_every_get_endpoint(server):
    response = requests.get(server.url + "/", timeout=5)
    assert response.status_code == 200 and response.headers["Content-Type"].startswith("text/html")
    assert '<a href="/metrics">' in response.text
    assert "/post" in response.text and '<a href="/post">' not in response.text


def test_address_in_use_is_an_oserror_at_start(server):
    taken = WebServer("other", "", server.bound, [])
    with pytest.raises(OSError):
        taken.start()
