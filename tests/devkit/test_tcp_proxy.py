"""devkit's TcpProxy: forwards, cuts like a pulled cable (at a Kafka request), refuses, heals;
what a client sent during a cut reaches the server unless the client reset its connection."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Iterator

import pytest

from devkit.processes import server_port, wait_until
from devkit.tcp_proxy import RESET, TcpProxy

ALTER_CLIENT_QUOTAS = 49


def request(api_key: int, body: bytes = b"") -> bytes:
    """A Kafka request frame as far as the proxy reads it: size, API key, the rest."""
    payload = struct.pack(">hh", api_key, 0) + body
    return struct.pack(">i", len(payload)) + payload


class Sink:
    """A server that keeps every byte each connection sends it."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.received = bytearray()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = self.server.accept()
                threading.Thread(target=self._read, args=(conn,), daemon=True).start()

    def _read(self, conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):
            while data := conn.recv(65536):
                self.received += data
                conn.sendall(b"ok")


@pytest.fixture
def proxied() -> Iterator[tuple[TcpProxy, Sink]]:
    sink = Sink()
    with TcpProxy({server_port(): sink.port}) as proxy:
        yield proxy, sink
    sink.server.close()


def connect(proxy: TcpProxy) -> socket.socket:
    return socket.create_connection(("127.0.0.1", next(iter(proxy.routes))), timeout=5)


def test_forwards_both_ways(proxied):
    proxy, sink = proxied
    with connect(proxy) as client:
        client.sendall(request(3))
        assert client.recv(2) == b"ok"
    assert bytes(sink.received) == request(3)


@pytest.mark.parametrize(
    ("close", "delivered"),
    [("fin", True), ("rst", False), ("shutdown-rst", False), ("open", True)],
)  # fmt: skip
def test_a_request_cut_on_its_way_arrives_after_the_heal_unless_the_client_reset(
    proxied, close, delivered
):
    proxy, sink = proxied
    proxy.cut_at_request(ALTER_CLIENT_QUOTAS, 2)
    client = connect(proxy)
    first, second = request(ALTER_CLIENT_QUOTAS, b"first"), request(ALTER_CLIENT_QUOTAS, b"2nd")
    client.sendall(request(3) + first + second + request(3))
    wait_until(proxy.cut_event.is_set, 5, what="the cut at the 2nd request")
    wait_until(lambda: len(sink.received) == len(request(3) + first), 5, what="the 1st delivered")
    client.sendall(request(18))  # sent while cut: stays with the client's connection
    if close in ("rst", "shutdown-rst"):
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, RESET)
    if close == "shutdown-rst":  # as kafka-python closes: shutdown, then close
        client.shutdown(socket.SHUT_RDWR)
    if close != "open":
        client.close()
    proxy.heal()
    everything = request(3) + first + second + request(3) + request(18)
    if delivered:
        wait_until(lambda: bytes(sink.received) == everything, 5, what="the rest delivered")
    else:
        connect(proxy).close()  # the proxy handled the heal
        assert bytes(sink.received) == request(3) + first
    client.close()


def test_a_cut_connection_stays_silent_and_new_ones_are_accepted(proxied):
    proxy, sink = proxied
    proxy.cut()
    with connect(proxy) as client:
        client.settimeout(0.2)
        client.sendall(request(3))
        with pytest.raises(TimeoutError):
            client.recv(2)
        proxy.heal()
        client.settimeout(5)
        assert client.recv(2) == b"ok"


def test_refused_until_healed(proxied):
    proxy, _ = proxied
    client = connect(proxy)
    proxy.refuse()
    wait_until(lambda: _reset_or_closed(client), 5, what="the connection reset")
    wait_until(lambda: not _connects(proxy), 5, what="new connections refused")
    proxy.heal()
    wait_until(lambda: _connects(proxy), 5, what="accepted again")


def _reset_or_closed(client: socket.socket) -> bool:
    try:
        return client.recv(1) == b""
    except OSError:
        return True


def _connects(proxy: TcpProxy) -> bool:
    try:
        connect(proxy).close()
    except OSError:
        return False
    return True


def test_a_cut_after_a_request_in_a_sequence_delivers_it_and_holds_its_answer(proxied):
    proxy, sink = proxied
    end_txn = 26
    proxy.cut_at_request(end_txn, 1, after=(ALTER_CLIENT_QUOTAS, 1), answer=True)
    with connect(proxy) as client:
        for frame in (request(end_txn, b"before"), request(ALTER_CLIENT_QUOTAS)):
            client.sendall(frame)
            assert client.recv(2) == b"ok"
        assert not proxy.cut_event.is_set()
        client.sendall(request(end_txn, b"cut"))
        wait_until(proxy.cut_event.is_set, 5, what="the cut at the END_TXN after the alter")
        wait_until(lambda: sink.received.endswith(request(end_txn, b"cut")), 5, what="it delivered")
        client.settimeout(0.2)
        with pytest.raises(TimeoutError):
            client.recv(2)
        proxy.heal()
        client.settimeout(5)
        assert client.recv(2) == b"ok"
