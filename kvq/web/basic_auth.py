"""HTTP basic auth against bcrypt hashes, as exporter-toolkit's `basic_auth_users` does.

bcrypt is slow on purpose (cost 10 is ~50 ms here); a scraper that sends the same right password
every 15 s pays it once: successful checks are remembered (as a keyed digest, never the
password) and later ones are a dictionary look-up. An unknown user is checked against a decoy hash
so the answer time does not tell which users exist.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import threading
from collections import OrderedDict
from collections.abc import Mapping

import bcrypt

CACHE_SIZE = 1024
_DECOY = bcrypt.hashpw(b"kvq-decoy-password", bcrypt.gensalt(rounds=10))


class BasicAuthError(ValueError):
    """The users mapping is not user -> bcrypt hash."""


def basic_credentials(header: str | None) -> tuple[bytes, bytes] | None:
    """(user, password) of a `Basic` Authorization header, None for any other or a bad one."""
    if not header:
        return None
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(value.strip().encode("ascii"), validate=True)
    except (binascii.Error, ValueError, UnicodeEncodeError):
        return None
    user, sep, password = decoded.partition(b":")
    return (user, password) if sep else None


class BcryptUsers:
    """user -> bcrypt hash; `allows(header)` may take one bcrypt round: call it off the loop."""

    scheme = "Basic"

    def __init__(self, hashes: Mapping[str, bytes]) -> None:
        self._hashes = {user.encode(): hashed for user, hashed in hashes.items()}
        self._key = os.urandom(32)
        self._ok: OrderedDict[bytes, None] = OrderedDict()
        self._lock = threading.Lock()

    @classmethod
    def from_mapping(cls, data: object, where: str) -> BcryptUsers:
        if not isinstance(data, dict) or not data:
            raise BasicAuthError(f"{where} must map user names to bcrypt hashes")
        hashes = {}
        for user, hashed in data.items():
            if not isinstance(user, str) or not user or ":" in user:
                raise BasicAuthError(f"{where}: user name {user!r} must be a non-empty string")
            if not isinstance(hashed, str) or not _is_bcrypt(hashed):
                raise BasicAuthError(
                    f"{where}.{user}: not a bcrypt hash (expected $2a$/$2b$/$2y$, e.g. from "
                    "`htpasswd -nBC 10 \"\" | tr -d ':\\n'`)"
                )
            hashes[user] = hashed.encode()
        return cls(hashes)

    def allows(self, header: str | None) -> bool:
        pair = basic_credentials(header)
        if pair is None:
            return False
        user, password = pair
        digest = hmac.new(self._key, user + b"\0" + password, hashlib.sha256).digest()
        with self._lock:
            if digest in self._ok:
                self._ok.move_to_end(digest)
                return True
        hashed = self._hashes.get(user)
        try:
            ok = bcrypt.checkpw(password, hashed or _DECOY) and hashed is not None
        except ValueError:  # a password over bcrypt's 72 bytes
            return False
        if ok:
            with self._lock:
                self._ok[digest] = None
                while len(self._ok) > CACHE_SIZE:
                    self._ok.popitem(last=False)
        return ok


def _is_bcrypt(text: str) -> bool:
    if not text.startswith(("$2a$", "$2b$", "$2y$")) or len(text) != 60:
        return False
    try:
        bcrypt.checkpw(b"", text.encode())
    except ValueError:
        return False
    return True
