"""A small OIDC identity provider on loopback: a client-credentials token endpoint and a JWKS.

    with OAuthServer({"kvq": "kvq-secret"}, expires_in=60) as idp:
        idp.token_url   # POST grant_type=client_credentials, client authenticated with HTTP Basic
        idp.jwks_url    # GET: the RSA public key the tokens are signed with (RS256, a "kid")
        idp.issued      # the client ids of the tokens issued so far, in order

Tokens are JWTs as Kafka's OAuthBearerValidatorCallbackHandler accepts them: `sub` (the client
id, Kafka's principal name), `iat`, `exp` (`expires_in` seconds later), `iss`, `scope`; signed
with an RSA key made at start with `cryptography`. A wrong secret or an unknown client is
answered 401 `invalid_client`, any grant but client credentials 400 `unsupported_grant_type`, as
RFC 6749 section 5.2 says. With `tls` (a `devkit.tls_certificates.Pki`), the token endpoint is
also served over HTTPS with the PKI's server certificate (`https_token_url`); the JWKS, which
the brokers fetch, stays plain HTTP. They listen on free loopback ports, in threads of this
process, until `stop()` (or the end of the `with` block).
"""

from __future__ import annotations

import base64
import json
import ssl
import threading
import time
import uuid
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from devkit.tls_certificates import Pki

ISSUER = "https://idp.kvq.test"


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _uint(number: int) -> str:
    return _b64url(number.to_bytes((number.bit_length() + 7) // 8, "big"))


class OAuthServer:
    """Token endpoint and JWKS for `clients` (client id -> secret); see the module docstring."""

    def __init__(
        self,
        clients: Mapping[str, str],
        expires_in: float = 300,
        scope: str = "kafka",
        tls: Pki | None = None,
        host: str = "127.0.0.1",
    ) -> None:
        self.clients = dict(clients)
        self.expires_in = expires_in
        """Seconds a token issued from now on is valid (a test may change it)."""
        self.scope = scope
        self.issued: list[str] = []
        self.refused: list[str] = []
        """The client ids (as sent) of the token requests refused."""
        self._key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self._kid = uuid.uuid4().hex[:12]
        self._lock = threading.Lock()
        self._servers = [self._serve(host, None)]
        port = self._servers[0].server_address[1]
        self.token_url = f"http://{host}:{port}/token"
        self.jwks_url = f"http://{host}:{port}/jwks"
        self.https_token_url: str | None = None
        if tls is not None:
            self._servers.append(self._serve(host, tls))
            self.https_token_url = f"https://{host}:{self._servers[1].server_address[1]}/token"

    def __enter__(self) -> OAuthServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        for server in self._servers:
            server.shutdown()
            server.server_close()

    def issue(self, subject: str, now: float | None = None) -> tuple[str, float]:
        """A signed token for `subject` and its lifetime in seconds."""
        issued_at = int(time.time() if now is None else now)  # whole seconds, as IdPs write
        lifetime = self.expires_in
        header = {"alg": "RS256", "typ": "JWT", "kid": self._kid}
        claims = {
            "sub": subject,
            "iss": ISSUER,
            "iat": issued_at,
            "exp": int(issued_at + lifetime),
            "scope": self.scope,
            "jti": uuid.uuid4().hex,
        }
        signing_input = ".".join(
            _b64url(json.dumps(part, separators=(",", ":")).encode()) for part in (header, claims)
        )
        signature = self._key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
        return f"{signing_input}.{_b64url(signature)}", lifetime

    def jwks(self) -> dict[str, Any]:
        numbers = self._key.public_key().public_numbers()
        key = {"kty": "RSA", "use": "sig", "alg": "RS256", "kid": self._kid}
        return {"keys": [key | {"n": _uint(numbers.n), "e": _uint(numbers.e)}]}

    def answer_token_request(self, headers: Mapping[str, str], body: bytes) -> tuple[int, dict]:
        """(status, JSON) for one POST to the token endpoint."""
        form = {k: v[0] for k, v in parse_qs(body.decode(errors="replace")).items()}
        client_id, secret = _basic_credentials(headers.get("Authorization", ""))
        if client_id is None:  # client_secret_post
            client_id, secret = form.get("client_id"), form.get("client_secret")
        if client_id is None or self.clients.get(client_id) != secret:
            with self._lock:
                self.refused.append(client_id or "")
            return 401, {"error": "invalid_client", "error_description": "Invalid client secret"}
        if form.get("grant_type") != "client_credentials":
            return 400, {"error": "unsupported_grant_type"}
        token, lifetime = self.issue(client_id)
        with self._lock:
            self.issued.append(client_id)
        return 200, {"access_token": token, "token_type": "Bearer", "expires_in": lifetime}

    def _serve(self, host: str, tls: Pki | None) -> ThreadingHTTPServer:
        server = ThreadingHTTPServer((host, 0), _handler(self))
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(tls.server.cert, tls.server.key)
            server.socket = context.wrap_socket(server.socket, server_side=True)
        threading.Thread(target=server.serve_forever, name="oauth-server", daemon=True).start()
        return server


def _basic_credentials(header: str) -> tuple[str | None, str | None]:
    scheme, _, encoded = header.partition(" ")
    if scheme.lower() != "basic":
        return None, None
    try:
        user, _, password = base64.b64decode(encoded).decode().partition(":")
    except ValueError:
        return None, None
    return user, password


def _handler(idp: OAuthServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            if self.path == "/jwks":
                self._send(200, idp.jwks())
            else:
                self._send(404, {"error": "not_found"})

        def do_POST(self) -> None:  # noqa: N802
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.path != "/token":
                self._send(404, {"error": "not_found"})
                return
            self._send(*idp.answer_token_request(dict(self.headers.items()), body))

        def _send(self, status: int, document: Mapping[str, Any]) -> None:
            data = json.dumps(document).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
            pass

    return Handler
