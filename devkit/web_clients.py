"""What tests and benchmarks of kvq's HTTP servers need: held connections, a web config file."""

from __future__ import annotations

import contextlib
import socket
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
