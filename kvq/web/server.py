"""The HTTP/1.1 server of the exporter and the enforcer: bounded, timed out, TLS, basic auth.

One asyncio event loop (one thread) holds every connection, so an idle or slow connection costs a
few kilobytes, never a thread; the handlers run on a small thread pool. Each connection has a
deadline for every phase: `idle_timeout` to start a request, `read_timeout` to send its head and
body, `write_timeout` to take the answer. At `max_connections` the connection that has been
waiting longest without a request in progress is closed to make room, so no number of idle
connections can keep a valid request out.

Basic auth's remembered passwords are answered on the loop; a password that needs a bcrypt round
waits in a bounded queue, fair between client addresses (`check_queue.py`): past
`max_pending_auth_checks` pending, or `max_auth_checks_per_address` from one address, a request
gets 429 at once, and a check whose client closed its connection is dropped before it runs.

A request's route, method, credentials and Content-Length are checked from its head alone: a
401, 405 or 413 is answered before a byte of the body is read, and a body is read (into memory,
never spooled) only up to its route's `max_body`. Transfer-Encoding is refused (411): every
client that talks to us (Prometheus, Alertmanager, kubelet probes) sends Content-Length.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import resource
import socket
import ssl
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from email.utils import formatdate
from http import HTTPStatus
from typing import Any, Protocol

from kvq.web.check_queue import CheckQueue, QueueFull
from kvq.web.gzip_cache import MIN_SIZE, GzipCache, accepts_gzip, gzip_member
from kvq.web.landing_page import landing_page
from kvq.web.web_config import WebConfig, san_allowed

log = logging.getLogger("kvq.web")

LINGER_SECONDS = 1.0
STOP_GRACE_SECONDS = 10.0
LINGER_BYTES = 256 * 1024
DROP_REASONS = (
    "idle_timeout",
    "read_timeout",
    "write_timeout",
    "evicted",
    "full",
    "auth_queue_full",
    "auth_client_gone",
)
"""Why the server closed a connection (`kafka_volume_quota_http_connections_dropped_total`)."""
_TOKEN = re.compile(rb"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
_BAD_VALUE = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")


class Authorizer(Protocol):
    """Something that accepts or refuses an Authorization header."""

    @property
    def schemes(self) -> Sequence[str]: ...

    def allows(self, header: str | None) -> bool: ...


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    path: str
    query: str
    headers: Mapping[str, str]
    """Lower-case names; repeated headers joined with ", "."""
    body: bytes
    peer: str
    """The client's address without the port ("127.0.0.1", "::1")."""


@dataclass(slots=True)
class Response:
    status: int
    body: bytes = b""
    content_type: str = "text/plain; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)
    compressible: bool = False
    """gzip it when the client asks (large texts such as /metrics)."""
    tail: bytes = b""
    """Appended to `body`: a small part that changes on every request, compressed on its own
    (a gzip stream may hold several members) so the cached gzip of `body` stays valid."""

    @classmethod
    def json(cls, status: int, document: Any, **headers: str) -> Response:
        body = json.dumps(document, indent=2, ensure_ascii=True).encode() + b"\n"
        return cls(status, body, "application/json", dict(headers))

    @classmethod
    def error(cls, status: int, message: str) -> Response:
        return cls.json(status, {"error": message})


@dataclass(frozen=True)
class Route:
    path: str
    handler: Callable[[Request], Response]
    title: str
    """One line for the landing page."""
    methods: tuple[str, ...] = ("GET",)
    credentials: Authorizer | None = None
    """Route-specific credentials (the enforcer's webhook token), besides the web config's."""
    max_body: int = 0
    on_rejected: Callable[[int], None] | None = None
    """Told the status of every answer the server gives before the handler runs."""


@dataclass(frozen=True)
class ConnectionLimits:
    """How many connections the server holds and how long each phase of one may take (HTTP
    limits; not to be confused with kvq.model's `Limit`, a volume's free-space limit)."""

    max_connections: int = 1000
    idle_timeout: float = 60.0
    read_timeout: float = 10.0
    write_timeout: float = 60.0
    handshake_timeout: float = 10.0
    max_head_bytes: int = 16 * 1024
    max_headers: int = 100
    max_pending_auth_checks: int = 16
    """bcrypt checks waiting or running at once; more are answered 429 without a check."""
    max_auth_checks_per_address: int = 2
    """Of those, from one client address (the others keep their places)."""


class HTTPError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(eq=False)
class _Connection:
    writer: asyncio.StreamWriter
    peer: str
    busy: bool = False
    since: float = field(default_factory=time.monotonic)


@dataclass(frozen=True)
class _Head:
    method: str
    target: str
    version: str
    headers: dict[str, str]

    @property
    def keep_alive(self) -> bool:
        tokens = {t.strip().lower() for t in self.headers.get("connection", "").split(",")}
        return self.version == "HTTP/1.1" and "close" not in tokens


class WebServer:
    """`start()` binds and serves in a thread of its own; `stop()` closes everything."""

    def __init__(
        self,
        name: str,
        description: str,
        address: tuple[str, int],
        routes: Sequence[Route],
        web_config: WebConfig | None = None,
        limits: ConnectionLimits | None = None,
        threads: int = 4,
    ) -> None:
        self.name = name
        self.address = address
        self.limits = limits or ConnectionLimits()
        self.web_config = web_config
        self.routes = {route.path: route for route in routes}
        if "/" not in self.routes:
            page = landing_page(
                name, description, [(r.methods[0], r.path, r.title) for r in routes]
            )
            self.routes["/"] = Route(
                "/", lambda _r: Response(200, page, "text/html; charset=utf-8"), "this page"
            )
        self.threads = threads
        self.gzip = GzipCache()
        self.dropped: dict[str, int] = dict.fromkeys(DROP_REASONS, 0)
        self._users = web_config.users if web_config else None
        self._extra_headers = dict(web_config.headers) if web_config else {}
        limit = web_config.rate_limit if web_config else None
        self._rate_limit = limit.bucket() if limit else None
        self._allowed_sans = web_config.tls.allowed_sans if web_config and web_config.tls else ()
        self._connections: dict[_Connection, None] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._auth_pool: ThreadPoolExecutor | None = None
        self.auth_checks: CheckQueue | None = None
        """The bcrypt checks pending (None before `start()`)."""
        self.bound: tuple[str, int] | None = None

    @property
    def url(self) -> str:
        host, port = self.bound or self.address
        scheme = self.web_config.scheme if self.web_config else "http"
        return f"{scheme}://{f'[{host}]' if ':' in host else host}:{port}"

    @property
    def open_connections(self) -> int:
        return len(self._connections)

    def start(self) -> WebServer:
        """Bind (OSError if the address is taken) and serve in a daemon thread."""
        _raise_open_file_limit()
        ssl_context = self.web_config.ssl_context() if self.web_config else None
        sock = _bind(self.address)
        self.bound = sock.getsockname()[:2]
        self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix=f"{self.name}-worker")
        self._auth_pool = ThreadPoolExecutor(1, thread_name_prefix=f"{self.name}-auth")
        self.auth_checks = CheckQueue(
            self._auth_pool,
            self.limits.max_pending_auth_checks,
            self.limits.max_auth_checks_per_address,
        )
        ready = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(sock, ssl_context, ready), name=f"{self.name}-http", daemon=True
        )
        self._thread.start()
        ready.wait()
        return self

    def stop(self) -> None:
        """Stop accepting, close every connection, let running handlers finish."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(loop.stop)
        thread.join()
        self._loop = self._thread = None

    # --- event loop -------------------------------------------------------------------------

    def _run(self, sock: socket.socket, ssl_context, ready: threading.Event) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        server = loop.run_until_complete(
            asyncio.start_server(
                self._serve_connection,
                sock=sock,
                ssl=ssl_context,
                ssl_handshake_timeout=self.limits.handshake_timeout if ssl_context else None,
                limit=self.limits.max_head_bytes,
            )
        )
        ready.set()
        try:
            loop.run_forever()
        finally:
            server.close()
            for connection in list(self._connections):
                connection.writer.transport.abort()
            tasks = asyncio.all_tasks(loop)
            if tasks:  # aborted connections end at once; running handlers get time to finish
                loop.run_until_complete(asyncio.wait(tasks, timeout=STOP_GRACE_SECONDS))
            loop.set_exception_handler(lambda _loop, _context: None)
            for task in tasks:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            for pool in (self._pool, self._auth_pool):  # both set by start()
                if pool is not None:
                    pool.shutdown(wait=True)
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    async def _serve_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        peer = writer.get_extra_info("peername")
        if self._allowed_sans and not san_allowed(
            writer.get_extra_info("peercert"), self._allowed_sans
        ):
            log.debug("closed a TLS connection from %s: no allowed client SAN", peer)
            writer.transport.abort()
            return
        connection = _Connection(writer, str(peer[0]) if peer else "")
        self._connections[connection] = None
        self._make_room(connection)
        try:
            while await self._one_request(connection, reader, writer):
                pass
            writer.close()  # graceful: what is buffered goes out, TLS sends close_notify
        except (ConnectionError, ssl.SSLError, OSError, asyncio.IncompleteReadError):
            writer.transport.abort()
        except Exception:
            log.exception("HTTP connection from %s failed", connection.peer)
            writer.transport.abort()
        finally:
            self._connections.pop(connection, None)

    def _make_room(self, newcomer: _Connection) -> None:
        while len(self._connections) > self.limits.max_connections:
            idle = [c for c in self._connections if not c.busy and c is not newcomer]
            if not idle:
                self.dropped["full"] += 1
                newcomer.writer.transport.abort()
                return
            oldest = min(idle, key=lambda c: c.since)
            self._connections.pop(oldest, None)
            self.dropped["evicted"] += 1
            oldest.writer.transport.abort()

    async def _one_request(
        self,
        connection: _Connection,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> bool:
        """Serve one request; True to keep the connection for the next one."""
        connection.busy = False
        connection.since = time.monotonic()
        try:
            first = await asyncio.wait_for(reader.readexactly(1), self.limits.idle_timeout)
        except TimeoutError:
            self.dropped["idle_timeout"] += 1
            return False
        deadline = asyncio.get_running_loop().time() + self.limits.read_timeout
        route: Route | None = None
        head: _Head | None = None
        try:
            try:
                rest = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), self._left(deadline))
            except asyncio.LimitOverrunError:
                raise HTTPError(431, "request head too large") from None
            head = self._parse_head(first + rest)
            path, _, query = head.target.partition("?")
            route = self.routes.get(path)
            admitted, length = await self._admit(head, route, connection, reader)
            if length and head.headers.get("expect", "").lower() == "100-continue":
                writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            body = (
                await asyncio.wait_for(reader.readexactly(length), self._left(deadline))
                if length
                else b""
            )
        except TimeoutError:
            self.dropped["read_timeout"] += 1
            if route is not None and route.on_rejected is not None:
                route.on_rejected(408)
            await self._send(writer, Response.error(408, "request not received in time"), False)
            return False
        except HTTPError as exc:
            if route is not None and route.on_rejected is not None:
                route.on_rejected(exc.status)
            response = Response.error(exc.status, exc.message)
            if exc.status == 429:
                response.headers["Retry-After"] = "1"
            if exc.status == 401:
                response.headers["WWW-Authenticate"] = self._challenge(route)
            if exc.status == 405 and route is not None:
                response.headers["Allow"] = ", ".join(_allowed(route))
            # Whatever body may follow is unread: the connection cannot carry another request.
            await self._send(writer, response, False)
            if head is not None and head.headers.get("content-length", "0") != "0":
                await self._discard_some(reader, writer)
            return False
        connection.busy = True
        request = Request(head.method, path, query, head.headers, body, connection.peer)
        gzip_ok = head.method == "GET" and accepts_gzip(head.headers.get("accept-encoding"))
        loop = asyncio.get_running_loop()
        response = await loop.run_in_executor(self._pool, self._respond, admitted, request, gzip_ok)
        keep = head.keep_alive
        await self._send(writer, response, keep, head_only=head.method == "HEAD")
        return keep

    async def _admit(
        self,
        head: _Head,
        route: Route | None,
        connection: _Connection,
        reader: asyncio.StreamReader,
    ) -> tuple[Route, int]:
        """Route, method, credentials and size from the head; the route and the body length to
        read."""
        if self._rate_limit is not None and not self._rate_limit.allow():
            raise HTTPError(429, "rate limit exceeded (rate_limit of --web.config.file)")
        if route is None:
            raise HTTPError(404, f"not found; endpoints: {', '.join(sorted(self.routes))}")
        if head.method not in _allowed(route):
            raise HTTPError(405, f"method {head.method} not allowed on {route.path}")
        if "transfer-encoding" in head.headers:
            raise HTTPError(411, "send the body with a Content-Length (no Transfer-Encoding)")
        length = _content_length(head.headers.get("content-length"))
        if not await self._authorized(route, head.headers.get("authorization"), connection, reader):
            raise HTTPError(401, "missing or wrong credentials")
        if length > route.max_body:
            raise HTTPError(413, f"body of {length} bytes over the limit of {route.max_body}")
        expect = head.headers.get("expect")
        if expect is not None and expect.lower() != "100-continue":
            raise HTTPError(417, f"unsupported Expect: {expect[:40]!r}")
        return route, length

    async def _authorized(
        self,
        route: Route,
        header: str | None,
        connection: _Connection,
        reader: asyncio.StreamReader,
    ) -> bool:
        if route.credentials is None and self._users is None:
            return True
        if route.credentials is not None and route.credentials.allows(header):
            return True
        if self._users is None or not header:
            return False
        users = self._users
        known = users.remembered(header)  # a dictionary look-up: never waits behind bcrypt
        if known is not None:
            return known
        # bcrypt takes 50-500 ms: off the loop, on a thread of its own so a flood of wrong
        # passwords cannot occupy the workers that answer webhooks with a valid token, and
        # through a bounded queue so it cannot pile up work either.
        assert self.auth_checks is not None
        try:
            answer = await self.auth_checks.run(
                connection.peer,
                lambda: users.check(header),
                lambda: reader.at_eof() or connection.writer.transport.is_closing(),
            )
        except QueueFull:
            self.dropped["auth_queue_full"] += 1
            raise HTTPError(429, "too many password checks pending; retry later") from None
        if answer is None:
            self.dropped["auth_client_gone"] += 1
            raise ConnectionResetError("the client left before its password was checked")
        return answer

    def _challenge(self, route: Route | None) -> str:
        schemes: list[str] = []
        if route is not None and route.credentials is not None:
            schemes += route.credentials.schemes
        if self._users is not None:
            schemes.append("Basic")
        return ", ".join(f'{s} realm="{self.name}"' for s in dict.fromkeys(schemes))

    def _respond(self, route: Route, request: Request, gzip_ok: bool) -> Response:
        """Run the handler (on a worker thread) and gzip its answer when asked."""
        try:
            response = route.handler(request)
        except Exception:
            log.exception("%s %s failed", request.method, route.path)
            return Response.error(500, "internal error; see the server's log")
        if response.compressible:
            response.headers["Vary"] = "Accept-Encoding"
            if gzip_ok and len(response.body) + len(response.tail) >= MIN_SIZE:
                response.body = self.gzip.compress(route.path, response.body)
                response.tail = gzip_member(response.tail) if response.tail else b""
                response.headers["Content-Encoding"] = "gzip"
        if response.tail:
            response.body += response.tail
            response.tail = b""
        return response

    async def _send(
        self, writer: asyncio.StreamWriter, response: Response, keep: bool, head_only=False
    ) -> None:
        reason = _reason(response.status)
        lines = [
            f"HTTP/1.1 {response.status} {reason}",
            f"Content-Type: {response.content_type}",
            f"Content-Length: {len(response.body)}",
            f"Date: {formatdate(usegmt=True)}",
            *(f"{k}: {v}" for k, v in {**self._extra_headers, **response.headers}.items()),
        ]
        if not keep:
            lines.append("Connection: close")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        # One write: a head and a body in two small segments wait out the client's delayed ACK.
        writer.write(head if head_only or not response.body else head + response.body)
        try:
            await asyncio.wait_for(writer.drain(), self.limits.write_timeout)
        except TimeoutError:
            self.dropped["write_timeout"] += 1
            writer.transport.abort()

    async def _discard_some(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        """Read (and drop) a little of an unwanted body before closing.

        Closing a socket with unread data resets it, and a reset can destroy the answer just
        sent before the client reads it; a client still sending a small body gets to read it.
        """
        deadline = asyncio.get_running_loop().time() + LINGER_SECONDS
        left = LINGER_BYTES
        with contextlib.suppress(TimeoutError, ConnectionError, OSError, ssl.SSLError):
            if writer.can_write_eof():
                writer.write_eof()  # the client sees the end and closes its side
            while left > 0:
                chunk = await asyncio.wait_for(reader.read(min(left, 65536)), self._left(deadline))
                if not chunk:
                    return
                left -= len(chunk)

    def _parse_head(self, raw: bytes) -> _Head:
        lines = raw[:-4].split(b"\r\n")
        parts = lines[0].split(b" ")
        if len(parts) != 3 or not _TOKEN.match(parts[0]) or not parts[1]:
            raise HTTPError(400, "malformed request line")
        method, target, version = (p.decode("latin-1") for p in parts)
        if version not in ("HTTP/1.1", "HTTP/1.0"):
            raise HTTPError(505, f"HTTP version not supported: {version[:20]!r}")
        if not target.startswith("/") or _BAD_VALUE.search(parts[1]) or b" " in parts[1]:
            raise HTTPError(400, "request target must be a path starting with /")
        if len(lines) - 1 > self.limits.max_headers:
            raise HTTPError(431, f"more than {self.limits.max_headers} header lines")
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(b":")
            if not sep or not _TOKEN.match(name):
                raise HTTPError(400, "malformed header line")
            value = value.strip(b" \t")
            if _BAD_VALUE.search(value):
                raise HTTPError(400, "control character in a header value")
            key = name.decode("ascii").lower()
            text = value.decode("latin-1")
            if key == "content-length" and key in headers and headers[key] != text:
                raise HTTPError(400, "conflicting Content-Length headers")
            if key in headers and key != "content-length":
                text = f"{headers[key]}, {text}"
            headers[key] = text
        return _Head(method, target, version, headers)

    @staticmethod
    def _left(deadline: float) -> float:
        return max(0.0, deadline - asyncio.get_running_loop().time())


def _allowed(route: Route) -> tuple[str, ...]:
    return (*route.methods, "HEAD") if "GET" in route.methods else route.methods


def _content_length(value: str | None) -> int:
    if value is None:
        return 0
    if not value.isascii() or not value.isdigit() or len(value) > 18:
        raise HTTPError(400, f"Content-Length must be a whole number, got {value[:20]!r}")
    return int(value)


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"


def _bind(address: tuple[str, int]) -> socket.socket:
    host, port = address
    if not host:  # `:PORT`: every interface, IPv6 and IPv4 where the system has both (as Go)
        if socket.has_dualstack_ipv6():
            with contextlib.suppress(OSError):
                return socket.create_server(
                    ("", port), family=socket.AF_INET6, backlog=1024, dualstack_ipv6=True
                )
        return socket.create_server(("", port), family=socket.AF_INET, backlog=1024)
    family = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM)[0][0]
    return socket.create_server((host, port), family=family, backlog=1024)


def _raise_open_file_limit() -> None:
    """Every connection is a file descriptor: use the hard limit, as Go programs do."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
