"""HTTP basic auth against bcrypt hashes, as exporter-toolkit's `basic_auth_users` does.

bcrypt is slow on purpose (tens of milliseconds per check at cost 10); a scraper that sends
the same right password every 15 s pays it once: the answers of checks are remembered (as keyed
digests, never the password), right and wrong ones apart so a crowd of wrong passwords cannot
push a right one out, and `remembered(header)` answers them with a dictionary look-up, cheap
enough for the event loop. An unknown user is checked against the costliest configured hash, so
neither the answer nor its time tells which users exist.
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


class _Remembered:
    """A bounded set of digests, the least recently used one forgotten first; thread-safe."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._digests: OrderedDict[bytes, None] = OrderedDict()
        self._lock = threading.Lock()

    def __contains__(self, digest: bytes) -> bool:
        with self._lock:
            if digest not in self._digests:
                return False
            self._digests.move_to_end(digest)
            return True

    def add(self, digest: bytes) -> None:
        with self._lock:
            self._digests[digest] = None
            while len(self._digests) > self._size:
                self._digests.popitem(last=False)


class BcryptUsers:
    """user -> bcrypt hash. `remembered(header)` is instant; `check(header)` takes a bcrypt round
    (run it off the event loop); `allows(header)` is the two in turn."""

    scheme = "Basic"

    def __init__(self, hashes: Mapping[str, bytes]) -> None:
        self._hashes = {user.encode(): hashed for user, hashed in hashes.items()}
        # "$2b$12$...": the cost is the two digits after the second "$"
        self._decoy = max(self._hashes.values(), key=lambda hashed: hashed[4:6])
        self._key = os.urandom(32)
        self._right = _Remembered(CACHE_SIZE)
        self._wrong = _Remembered(CACHE_SIZE)

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
        known = self.remembered(header)
        return self.check(header) if known is None else known

    def remembered(self, header: str | None) -> bool | None:
        """The remembered answer for these credentials (False for a header that is not Basic
        credentials), None when only a bcrypt round can tell."""
        pair = basic_credentials(header)
        if pair is None:
            return False
        digest = self._digest(*pair)
        if digest in self._right:
            return True
        return False if digest in self._wrong else None

    def check(self, header: str | None) -> bool:
        """One bcrypt round (tens to hundreds of milliseconds); the answer is remembered."""
        pair = basic_credentials(header)
        if pair is None:
            return False
        user, password = pair
        hashed = self._hashes.get(user)
        try:
            ok = bcrypt.checkpw(password, hashed or self._decoy) and hashed is not None
        except ValueError:  # a password over bcrypt's 72 bytes
            ok = False
        (self._right if ok else self._wrong).add(self._digest(user, password))
        return ok

    def _digest(self, user: bytes, password: bytes) -> bytes:
        return hmac.new(self._key, user + b"\0" + password, hashlib.sha256).digest()


def _is_bcrypt(text: str) -> bool:
    if not text.startswith(("$2a$", "$2b$", "$2y$")) or len(text) != 60:
        return False
    try:
        bcrypt.checkpw(b"", text.encode())
    except ValueError:
        return False
    return True
