"""`--web.config.file`: TLS and basic auth in the format of Prometheus' exporter-toolkit.

The same YAML file a node_exporter or kafka_exporter takes works here:

    tls_server_config:
      cert_file: server.crt          # relative paths are relative to this file
      key_file: server.key
      client_ca_file: ca.crt         # mTLS
      client_auth_type: RequireAndVerifyClientCert
    basic_auth_users:
      prometheus: $2y$10$...         # bcrypt hash (htpasswd -nBC 10 "" | tr -d ':\\n')

As in exporter-toolkit, unknown keys are errors, TLS is on when any TLS key is set, the minimum
version defaults to TLS 1.2, and certificate files are re-read when they change (rotation by
cert-manager needs no restart). Every key of exporter-toolkit's Config is accepted, so a file a
node_exporter takes works here: `rate_limit` (one token bucket for all requests, 429 past it) and
`client_allowed_sans` are honoured; what Python's ssl module cannot set (Go cipher-suite names,
curve preferences, `prefer_server_cipher_suites`, which Go itself ignores since 1.18) and
`http2: true` (this server speaks HTTP/1.1) are ignored with a warning that says so. A client
certificate requested but not verified cannot be asked for with Python's ssl: refused.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import re
import ssl
import stat
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kvq.settings.cli_support import EXIT_CONFIG_ERROR
from kvq.web.basic_auth import BasicAuthError, BcryptUsers

log = logging.getLogger("kvq.web")

TLS_VERSIONS = {
    "TLS10": ssl.TLSVersion.TLSv1,
    "TLS11": ssl.TLSVersion.TLSv1_1,
    "TLS12": ssl.TLSVersion.TLSv1_2,
    "TLS13": ssl.TLSVersion.TLSv1_3,
}
CLIENT_AUTH = {
    "": ssl.CERT_NONE,
    "NoClientCert": ssl.CERT_NONE,
    "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
    "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
}
UNVERIFIED_CLIENT_AUTH = ("RequestClientCert", "RequireAnyClientCert", "RequireClientCert")
TLS_KEYS = {
    "cert_file",
    "key_file",
    "cert",
    "key",
    "client_ca_file",
    "client_ca",
    "client_auth_type",
    "min_version",
    "max_version",
    "client_allowed_sans",
}
IGNORED_TLS_KEYS = {
    "cipher_suites": "Go cipher-suite names are not settable here; OpenSSL's defaults for the "
    "TLS versions allowed apply",
    "curve_preferences": "not settable through Python's ssl module; OpenSSL's defaults apply",
    "prefer_server_cipher_suites": "Go ignores it too since Go 1.18",
}
HTTP_KEYS = {"http2", "headers"}
RATE_LIMIT_KEYS = {"burst", "interval"}
TOP_KEYS = {"tls_server_config", "http_server_config", "rate_limit", "basic_auth_users"}
_GO_DURATION = re.compile(r"(?:([0-9]*\.?[0-9]+)(ns|us|µs|ms|s|m|h))+")
_GO_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


class WebConfigError(ValueError):
    """The web config file is unreadable or invalid; the message names the file and the key."""


@dataclass(frozen=True)
class TLSFiles:
    """Where the server's certificate, key and client CA come from (paths or inline PEM)."""

    cert_file: Path | None
    key_file: Path | None
    cert_pem: str | None
    key_pem: str | None
    client_ca_file: Path | None
    client_ca_pem: str | None
    verify_mode: ssl.VerifyMode
    min_version: ssl.TLSVersion
    max_version: ssl.TLSVersion
    allowed_sans: tuple[str, ...] = ()
    """`client_allowed_sans`: a client certificate must name one of these (DNS, email, IP or
    URI); empty: any certificate the CA signed."""

    def files(self) -> tuple[Path, ...]:
        return tuple(p for p in (self.cert_file, self.key_file, self.client_ca_file) if p)

    def context(self) -> ssl.SSLContext:
        """A fresh server context from the current files; raises WebConfigError."""
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = self.min_version
        ctx.maximum_version = self.max_version
        ctx.set_alpn_protocols(["http/1.1"])  # the only protocol served: say so in ALPN
        try:
            _load_chain(ctx, self)
            if self.client_ca_file or self.client_ca_pem:
                ctx.load_verify_locations(
                    cafile=self.client_ca_file, cadata=self.client_ca_pem or None
                )
        except (OSError, ssl.SSLError) as exc:
            raise WebConfigError(f"tls_server_config: {_describe(exc)}") from None
        ctx.verify_mode = self.verify_mode
        return ctx


@dataclass(frozen=True)
class RateLimit:
    """`rate_limit`: a token bucket of `burst` requests refilled one per `interval` seconds, for
    all requests together (exporter-toolkit's golang.org/x/time/rate limiter)."""

    burst: int
    interval: float

    def bucket(self) -> TokenBucket:
        return TokenBucket(self.burst, self.interval)


class TokenBucket:
    """Not thread-safe: the server's event loop is its only user."""

    def __init__(self, burst: int, interval: float) -> None:
        self.burst = burst
        self.interval = interval
        self.tokens = float(burst)
        self.at = time.monotonic()

    def allow(self) -> bool:
        """Take a token if there is one."""
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.at) / self.interval)
        self.at = now
        if self.tokens < 1:
            return False
        self.tokens -= 1
        return True


@dataclass(frozen=True)
class WebConfig:
    """The parsed file: TLS (None = plain HTTP), bcrypt users, extra response headers."""

    source: str
    tls: TLSFiles | None = None
    users: BcryptUsers | None = None
    headers: dict[str, str] = field(default_factory=dict)
    rate_limit: RateLimit | None = None
    warnings: tuple[str, ...] = ()
    """Keys accepted for exporter-toolkit's sake but not honoured, each saying why."""

    @property
    def scheme(self) -> str:
        return "https" if self.tls else "http"

    def ssl_context(self) -> ssl.SSLContext | None:
        """The server's TLS context, re-reading the certificate files whenever they change."""
        return None if self.tls is None else ReloadingContext(self.tls).context


def load_web_config(path: str | os.PathLike[str] | None) -> WebConfig | None:
    """Read and validate the file (certificates are loaded once to prove they work)."""
    if path is None or str(path) == "":
        return None
    source = str(path)
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # a FIFO would block start-up for ever
            raise WebConfigError(f"--web.config.file={source}: not a regular file")
        with open(path, "rb") as handle:
            raw = handle.read(1024 * 1024 + 1)
    except OSError as exc:
        raise WebConfigError(f"--web.config.file={source}: cannot read: {_describe(exc)}") from None
    if len(raw) > 1024 * 1024:
        raise WebConfigError(f"--web.config.file={source}: larger than 1 MiB")
    try:
        data = yaml.safe_load(raw.decode("utf-8-sig"))
    except (UnicodeDecodeError, yaml.YAMLError) as exc:
        raise WebConfigError(f"--web.config.file={source}: not valid YAML: {exc}") from None
    try:
        config = _parse(data or {}, Path(source).parent, source)
        if config.tls is not None:
            config.tls.context()
    except WebConfigError as exc:
        raise WebConfigError(f"--web.config.file={source}: {exc}") from None
    return config


def load_web_config_or_exit(program: str, path: str | None) -> WebConfig | None:
    """`load_web_config` for a command line: on error print it and exit 2; log its warnings."""
    try:
        config = load_web_config(path)
    except WebConfigError as exc:
        print(f"{program}: {exc}", file=sys.stderr)
        raise SystemExit(EXIT_CONFIG_ERROR) from None
    for warning in config.warnings if config else ():
        log.warning("--web.config.file=%s: %s", path, warning)
    return config


def _parse(data: Any, base: Path, source: str) -> WebConfig:
    _mapping(data, "the file", TOP_KEYS)
    tls_data = data.get("tls_server_config") or {}
    _mapping(tls_data, "tls_server_config", TLS_KEYS | set(IGNORED_TLS_KEYS))
    warnings = [
        f"tls_server_config.{key} is ignored: {why}"
        for key, why in IGNORED_TLS_KEYS.items()
        if key in tls_data
    ]
    http_data = data.get("http_server_config") or {}
    _mapping(http_data, "http_server_config", HTTP_KEYS)
    http2 = http_data.get("http2", False)
    if not isinstance(http2, bool):
        raise WebConfigError("http_server_config.http2 must be true or false")
    if http2:
        warnings.append(
            "http_server_config.http2 is ignored: this server speaks HTTP/1.1 only (as "
            "Prometheus scrapes)"
        )
    headers = http_data.get("headers") or {}
    if not isinstance(headers, dict) or not all(
        isinstance(k, str) and isinstance(v, str) and _header_safe(k + v)
        for k, v in headers.items()
    ):
        raise WebConfigError("http_server_config.headers must map header names to strings")
    users = data.get("basic_auth_users")
    try:
        checker = None if not users else BcryptUsers.from_mapping(users, "basic_auth_users")
    except BasicAuthError as exc:
        raise WebConfigError(str(exc)) from None
    return WebConfig(
        source=source,
        tls=_tls(tls_data, base) if tls_data else None,
        users=checker,
        headers=dict(headers),
        rate_limit=_rate_limit(data.get("rate_limit") or {}),
        warnings=tuple(warnings),
    )


def _rate_limit(data: Any) -> RateLimit | None:
    """`rate_limit: {burst: N, interval: 1s}`; no interval (or 0) means no limit, as in Go."""
    _mapping(data, "rate_limit", RATE_LIMIT_KEYS)
    interval = _go_duration(data.get("interval", 0))
    if interval == 0:
        return None
    burst = data.get("burst", 0)
    if not isinstance(burst, int) or isinstance(burst, bool) or burst < 1:
        raise WebConfigError(
            f"rate_limit.burst={burst!r} must be a whole number of at least 1 (with an interval, "
            "a burst of 0 would refuse every request)"
        )
    return RateLimit(burst, interval)


def _go_duration(value: Any) -> float:
    """Seconds in a Go duration as YAML gives it to exporter-toolkit: `1s`, `100ms`, `1m30s`, or
    a whole number of nanoseconds."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value / 1e9
    if isinstance(value, str) and _GO_DURATION.fullmatch(value.strip()):
        parts = re.findall(r"([0-9]*\.?[0-9]+)(ns|us|µs|ms|s|m|h)", value)
        return sum(float(number) * _GO_UNITS[unit] for number, unit in parts)
    if value == "0":
        return 0.0
    raise WebConfigError(
        f"rate_limit.interval={value!r} must be a Go duration, e.g. 1s, 100ms or 1m30s"
    )


def _tls(data: dict, base: Path) -> TLSFiles:
    def path(key: str) -> Path | None:
        value = _text(data, key)
        return None if not value else base / value

    cert_file, key_file, ca_file = path("cert_file"), path("key_file"), path("client_ca_file")
    cert_pem, key_pem, ca_pem = _text(data, "cert"), _text(data, "key"), _text(data, "client_ca")
    if not cert_file and not cert_pem:
        raise WebConfigError("tls_server_config: missing one of cert or cert_file")
    if not key_file and not key_pem:
        raise WebConfigError("tls_server_config: missing one of key or key_file")
    auth = _text(data, "client_auth_type") or ""
    if auth in UNVERIFIED_CLIENT_AUTH:
        raise WebConfigError(
            f"tls_server_config.client_auth_type={auth}: a client certificate that is not "
            "verified cannot be asked for with Python's ssl; use VerifyClientCertIfGiven or "
            "RequireAndVerifyClientCert with a client_ca_file"
        )
    if auth not in CLIENT_AUTH:
        raise WebConfigError(
            f"tls_server_config.client_auth_type={auth!r} is invalid; allowed: "
            + ", ".join(k for k in CLIENT_AUTH if k)
        )
    verify = CLIENT_AUTH[auth]
    if (ca_file or ca_pem) and verify == ssl.CERT_NONE:
        raise WebConfigError(
            "tls_server_config: client CA's have been configured without a Client Auth Policy "
            "(set client_auth_type: RequireAndVerifyClientCert)"
        )
    if verify != ssl.CERT_NONE and not (ca_file or ca_pem):
        raise WebConfigError(
            f"tls_server_config.client_auth_type={auth} needs client_ca_file to verify with"
        )
    return TLSFiles(
        cert_file=cert_file,
        key_file=key_file,
        cert_pem=None if cert_file else cert_pem,
        key_pem=None if key_file else key_pem,
        client_ca_file=ca_file,
        client_ca_pem=None if ca_file else ca_pem,
        verify_mode=verify,
        min_version=_version(data, "min_version", "TLS12"),
        max_version=_version(data, "max_version", "TLS13"),
        allowed_sans=_allowed_sans(data, verify),
    )


def _allowed_sans(data: dict, verify: ssl.VerifyMode) -> tuple[str, ...]:
    sans = data.get("client_allowed_sans") or []
    if not isinstance(sans, list) or not all(isinstance(s, str) and s for s in sans):
        raise WebConfigError("tls_server_config.client_allowed_sans must be a list of names")
    if sans and verify == ssl.CERT_NONE:
        raise WebConfigError(
            "tls_server_config.client_allowed_sans needs client certificates: set "
            "client_auth_type: RequireAndVerifyClientCert and client_ca_file"
        )
    return tuple(sans)


def san_allowed(peer_certificate: dict | None, allowed: tuple[str, ...]) -> bool:
    """Whether a verified client certificate (`SSLSocket.getpeercert()`) names one of `allowed`
    among its DNS, email, IP or URI subject alternative names, as exporter-toolkit checks it.
    No certificate is refused: the list is there to restrict who may connect."""
    if not peer_certificate:
        return False
    for kind, value in peer_certificate.get("subjectAltName", ()):
        if kind == "IP Address":
            try:
                address = ipaddress.ip_address(value.strip())
            except ValueError:
                continue
            if any(_same_ip(address, name) for name in allowed):
                return True
        elif kind in ("DNS", "email", "URI") and value in allowed:
            return True
    return False


def _same_ip(address: ipaddress.IPv4Address | ipaddress.IPv6Address, name: str) -> bool:
    try:
        return ipaddress.ip_address(name) == address
    except ValueError:
        return False


class ReloadingContext:
    """One SSLContext that swaps in a new one on the next handshake after the files changed."""

    def __init__(self, files: TLSFiles) -> None:
        self.files = files
        self._lock = threading.Lock()
        self._stamp = self._stamps()
        self._current = files.context()
        self.context = files.context()
        self.context.sni_callback = self._on_hello

    def _stamps(self) -> tuple:
        stamps: list[tuple[int, int, int] | None] = []
        for path in self.files.files():
            try:
                stat = path.stat()
                stamps.append((stat.st_mtime_ns, stat.st_size, stat.st_ino))
            except OSError:
                stamps.append(None)
        return tuple(stamps)

    def _on_hello(self, ssl_object, _server_name, _initial) -> None:
        with self._lock:
            stamp = self._stamps()
            if stamp != self._stamp:
                try:
                    self._current = self.files.context()
                    self._stamp = stamp
                except WebConfigError:
                    pass  # half-written files: keep serving the last good certificate
            ssl_object.context = self._current


def _load_chain(ctx: ssl.SSLContext, files: TLSFiles) -> None:
    if files.cert_file and files.key_file:
        ctx.load_cert_chain(files.cert_file, files.key_file)
        return
    # Inline PEM: ssl only loads chains from files, so use a private temporary directory.
    import tempfile

    with tempfile.TemporaryDirectory(prefix="kvq-tls-") as tmp:
        cert = files.cert_file or Path(tmp, "cert.pem")
        key = files.key_file or Path(tmp, "key.pem")
        if files.cert_pem:
            cert.write_text(files.cert_pem)
        if files.key_pem:
            fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as handle:
                handle.write(files.key_pem)
        ctx.load_cert_chain(cert, key)


def _mapping(data: Any, where: str, allowed: set[str]) -> None:
    if not isinstance(data, dict):
        raise WebConfigError(f"{where} must be a mapping, got {type(data).__name__}")
    unknown = sorted(str(k) for k in data if k not in allowed)
    if unknown:
        raise WebConfigError(
            f"unknown key(s) {', '.join(unknown)} in {where}; allowed: {', '.join(sorted(allowed))}"
        )


def _text(data: dict, key: str) -> str | None:
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        raise WebConfigError(f"tls_server_config.{key} must be a string")
    return value


def _version(data: dict, key: str, default: str) -> ssl.TLSVersion:
    name = _text(data, key) or default
    if name not in TLS_VERSIONS:
        raise WebConfigError(
            f"tls_server_config.{key}={name!r} is invalid; allowed: {', '.join(TLS_VERSIONS)}"
        )
    return TLS_VERSIONS[name]


def _header_safe(text: str) -> bool:
    return not any(c in text for c in "\r\n\0")


def _describe(exc: Exception) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.filename or ''}: {exc.strerror}".lstrip(": ")
    return str(exc)
