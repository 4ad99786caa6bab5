"""SASL/PLAIN on a SASL_PLAINTEXT listener, as Kafka's SaslServerAuthenticator runs it.

A connection to the SASL listener must first authenticate: before that only ApiVersions and
SaslHandshake are answered (anything else closes the connection, Kafka's IllegalSaslState), and
after a v1 handshake only SaslAuthenticate (a v0 handshake is followed by the raw token in a bare
frame, answered by a bare frame). A failed authentication gets its error response, then the
connection closes. The principal is ``User:<name>``; on the PLAINTEXT listener it is
``User:ANONYMOUS``. A connection already authenticated (every PLAINTEXT one) gets
ILLEGAL_SASL_STATE for SaslHandshake and SaslAuthenticate and stays open, its principal
unchanged: Kafka without re-authentication (KIP-368). Passwords come from a users file (JSON
object name -> password) or the control API; they are never logged or returned. The
SaslHandshake and SaslAuthenticate handlers are in ``sasl_api``.
"""

from __future__ import annotations

import hmac
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kafka.protocol.api_key import ApiKey

from .validation import ControlError, read_json_file

PLAIN = "PLAIN"
MECHANISMS = [PLAIN]
UNSUPPORTED_SASL_MECHANISM = 33
ILLEGAL_SASL_STATE = 34
SASL_AUTHENTICATION_FAILED = 58
ANONYMOUS = "ANONYMOUS"
PLAINTEXT = "PLAINTEXT"
SASL_PLAINTEXT = "SASL_PLAINTEXT"


class AuthenticationFailed(Exception):
    pass


@dataclass
class Session:
    """One client connection: its listener, principal and SASL progress."""

    listener: str
    user: str = ANONYMOUS
    stage: str = "start"  # start -> handshake (v1) | raw (v0) -> done
    """``done`` for PLAINTEXT connections from the start."""

    def __post_init__(self) -> None:
        if self.listener == PLAINTEXT:
            self.stage = "done"

    @property
    def principal(self) -> str:
        return f"User:{self.user}"

    @property
    def authenticated(self) -> bool:
        return self.stage == "done"


class SaslUsers:
    """name -> password for SASL/PLAIN; thread-safe; optionally loaded from a JSON file."""

    def __init__(self, users: Mapping[str, str] | None = None):
        self._lock = threading.Lock()
        self._users: dict[str, str] = {}
        for name, password in (users or {}).items():
            self.set(name, password)

    @classmethod
    def from_file(cls, path: Path) -> SaslUsers:
        """A JSON object ``{"alice": "alice-secret", ...}``; ValueError naming the problem."""
        data = read_json_file(path, "SASL users file")
        if not isinstance(data, dict):
            raise ValueError(f"SASL users file {path}: expected a JSON object name -> password")
        try:
            return cls(data)
        except ControlError as exc:
            raise ValueError(f"SASL users file {path}: {exc.message}") from None

    def set(self, name: str, password: str) -> None:
        if not isinstance(name, str) or not name or "\0" in name:
            raise ControlError(400, f"user name must be a non-empty string, got {name!r}")
        if not isinstance(password, str) or not password or "\0" in password:
            raise ControlError(400, f"the password of {name!r} must be a non-empty string")
        with self._lock:
            self._users[name] = password

    def remove(self, name: str) -> None:
        with self._lock:
            if self._users.pop(name, None) is None:
                raise ControlError(404, f"no SASL user {name!r}")

    def names(self) -> list[str]:
        with self._lock:
            return sorted(self._users)

    def authenticate(self, token: bytes) -> str:
        """The user name of a valid PLAIN token (authzid NUL user NUL password); Kafka's
        PlainSaslServer messages otherwise."""
        parts = token.decode("utf-8", "replace").split("\0", 3)
        if len(parts) != 3:
            raise AuthenticationFailed(
                f"Invalid SASL/PLAIN response: expected 3 tokens, got {min(len(parts), 4)}"
            )
        authzid, user, password = parts
        if not user:
            raise AuthenticationFailed("Authentication failed: username not specified")
        if not password:
            raise AuthenticationFailed("Authentication failed: password not specified")
        with self._lock:
            expected = self._users.get(user)
        if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            raise AuthenticationFailed("Authentication failed: Invalid username or password")
        if authzid and authzid != user:
            raise AuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is different "
                "from username"
            )
        return user


def authenticated_user(users: SaslUsers | None, token: bytes) -> str:
    """The user a PLAIN token authenticates; AuthenticationFailed when the cluster has no users."""
    if users is None:
        raise AuthenticationFailed("this devcluster has no SASL users")
    return users.authenticate(token)


def allowed_before_authentication(session: Session, api_key: int) -> bool:
    """What a SASL connection may send at its stage (anything else closes it)."""
    if session.stage == "start":
        return api_key in (ApiKey.ApiVersions, ApiKey.SaslHandshake)
    if session.stage == "handshake":
        return api_key == ApiKey.SaslAuthenticate
    return session.stage == "done"
