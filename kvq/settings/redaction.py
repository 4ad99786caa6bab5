"""Secrets never reach a log line or a printed URL.

Two nets, both applied to every log record by `kvq.settings.logging_setup` (whatever logger wrote
it: ours, kafka-python's, librdkafka's, urllib3's) and by whoever prints text that may hold one:

- the credentials in a URL (`http://user:pw@host`) are masked wherever a URL appears in the text
  (`mask_url_credentials`, also what every place printing a URL itself calls);
- every secret value this process has read (passwords, tokens, JAAS lines and the passwords in
  them, URL credentials: `remember_secrets`, called where settings and credential files are read)
  is masked wherever it appears, and so is the quoted value of any `...password...=`/`:` item
  (kafka-python's logged config: `'sasl_plain_password': '...'`) even if it was never remembered,
  and every bearer token (`Bearer <token>`: the OAUTHBEARER access tokens kvq renews).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import unquote

MASK = "********"
MIN_SECRET_LENGTH = 4
"""Shorter remembered values are not masked wherever they appear: masking every `1` or `ab` of a
log would make it unreadable while hiding little. They are still masked in a URL or after a
secret-bearing key."""

# Bounded and anchored so that a long line costs linear time, whatever it holds: a scheme starts
# where no scheme character precedes it, and credentials end at the first `/` (which every `://`
# holds); keys and values are not longer than these bounds.
_URL_CREDENTIALS = re.compile(
    r"(?P<scheme>(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]{0,31}://)"
    r"(?P<userinfo>[^\s/?#@]*(?:@[^\s/?#@]*)*)@"
)
_SECRET_KEYWORDS = ("password", "passwd", "secret", "token", "credential")
_SECRET_ITEM = re.compile(
    r"""(?P<key>(?:password|passwd|secret|token|credential)[\w.-]{0,64}['"]?\s{0,8}[:=]\s{0,8})"""
    r"""(?P<quote>['"])(?P<value>(?:(?!(?P=quote)).){0,1024}?)(?P=quote)""",
    re.IGNORECASE,
)
_BEARER = re.compile(r"(?P<scheme>\bbearer {1,8})[A-Za-z0-9._~+/-]{1,8192}=*", re.IGNORECASE)
"""A bearer token (RFC 6750's token68): what kafka-python logs of a SASL/OAUTHBEARER login at
debug (`auth=Bearer <the access token>`), and any Authorization header a library logs."""
_remembered: tuple[str, ...] = ()


def mask_url_credentials(text: str) -> str:
    """`text` with the password of every URL in it masked (`http://user:********@host`); a URL
    with a user name only (often a token) shows `http://********@host`."""
    if "://" not in text:  # the cheap test first: most log lines hold no URL
        return text
    return _URL_CREDENTIALS.sub(_masked_userinfo, text)


def _masked_userinfo(match: re.Match[str]) -> str:
    user, colon, _password = match.group("userinfo").partition(":")
    return match.group("scheme") + (f"{user}:{MASK}@" if colon else f"{MASK}@")


def url_secrets(text: str) -> list[str]:
    """The secret parts of the credentials of every URL in `text` (password, or a lone user)."""
    secrets = []
    for match in _URL_CREDENTIALS.finditer(text):
        user, colon, password = match.group("userinfo").partition(":")
        secret = password if colon else user
        secrets += [secret, unquote(secret)]  # as written, and as sent (percent-decoded)
    return [secret for secret in secrets if secret]


def remember_secrets(values: Iterable[str]) -> None:
    """Mask these values (and their URL credentials) in every later `redacted` text."""
    found = set(_remembered)
    for value in values:
        for secret in (value, *url_secrets(value)):
            found.update(variant for variant in _written_forms(secret) if variant)
    _set_remembered(found)


def _written_forms(secret: str) -> set[str]:
    """`secret` as a log line may hold it: as is, in a str's repr and in a bytes' repr
    (kafka-python logs its SASL/PLAIN request as `auth_bytes=b'user\\x00user\\x00password'`)."""
    return {secret, repr(secret)[1:-1], repr(secret.encode())[2:-1]}


def _set_remembered(values: set[str]) -> None:
    global _remembered
    # longest first, so a secret containing a shorter one is masked whole
    _remembered = tuple(sorted(values, key=len, reverse=True))


def forget_secrets() -> None:
    """Drop every remembered secret (tests)."""
    _set_remembered(set())


def redact(text: str, secrets: Iterable[str]) -> str:
    """`text` with URL credentials, secret-bearing items and each of `secrets` masked."""
    text = mask_url_credentials(text)
    lowered = text.lower()
    if any(keyword in lowered for keyword in _SECRET_KEYWORDS):
        text = _SECRET_ITEM.sub(_masked_item, text)
    if "bearer" in lowered:
        text = _BEARER.sub(rf"\g<scheme>{MASK}", text)
    for secret in secrets:
        if len(secret) >= MIN_SECRET_LENGTH and secret in text:
            text = text.replace(secret, MASK)
    return text


def _masked_item(match: re.Match[str]) -> str:
    quote = match.group("quote")
    return f"{match.group('key')}{quote}{MASK}{quote}"


def redacted(text: str) -> str:
    """`text` with every secret this process remembers masked, and URL credentials."""
    return redact(text, _remembered)
