"""Who may call the webhook: a bearer token and/or user:password pairs, read from files.

Secrets never sit in the properties file, only the names of the files that hold them. Every
comparison is constant-time (hmac.compare_digest) and every configured pair is checked, so the
answer time does not tell which part was wrong.
"""

from __future__ import annotations

import base64
import binascii
import hmac

from enforcer.settings import BASIC_FILE as BASIC_SETTING
from enforcer.settings import TOKEN_FILE as TOKEN_SETTING
from kvq.settings.properties import read_text_file
from kvq.settings.redaction import remember_secrets


class AuthConfigError(ValueError):
    """A credentials file is missing, unreadable or malformed."""


class Credentials:
    """Accepted credentials; `allows(header)` checks an Authorization header."""

    def __init__(self, token: str | None = None, users: dict[str, str] | None = None) -> None:
        self._token = token.encode() if token else None
        self._users = [(u.encode(), p.encode()) for u, p in (users or {}).items()]
        if self._token is None and not self._users:
            raise AuthConfigError("no credentials configured")

    @property
    def schemes(self) -> list[str]:
        return (["Bearer"] if self._token else []) + (["Basic"] if self._users else [])

    @classmethod
    def from_files(cls, token_file: str | None, basic_file: str | None) -> Credentials | None:
        """Read the files named by the settings; None when neither is set."""
        if token_file is None and basic_file is None:
            return None
        token = None
        users: dict[str, str] = {}
        if token_file is not None:
            lines = [line.strip() for line in _read(TOKEN_SETTING, token_file).splitlines()]
            lines = [line for line in lines if line]
            if len(lines) != 1 or any(c.isspace() for c in lines[0]):
                raise AuthConfigError(
                    f"{TOKEN_SETTING}={token_file}: the file must hold exactly one token "
                    f"(one line, no spaces), found {len(lines)} non-empty line(s)"
                )
            token = lines[0]
        if basic_file is not None:
            for number, raw in enumerate(_read(BASIC_SETTING, basic_file).splitlines(), 1):
                line = raw.strip()
                if not line or line.startswith("#"):
                    continue
                user, sep, password = line.partition(":")
                if not sep or not user or not password:
                    raise AuthConfigError(
                        f"{BASIC_SETTING}={basic_file} line {number}: expected user:password"
                    )
                users[user] = password
            if not users:
                raise AuthConfigError(f"{BASIC_SETTING}={basic_file}: no user:password lines")
        remember_secrets([token or "", *users.values()])  # never in a log line
        return cls(token, users)

    def allows(self, header: str | None) -> bool:
        if not header:
            return False
        scheme, _, value = header.strip().partition(" ")
        value = value.strip()
        if scheme.lower() == "bearer" and self._token is not None:
            return hmac.compare_digest(value.encode(), self._token)
        if scheme.lower() == "basic" and self._users:
            try:
                decoded = base64.b64decode(value.encode(), validate=True)
            except (binascii.Error, ValueError):
                return False
            user, _, password = decoded.partition(b":")
            ok = False
            for known_user, known_password in self._users:
                same_user = hmac.compare_digest(user, known_user)
                same_password = hmac.compare_digest(password, known_password)
                ok |= same_user and same_password
            return ok
        return False


def _read(setting: str, path: str) -> str:
    """The file's UTF-8 text without a byte order mark (a BOM kept would reject every webhook)."""
    try:
        return read_text_file(path)
    except OSError as exc:
        raise AuthConfigError(f"{setting}={path}: cannot read: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise AuthConfigError(f"{setting}={path}: cannot read: {exc}") from None
