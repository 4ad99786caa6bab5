"""A Flask app served through kvq.web's server: what the app sees, what the client gets."""

from __future__ import annotations

import pytest
import requests
from flask import Flask, jsonify, request

from kvq.web.server import Route, WebServer
from kvq.web.wsgi import wsgi_handler


class Token:
    schemes = ("Bearer",)

    def allows(self, header):
        return header == "Bearer good"


@pytest.fixture
def server():
    app = Flask("echo")
    calls: list[str] = []

    @app.post("/echo")
    def echo():
        calls.append(request.path)
        return jsonify(
            body=request.get_data(as_text=True),
            query=request.args.to_dict(),
            content_type=request.content_type,
            header=request.headers.get("X-Kvq"),
            json=request.get_json(silent=True),
        ), 201

    @app.get("/teapot")
    def teapot():
        return "short and stout", 418, {"X-Pot": "yes"}

    handler = wsgi_handler(app, ("127.0.0.1", 0))
    routes = [
        Route("/echo", handler, "echo", methods=("POST",), credentials=Token(), max_body=100),
        Route("/teapot", handler, "teapot"),
    ]
    s = WebServer("wsgi-test", "for tests", ("127.0.0.1", 0), routes).start()
    s.calls = calls
    yield s
    s.stop()


def test_the_app_sees_method_path_query_headers_and_body(server):
    answer = requests.post(
        f"{server.url}/echo?a=1&b=two",
        json={"x": 1},
        headers={"Authorization": "Bearer good", "X-Kvq": "v"},
        timeout=5,
    )
    assert answer.status_code == 201
    assert answer.headers["Content-Type"] == "application/json"
    assert answer.json() == {
        "body": '{"x": 1}',
        "query": {"a": "1", "b": "two"},
        "content_type": "application/json",
        "header": "v",
        "json": {"x": 1},
    }


def test_status_text_and_headers_of_the_app_reach_the_client(server):
    answer = requests.get(f"{server.url}/teapot", timeout=5)
    assert (answer.status_code, answer.text, answer.headers["X-Pot"]) == (
        418,
        "short and stout",
        "yes",
    )
    assert answer.headers["Content-Type"].startswith("text/html")


def test_the_server_refuses_before_the_app_runs(server):
    unauthenticated = requests.post(f"{server.url}/echo", data=b"x", timeout=5)
    too_large = requests.post(
        f"{server.url}/echo", data=b"x" * 101, headers={"Authorization": "Bearer good"}, timeout=5
    )
    assert (unauthenticated.status_code, too_large.status_code) == (401, 413)
    assert server.calls == []


def test_remote_addr_is_the_clients_address_ipv4_and_ipv6():
    from kvq.web.server import Request
    from kvq.web.wsgi import environ_of

    for peer in ("127.0.0.1", "::1"):
        request = Request("GET", "/", "", {}, b"", peer)
        assert environ_of(request, ("127.0.0.1", 1))["REMOTE_ADDR"] == peer
