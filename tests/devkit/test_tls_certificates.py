"""The test PKI passes strict X.509 verification (VERIFY_X509_STRICT, Python 3.13's default for
a client context): a server and a client certificate from the CA complete a mutual handshake."""

from __future__ import annotations

import ssl

import pytest

from devkit.tls_certificates import make_pki


def handshake(client: ssl.SSLContext, server: ssl.SSLContext) -> None:
    """A TLS handshake between the two contexts in memory (no socket), raising what fails."""
    to_server, to_client = ssl.MemoryBIO(), ssl.MemoryBIO()
    client_end = client.wrap_bio(to_client, to_server, server_hostname="localhost")
    server_end = server.wrap_bio(to_server, to_client, server_side=True)
    done = {"client": False, "server": False}
    for _ in range(10):
        for name, end in (("client", client_end), ("server", server_end)):
            if not done[name]:
                try:
                    end.do_handshake()
                    done[name] = True
                except ssl.SSLWantReadError:
                    pass
        if all(done.values()):
            return
    raise AssertionError(f"handshake did not finish: {done}")


def contexts(pki, strict: bool) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    client = ssl.create_default_context(cafile=str(pki.ca))
    client.load_cert_chain(pki.client.cert, pki.client.key)
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(pki.ca))
    server.load_cert_chain(pki.server.cert, pki.server.key)
    server.verify_mode = ssl.CERT_REQUIRED
    if strict:
        client.verify_flags |= ssl.VERIFY_X509_STRICT
        server.verify_flags |= ssl.VERIFY_X509_STRICT
    return client, server


@pytest.mark.parametrize("strict", [False, True], ids=["default", "strict"])
def test_server_and_client_certificates_verify(tmp_path, strict) -> None:
    handshake(*contexts(make_pki(tmp_path), strict))


def test_a_foreign_client_is_refused(tmp_path) -> None:
    pki = make_pki(tmp_path)
    client, server = contexts(pki, strict=True)
    client.load_cert_chain(pki.stranger.cert, pki.stranger.key)
    with pytest.raises(ssl.SSLError):
        handshake(client, server)
