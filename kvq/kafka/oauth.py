"""SASL/OAUTHBEARER with OIDC client credentials: the settings as users write them, and the token.

Three ways of writing the same thing are read (`kafka.admin.*` without the prefix):

- librdkafka's: `sasl.oauthbearer.method=oidc`, `sasl.oauthbearer.client.id`,
  `sasl.oauthbearer.client.secret`, `sasl.oauthbearer.token.endpoint.url`,
  `sasl.oauthbearer.scope`, `https.ca.location` (the token endpoint's CA);
- Kafka's Java client: `sasl.oauthbearer.token.endpoint.url` and a JAAS line
  `OAuthBearerLoginModule required clientId="..." clientSecret="..." scope="...";` (or, since
  Kafka 4.1, `sasl.oauthbearer.client.credentials.client.id` / `.client.secret`);
- Strimzi's OAuth library: JAAS options `oauth.client.id`, `oauth.client.secret`,
  `oauth.token.endpoint.uri`, `oauth.scope`, `oauth.ssl.truststore.location` (PEM).

`oauthbearer_settings` turns any of them into librdkafka's names (what the rest of
kvq/kafka/client_settings.py works with); `token_provider` makes from those the kafka-python token
provider, which does the client-credentials grant (RFC 6749 section 4.4, the client
authenticated with HTTP Basic as Kafka's, librdkafka's and Strimzi's clients do), keeps the token
and fetches a new one when 80 % of its lifetime (`expires_in`, or the JWT's `exp` when sooner) has
passed, as Kafka's Java client and librdkafka do by default.

HTTP is the standard library's urllib: the token endpoint's trust is one `ssl.SSLContext` (the
dedicated CA, or the system's CAs plus Kafka's CA), which urllib takes as it is; requests would put
certifi's bundle behind it.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import os
import re
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kvq.settings.redaction import mask_url_credentials

log = logging.getLogger("kvq.kafka.oauth")

OAUTHBEARER = "OAUTHBEARER"
OIDC = "oidc"
CLIENT_CREDENTIALS = "client_credentials"
LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
LOGIN_HANDLERS = (
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler",
    "io.strimzi.kafka.oauth.client.JaasClientOauthLoginCallbackHandler",
)
"""The Java login callback handlers whose client-credentials login kvq does itself."""
REFRESH_AT = 0.8
"""A token is replaced when this share of its lifetime has passed (Kafka's
sasl.login.refresh.window.factor default, librdkafka's refresh point)."""
TOKEN_TIMEOUT_SECONDS = 10.0
"""Connect and read timeout of one token request (Kafka's sasl.login.*.timeout.ms default)."""

# librdkafka's names: the canonical form after translation.
METHOD = "sasl.oauthbearer.method"
CLIENT_ID = "sasl.oauthbearer.client.id"
CLIENT_SECRET = "sasl.oauthbearer.client.secret"  # noqa: S105 - a key, not a secret
TOKEN_URL = "sasl.oauthbearer.token.endpoint.url"
SCOPE = "sasl.oauthbearer.scope"
GRANT_TYPE = "sasl.oauthbearer.grant.type"
HTTPS_CA = "https.ca.location"
_JAVA_CLIENT_ID = "sasl.oauthbearer.client.credentials.client.id"
_JAVA_CLIENT_SECRET = "sasl.oauthbearer.client.credentials.client.secret"  # noqa: S105
_LOGIN_HANDLER = "sasl.login.callback.handler.class"
JAVA_ONLY_OAUTH_KEYS = frozenset(
    {
        _LOGIN_HANDLER,
        _JAVA_CLIENT_ID,
        _JAVA_CLIENT_SECRET,
        "sasl.login.connect.timeout.ms",
        "sasl.login.read.timeout.ms",
        "sasl.login.retry.backoff.ms",
        "sasl.login.retry.backoff.max.ms",
        "sasl.login.refresh.window.factor",
        "sasl.login.refresh.window.jitter",
        "sasl.login.refresh.min.period.seconds",
        "sasl.login.refresh.buffer.seconds",
        "sasl.oauthbearer.header.urlencode",
        "sasl.oauthbearer.scope.claim.name",
        "sasl.oauthbearer.sub.claim.name",
    }
)
"""Java client settings about the OAuth login that librdkafka does not know: read here (the
client credentials) or without effect on kvq (timeouts, refresh tuning), never passed on."""
_STRIMZI_UNSUPPORTED = {
    "oauth.access.token": "a fixed access token",
    "oauth.refresh.token": "a refresh token",
    "oauth.password.grant.username": "the password grant",
    "oauth.client.assertion": "a client assertion",
    "oauth.client.assertion.location": "a client assertion",
}
_JAAS_ITEM = re.compile(r'([\w.-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;"]+))')


class OAuthTokenError(Exception):
    """No token could be had from the token endpoint; the message holds no secret."""


@dataclass(frozen=True)
class OidcClient:
    """One OIDC client-credentials login: who, where, and which CAs the endpoint is checked
    against."""

    client_id: str
    client_secret: str = field(repr=False)
    token_url: str
    scope: str | None = None
    ca_file: str | None = None
    """The token endpoint's own CA (PEM): trusted alone."""
    kafka_ca_file: str | None = None
    """Kafka's CA (ssl.ca.location): trusted besides the system's when there is no own CA."""

    def ssl_context(self) -> ssl.SSLContext:
        if self.ca_file:
            return ssl.create_default_context(cafile=self.ca_file)
        context = ssl.create_default_context()
        if self.kafka_ca_file:
            context.load_verify_locations(cafile=self.kafka_ca_file)
        return context


def is_oauthbearer(props: Mapping[str, str]) -> bool:
    """Whether these `kafka.admin.*` settings choose SASL/OAUTHBEARER."""
    mechanism = props.get("sasl.mechanism", props.get("sasl.mechanisms", ""))
    return mechanism.strip().upper() == OAUTHBEARER


def is_oauthbearer_jaas(jaas: str) -> bool:
    """Whether a JAAS line is Kafka's OAuthBearerLoginModule (not a PLAIN/SCRAM login)."""
    return jaas.strip().startswith(LOGIN_MODULE)


def jaas_options(jaas: str) -> dict[str, str]:
    """The `name="value"` (or `name=value`) options of a JAAS line; names may hold dots, as
    Strimzi's `oauth.client.id`."""
    options = {}
    for name, quoted, bare in _JAAS_ITEM.findall(jaas):
        options[name] = re.sub(r"\\(.)", r"\1", quoted) if quoted or not bare else bare
    return options


def oauthbearer_settings(props: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """librdkafka's OIDC settings for these `kafka.admin.*` settings, and what is wrong with them.

    Nothing (and no error) unless the mechanism is OAUTHBEARER. Java-style and Strimzi-style
    settings are translated; what start-up would fail on is an error naming the setting: a missing
    client id, secret or token endpoint, a URL that is not http(s)://host..., a grant other than
    client credentials, unsecured tokens, a token endpoint CA that is not a readable PEM file.
    """
    if not is_oauthbearer(props):
        return {}, []
    errors: list[str] = []
    out = {
        key: props[key]
        for key in (METHOD, CLIENT_ID, CLIENT_SECRET, TOKEN_URL, SCOPE, HTTPS_CA)
        if key in props
    }
    for java, canonical in ((_JAVA_CLIENT_ID, CLIENT_ID), (_JAVA_CLIENT_SECRET, CLIENT_SECRET)):
        if java in props:
            out.setdefault(canonical, props[java])
    jaas = props.get("sasl.jaas.config", "")
    other_login = bool(jaas) and _from_jaas(jaas, out, errors)
    handler = props.get(_LOGIN_HANDLER)
    if handler is not None and handler.strip() not in LOGIN_HANDLERS:
        errors.append(
            f"kafka.admin.{_LOGIN_HANDLER}={handler}: a Java class cannot run in kvq; leave it out "
            "or use Kafka's OAuthBearerLoginCallbackHandler (client credentials, done by kvq)"
        )
    if not other_login:  # else what it lacks for client credentials is no news
        errors += _client_errors(props, out, bool(jaas))
    return out, errors


def _from_jaas(jaas: str, out: dict[str, str], errors: list[str]) -> bool:
    """Client credentials of an OAuthBearerLoginModule JAAS line (Kafka's or Strimzi's option
    names) into librdkafka's names; settings written outside the JAAS line win. True when the
    line asks for another login than client credentials (an error says which)."""
    if not is_oauthbearer_jaas(jaas):
        errors.append(
            "kafka.admin.sasl.jaas.config: with sasl.mechanism=OAUTHBEARER it must be "
            f'{LOGIN_MODULE} required clientId="..." clientSecret="...";'
        )
        return True
    options = jaas_options(jaas)
    found = len(errors)
    if any(name.startswith("unsecuredLogin") for name in options):
        errors.append(
            "kafka.admin.sasl.jaas.config: unsecured OAUTHBEARER tokens (unsecuredLogin*) are "
            "for development and not supported; use client credentials (clientId, clientSecret "
            "and sasl.oauthbearer.token.endpoint.url)"
        )
    for name, what in _STRIMZI_UNSUPPORTED.items():
        if name in options:
            errors.append(
                f"kafka.admin.sasl.jaas.config: {name} ({what}) is not supported; kvq logs in "
                "with client credentials only (oauth.client.id and oauth.client.secret)"
            )
    other_login = len(errors) > found
    names = {
        CLIENT_ID: ("clientId", "oauth.client.id"),
        CLIENT_SECRET: ("clientSecret", "oauth.client.secret"),
        SCOPE: ("scope", "oauth.scope"),
        TOKEN_URL: ("oauth.token.endpoint.uri",),
    }
    for canonical, written in names.items():
        for name in written:
            if name in options:
                out.setdefault(canonical, options[name])
    for prefix in ("", "oauth."):  # Java's JAAS ssl.* options, Strimzi's oauth.ssl.*
        location = options.get(f"{prefix}ssl.truststore.location")
        if location is None:
            continue
        kind = options.get(f"{prefix}ssl.truststore.type", "JKS").upper()
        if kind != "PEM":
            errors.append(
                f"kafka.admin.sasl.jaas.config: {prefix}ssl.truststore.location is a {kind} "
                f"store; kvq reads the token endpoint's CA as PEM: set "
                f'{prefix}ssl.truststore.type="PEM" or kafka.admin.{HTTPS_CA}'
            )
        else:
            out.setdefault(HTTPS_CA, location)
    out.setdefault(METHOD, OIDC)
    return other_login and not (CLIENT_ID in out and CLIENT_SECRET in out)


def _client_errors(props: Mapping[str, str], out: Mapping[str, str], jaas: bool) -> list[str]:
    method = out.get(METHOD, "default").strip().lower()
    if method != OIDC:
        how = "a JAAS line with clientId/clientSecret" if not jaas else ""
        return [
            f"kafka.admin.sasl.mechanism=OAUTHBEARER needs OIDC client credentials: set "
            f"kafka.admin.{METHOD}=oidc with {CLIENT_ID}, {CLIENT_SECRET} and {TOKEN_URL}"
            + (f" (or {how})" if how else "")
            + f"; {METHOD}={method} (unsecured or externally supplied tokens) is not supported"
        ]
    errors = []
    grant = props.get(GRANT_TYPE, CLIENT_CREDENTIALS).strip()
    if grant != CLIENT_CREDENTIALS:
        errors.append(f"kafka.admin.{GRANT_TYPE}={grant}: only {CLIENT_CREDENTIALS} is supported")
    for key, what in ((CLIENT_ID, "the client id"), (CLIENT_SECRET, "the client secret")):
        if not out.get(key, "").strip():
            java, strimzi = ("clientId", "oauth.client.id")
            if key == CLIENT_SECRET:
                java, strimzi = ("clientSecret", "oauth.client.secret")
            errors.append(
                f"kafka.admin.{key} is required with OAUTHBEARER: {what} to log in with (or "
                f'{java}="..." or {strimzi}="..." in sasl.jaas.config)'
            )
    url = out.get(TOKEN_URL, "").strip()
    if not url:
        errors.append(
            f"kafka.admin.{TOKEN_URL} is required with OAUTHBEARER: the identity provider's "
            "token endpoint, e.g. https://idp.example.com/realms/kafka/protocol/openid-connect/token"
        )
    else:
        errors += _url_errors(url)
    ca = out.get(HTTPS_CA)
    if ca is not None and not (os.path.isfile(ca) and os.access(ca, os.R_OK)):
        errors.append(
            f"kafka.admin.{HTTPS_CA}={ca}: no readable file there (the token "
            "endpoint's CA certificates, PEM)"
        )
    return errors


def _url_errors(url: str) -> list[str]:
    shown = mask_url_credentials(url)
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a port that is not a number
    except ValueError as exc:
        return [f"kafka.admin.{TOKEN_URL}={shown}: not a URL ({exc})"]
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        return [
            f"kafka.admin.{TOKEN_URL}={shown}: must be an http:// or https:// URL with a host, "
            "e.g. https://idp.example.com/oauth2/token"
        ]
    return []


def without_token_requests(config: Mapping[str, Any]) -> dict[str, Any]:
    """librdkafka's settings with its OIDC login replaced by a local unsecured token: a client
    made only to check the other settings then asks no token endpoint (oauthbearer_settings
    checked the OIDC ones)."""
    if str(config.get(METHOD, "")).strip().lower() != OIDC:
        return dict(config)
    oidc = (METHOD, CLIENT_ID, CLIENT_SECRET, TOKEN_URL, SCOPE, GRANT_TYPE, HTTPS_CA)
    checked = {key: value for key, value in config.items() if key not in oidc}
    checked["enable.sasl.oauthbearer.unsecure.jwt"] = "true"
    return checked


def oidc_client(settings: Mapping[str, str]) -> OidcClient:
    """The login of translated (librdkafka-named) settings that `oauthbearer_settings` found
    without error."""
    return OidcClient(
        client_id=settings[CLIENT_ID],
        client_secret=settings[CLIENT_SECRET],
        token_url=settings[TOKEN_URL].strip(),
        scope=settings.get(SCOPE) or None,
        ca_file=settings.get(HTTPS_CA) or None,
        kafka_ca_file=settings.get("ssl.ca.location") or None,
    )


@dataclass(frozen=True)
class Token:
    value: str
    obtained: float
    """time.monotonic() when it was asked for."""
    lifetime: float
    """Seconds it is valid from `obtained`."""

    @property
    def refresh_at(self) -> float:
        return self.obtained + REFRESH_AT * self.lifetime

    @property
    def expires_at(self) -> float:
        return self.obtained + self.lifetime


def fetch_token(
    client: OidcClient,
    clock: Callable[[], float] = time.monotonic,
    timeout: float = TOKEN_TIMEOUT_SECONDS,
) -> Token:
    """One client-credentials grant at the token endpoint; raises OAuthTokenError saying why not
    (never the secret)."""
    body = {"grant_type": CLIENT_CREDENTIALS}
    if client.scope:
        body["scope"] = client.scope
    basic = base64.b64encode(f"{client.client_id}:{client.client_secret}".encode()).decode()
    request = urllib.request.Request(
        client.token_url,
        data=urllib.parse.urlencode(body).encode(),
        headers={
            "Authorization": f"Basic {basic}",
            "Content-Type": "application/x-www-form-urlencoded",
            "Accept": "application/json",
        },
        method="POST",
    )
    where = f"OAUTHBEARER token endpoint {mask_url_credentials(client.token_url)}"
    started = clock()
    context = client.ssl_context() if client.token_url.lower().startswith("https:") else None
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=context) as response:
            document = _json_object(response.read(), where)
    except urllib.error.HTTPError as exc:
        raise OAuthTokenError(
            f"{where} refused client {client.client_id!r}: HTTP {exc.code}{_oauth_error(exc)}"
        ) from None
    except (urllib.error.URLError, OSError) as exc:
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        raise OAuthTokenError(f"{where} cannot be reached: {reason}") from None
    return _token_of(document, started, where)


def _json_object(raw: bytes, where: str) -> dict[str, Any]:
    try:
        document = json.loads(raw)
    except ValueError:
        raise OAuthTokenError(f"{where} answered something that is not JSON") from None
    if not isinstance(document, dict):
        raise OAuthTokenError(f"{where} answered JSON that is not an object")
    return document


def _oauth_error(exc: urllib.error.HTTPError) -> str:
    """`: invalid_client (description)` from an RFC 6749 error answer, else ''."""
    try:
        document = json.loads(exc.read(4096))
    except (ValueError, OSError):
        return ""
    if not isinstance(document, dict) or not isinstance(document.get("error"), str):
        return ""
    description = document.get("error_description")
    more = f" ({description[:200]})" if isinstance(description, str) and description else ""
    return f": {document['error'][:100]}{more}"


def _token_of(document: Mapping[str, Any], obtained: float, where: str) -> Token:
    value = document.get("access_token")
    if not isinstance(value, str) or not value:
        raise OAuthTokenError(f"{where} answered without an access_token")
    expires_in = document.get("expires_in")
    if not isinstance(expires_in, int | float) or isinstance(expires_in, bool):
        expires_in = None
    # A JWT's exp wins when it is sooner: identity providers write whole seconds, so exp can come
    # up to a second before expires_in says, which matters to short-lived tokens.
    lifetimes = [t for t in (expires_in, _jwt_lifetime(value)) if t is not None]
    if not lifetimes:
        raise OAuthTokenError(
            f"{where} answered a token without a lifetime (no expires_in, and not a JWT with exp)"
        )
    lifetime = min(lifetimes)
    if lifetime <= 0:
        raise OAuthTokenError(f"{where} answered a token that has expired already")
    return Token(value, obtained, float(lifetime))


def _jwt_lifetime(token: str) -> float | None:
    """Seconds until the `exp` of a JWT (not verified: only the broker can), None if it is not
    one."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        payload = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (ValueError, binascii.Error):
        return None
    expiry = payload.get("exp") if isinstance(payload, dict) else None
    if not isinstance(expiry, int | float) or isinstance(expiry, bool):
        return None
    return expiry - time.time()
