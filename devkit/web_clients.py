"""What tests and benchmarks of kvq's HTTP servers need: held connections, a web config file,
a crowd of clients sending wrong passwords."""

from __future__ import annotations

import base64
import contextlib
import itertools
import selectors
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import bcrypt

from devkit.tls_certificates import Pki


@contextlib.contextmanager
def held_connections(
    address: tuple[str, int], count: int, first_bytes: bytes = b""
) -> Iterator[list[socket.socket]]:
    """`count` connections that send `first_bytes` (e.g. half a request head), then nothing."""
    socks: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.create_connection(address, timeout=10)
            if first_bytes:
                sock.sendall(first_bytes)
            socks.append(sock)
        yield socks
    finally:
        for sock in socks:
            with contextlib.suppress(OSError):
                sock.close()


def write_web_config(path: Path, pki: Pki | None = None, **passwords: str) -> Path:
    """A --web.config.file with TLS from `pki` and bcrypt users `user=password`."""
    text = ""
    if pki is not None:
        text += (
            f"tls_server_config:\n  cert_file: {pki.server.cert}\n  key_file: {pki.server.key}\n"
        )
    if passwords:
        text += "basic_auth_users:\n"
        for user, password in passwords.items():
            hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=10)).decode()
            text += f"  {user}: '{hashed}'\n"
    path.write_text(text)
    return path


def basic_auth(user: str, password: str) -> str:
    """The Authorization header value for `user:password`."""
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


class WrongPasswordCrowd:
    """`size` clients, each sending `GET path` with a password never sent before (so no server
    can answer it from memory) and reading the answer; `again` sends a new request on a new
    connection as each answer arrives. Client i connects from loopback address i % `addresses`
    (127.1.0.1, 127.1.0.2, ...: all of 127/8 is loopback on Linux).

    `answers` holds the status of each answer in the order they arrived (None: closed without
    one); `waiting` is how many requests are sent and not answered. `close()` gives up on those.
    """

    def __init__(
        self,
        address: tuple[str, int],
        size: int,
        addresses: int,
        user: str = "prometheus",
        path: str = "/metrics",
        again: bool = False,
    ) -> None:
        self.address = address
        self.user = user
        self.path = path
        self.again = again
        self.answers: list[int | None] = []
        self._sources = [f"127.1.{k // 250}.{k % 250 + 1}" for k in range(addresses)]
        self._count = itertools.count()
        self._selector = selectors.DefaultSelector()
        self._replies: dict[socket.socket, bytes] = {}
        self._stop = threading.Event()
        for client in range(size):
            self._send(self._sources[client % addresses])
        self._reader = threading.Thread(target=self._read, name="wrong-password-crowd")
        self._reader.start()

    @property
    def waiting(self) -> int:
        return len(self._replies)

    def close(self) -> None:
        """Stop, and close the connections still waiting for an answer (as a client giving up)."""
        self._stop.set()
        self._reader.join()
        for sock in list(self._replies):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        self._replies.clear()
        self._selector.close()

    def __enter__(self) -> WrongPasswordCrowd:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _send(self, source: str) -> None:
        password = f"wrong-{next(self._count)}"
        request = (
            f"GET {self.path} HTTP/1.1\r\nHost: kvq\r\n"
            f"Authorization: {basic_auth(self.user, password)}\r\n\r\n"
        )
        sock = socket.create_connection(self.address, timeout=10, source_address=(source, 0))
        sock.sendall(request.encode())
        sock.setblocking(False)
        self._replies[sock] = b""
        self._selector.register(sock, selectors.EVENT_READ, source)

    def _read(self) -> None:
        while not self._stop.is_set() and self._replies:
            for key, _ in self._selector.select(timeout=0.05):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                try:
                    chunk = sock.recv(65536)
                except OSError:
                    chunk = b""
                if chunk:
                    self._replies[sock] += chunk
                    continue
                self._selector.unregister(sock)
                reply = self._replies.pop(sock)
                sock.close()
                status = reply.split(b" ", 2)[1] if reply.startswith(b"HTTP/1.1 ") else b""
                self.answers.append(int(status) if status.isdigit() else None)
                if self.again and not self._stop.is_set():
                    self._send(key.data)
