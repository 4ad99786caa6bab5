"""A TCP proxy on loopback that a test can cut, the network between one client and Kafka.

    with TcpProxy({9101: 9001, 9102: 9002}) as proxy:   # listen port -> the broker's port
        proxy.cut_at_request(ALTER_CLIENT_QUOTAS, 2)    # the client's 2nd such request: cut
        ...
        proxy.heal()                                    # forward again

Brokers advertise their own addresses, so one proxy port per broker: the cluster's `PROXIED`
listener advertises these ports (KafkaCluster(proxied=True), `proxy_routes`), and a client that
bootstraps there makes every connection (metadata, coordinators, produce, admin requests)
through the proxy.

`cut()` is a cable pulled out, not a refusal: connections stay open and new ones are accepted,
but nothing is read or written on either side, so nothing tells the client until its own
timeouts fire. `heal()` forwards again, with TCP's semantics for what was sent meanwhile: a
client whose connection is still open gets its bytes delivered (its kernel would have kept
retransmitting them); one that closed its connection normally (FIN) too (an orphaned socket
retransmits its unacknowledged data until the peer acknowledges it); one that reset it (RST, as a
socket closed with SO_LINGER 0 does, after a shutdown too) loses them, as its kernel drops what
was not acknowledged: the proxy drops every byte it held or the client sent during the cut.
On loopback every byte is acknowledged at once, so the proxy plays the cut network's part.
`refuse()` is the easy case: every connection reset, new ones refused, until `heal()`.

`cut_at_request(api_key, n)` cuts at a Kafka request: when a client sends its `n`th request with
that API key (counted over every connection from now on), the proxy forwards what came before it
and holds the request itself: a request the client has sent and that is on its way when the
network fails. With `after=(api_key0, m)` the count starts at the `m`th request with `api_key0`;
with `answer=True` the request reaches the broker and its answer is held: the broker acted on it,
the client learns so only once the network is back.
"""

from __future__ import annotations

import contextlib
import logging
import selectors
import socket
import struct
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

CHUNK = 256 * 1024
RESET = struct.pack("ii", 1, 0)
"""SO_LINGER on, 0 s: close() sends an RST."""


@dataclass(eq=False)
class _Link:
    """One client connection and its connection to the broker."""

    client: socket.socket
    upstream: socket.socket
    to_upstream: bytearray = field(default_factory=bytearray)
    to_client: bytearray = field(default_factory=bytearray)
    client_eof: bool = False
    frame_left: int = 0
    """Bytes of the client's current Kafka request not seen yet (0: a new one starts)."""
    header: bytearray = field(default_factory=bytearray)
    """The first bytes of the request starting now (size, API key)."""


@dataclass
class _Trigger:
    """Cut at the last of `steps` ((API key, n): the nth request with that key, counted from
    the step before)."""

    steps: list[tuple[int, int]]
    answer: bool
    seen: int = 0

    def fired_by(self, api_key: int) -> bool:
        """Count a request; True when it is the one to cut at."""
        if not self.steps or api_key != self.steps[0][0]:
            return False
        self.seen += 1
        if self.seen < self.steps[0][1]:
            return False
        self.steps.pop(0)
        self.seen = 0
        return not self.steps


class TcpProxy:
    """Forwards each listen port on `host` to its target port on `host`; see the module
    docstring. One thread; every method may be called from any thread."""

    def __init__(self, routes: Mapping[int, int], host: str = "127.0.0.1") -> None:
        self.routes = dict(routes)
        self.host = host
        self._selector = selectors.DefaultSelector()
        self._lock = threading.Lock()
        self._listeners: dict[socket.socket, int] = {}
        self._links: list[_Link] = []
        self._mode = "forward"
        self._trigger: _Trigger | None = None
        self.requests: dict[int, int] = {}
        """API key -> requests clients sent since the last `cut_at_request` (or the start)."""
        self._cut_delivers = False
        """Whether the request the trigger cut at goes to the broker (its answer held)."""
        self.cut_event = threading.Event()
        """Set when the proxy cuts (by `cut()` or at the request `cut_at_request` named)."""
        self._wake_r, self._wake_w = socket.socketpair()
        self._stop = False
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None
        """What stopped the proxy's thread (`check` raises it)."""

    # ---- what tests call ------------------------------------------------------------------

    def start(self) -> TcpProxy:
        self._listen()
        self._selector.register(self._wake_r, selectors.EVENT_READ)
        self._thread = threading.Thread(target=self._run, name="tcp-proxy", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Close every connection and listening socket; the thread ends."""
        with self._lock:
            self._stop = True
        self._wake()
        if self._thread is not None:
            self._thread.join(10)
        for link in list(self._links):
            self._close(link)
        for listener in list(self._listeners):
            listener.close()
        self._listeners.clear()
        self._selector.close()
        self._wake_r.close()
        self._wake_w.close()

    def __enter__(self) -> TcpProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def check(self) -> None:
        """Raise if the proxy's thread has stopped (it forwards nothing then)."""
        if self.error is not None:
            raise RuntimeError(f"the TCP proxy stopped: {self.error!r}") from self.error
        if self._thread is None or not self._thread.is_alive():
            raise RuntimeError("the TCP proxy is not running")

    def cut(self) -> None:
        """Stop forwarding in both directions; connections stay open, new ones are accepted."""
        self._set_mode("cut")

    def refuse(self) -> None:
        """Reset every connection and refuse new ones."""
        self._set_mode("refuse")

    def heal(self) -> None:
        """Forward again (see the module docstring for what was sent meanwhile)."""
        self._set_mode("forward")

    def cut_at_request(
        self, api_key: int, nth: int, after: tuple[int, int] | None = None, answer: bool = False
    ) -> None:
        """Cut when clients have sent their `nth` request with `api_key` from now on (from the
        `after` = (API key, n)th request on, if given), holding that request; with `answer` the
        request goes to the broker and its answer is held. `requests` counts from now on."""
        with self._lock:
            self.requests.clear()
            steps = [after] if after is not None else []
            self._trigger = _Trigger([*steps, (api_key, nth)], answer)
        self.cut_event.clear()

    @property
    def mode(self) -> str:
        return self._mode

    # ---- the loop -------------------------------------------------------------------------

    def _set_mode(self, mode: str) -> None:
        with self._lock:
            self._mode = mode
            self._trigger = None
        if mode != "forward":
            self.cut_event.set()
        self._wake()

    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")

    def _listen(self) -> None:
        for port in self.routes:
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind((self.host, port))
            listener.listen(64)
            listener.setblocking(False)
            self._listeners[listener] = port

    def _run(self) -> None:
        try:
            self._loop()
        except BaseException as exc:
            self.error = exc
            log.exception("the TCP proxy stopped forwarding")
            raise

    def _loop(self) -> None:
        applied = "forward"
        while True:
            with self._lock:
                if self._stop:
                    return
                mode = self._mode
            if mode != applied:
                self._apply(applied, mode)
                applied = mode
            self._register(mode)
            for key, events in self._selector.select(timeout=1.0):
                if key.fileobj is self._wake_r:
                    with contextlib.suppress(OSError):
                        self._wake_r.recv(4096)
                elif key.fileobj in self._listeners:
                    self._accept(key.fileobj)  # type: ignore[arg-type]
                elif self._mode == "forward":
                    self._pump(key.data, key.fileobj, events)  # type: ignore[arg-type]

    def _apply(self, before: str, mode: str) -> None:
        if mode == "refuse":
            for link in list(self._links):
                self._close(link, reset=True)
            for listener in list(self._listeners):
                with contextlib.suppress(KeyError):
                    self._selector.unregister(listener)
                listener.close()
            self._listeners.clear()
        elif before == "refuse":
            self._listen()
        elif mode == "forward" and before == "cut":
            for link in list(self._links):
                self._resume(link)

    def _resume(self, link: _Link) -> None:
        """After a cut: what the client sent meanwhile (and a request held at the cut) was never
        acknowledged, as on a cut cable; a client that reset its connection meanwhile loses it
        (its kernel stops retransmitting), else it goes out now."""
        sent = bytearray()
        while True:
            try:
                data = link.client.recv(CHUNK)
            except BlockingIOError:
                break
            except OSError:  # Linux hands out the data it has, then the reset
                self._close(link, reset=True)
                return
            if not data:
                if link.client.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                    self._close(link, reset=True)  # a FIN, then an RST: the close reset it
                    return
                link.client_eof = True
                break
            sent += data
        self._scan(link, bytes(sent))
        link.to_upstream += sent
        if link.client_eof and not link.to_upstream:
            self._close(link)

    def _register(self, mode: str) -> None:
        """What the selector waits for: listeners and the wake-up always; links only while
        forwarding (a cut reads and writes nothing)."""
        wanted: dict[socket.socket, tuple[int, _Link | None]] = {
            self._wake_r: (selectors.EVENT_READ, None),
            **{listener: (selectors.EVENT_READ, None) for listener in self._listeners},
        }
        if mode == "forward":
            for link in self._links:
                reading = not link.client_eof and len(link.to_upstream) < CHUNK
                client = selectors.EVENT_READ if reading else 0
                if link.to_client:
                    client |= selectors.EVENT_WRITE
                upstream = selectors.EVENT_READ if len(link.to_client) < CHUNK else 0
                if link.to_upstream:
                    upstream |= selectors.EVENT_WRITE
                if client:
                    wanted[link.client] = (client, link)
                if upstream:
                    wanted[link.upstream] = (upstream, link)
        for key in list(self._selector.get_map().values()):
            sock = key.fileobj
            if sock not in wanted:
                self._selector.unregister(sock)
        for sock, (events, data) in wanted.items():
            try:
                key = self._selector.get_key(sock)
            except KeyError:
                self._selector.register(sock, events, data)
                continue
            if key.events != events:
                self._selector.modify(sock, events, data)

    def _accept(self, listener: socket.socket) -> None:
        try:
            client, _ = listener.accept()
        except BlockingIOError:
            return
        try:
            upstream = socket.create_connection((self.host, self.routes[self._listeners[listener]]))
        except OSError:
            _reset(client)
            return
        for sock in (client, upstream):
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._links.append(_Link(client, upstream))

    def _pump(self, link: _Link, sock: socket.socket, events: int) -> None:
        if link not in self._links:
            return
        try:
            if events & selectors.EVENT_READ:
                self._read(link, sock)
            if self._mode == "forward" and link in self._links and events & selectors.EVENT_WRITE:
                self._write(link, sock)
        except OSError:
            self._close(link, reset=True)

    def _read(self, link: _Link, sock: socket.socket) -> None:
        try:
            data = sock.recv(CHUNK)
        except BlockingIOError:
            return
        if sock is link.upstream:
            if not data:
                self._close(link)
                return
            link.to_client += data
            return
        if not data:
            link.client_eof = True
            if not link.to_upstream:
                self._close(link)
            return
        cut = self._scan(link, data)
        if cut is None:
            link.to_upstream += data
            return
        start, end = cut
        cut_at = min(end, len(data)) if self._cut_delivers else start
        link.to_upstream += data[:cut_at]
        self._flush(link)
        link.to_upstream += data[cut_at:]  # held: delivered after the cut unless reset
        with self._lock:
            self._mode = "cut"
            self._trigger = None
        self.cut_event.set()

    def _flush(self, link: _Link) -> None:
        """Send what is due to the broker now, blocking briefly (the cut starts right after)."""
        link.upstream.setblocking(True)
        try:
            link.upstream.sendall(bytes(link.to_upstream))
        finally:
            link.upstream.setblocking(False)
        link.to_upstream.clear()

    def _scan(self, link: _Link, data: bytes) -> tuple[int, int] | None:
        """Follow the client's Kafka requests (4-byte size, then the 2-byte API key) through
        `data`; where in `data` the request to cut at starts and ends (its end may lie beyond),
        else None."""
        index, cut = 0, None
        while index < len(data):
            if link.frame_left:
                step = min(link.frame_left, len(data) - index)
                link.frame_left -= step
                index += step
                continue
            start = index - len(link.header)
            take = data[index : index + 6 - len(link.header)]
            link.header += take
            index += len(take)
            if len(link.header) < 6:
                break
            size, api_key = struct.unpack(">ih", bytes(link.header))
            link.header.clear()
            link.frame_left = max(size - 2, 0)
            if self._counted(api_key) and cut is None:
                cut = (max(start, 0), index + link.frame_left)
        return cut

    def _counted(self, api_key: int) -> bool:
        with self._lock:
            self.requests[api_key] = self.requests.get(api_key, 0) + 1
            trigger = self._trigger
            if trigger is None or not trigger.fired_by(api_key):
                return False
            self._cut_delivers = trigger.answer
            return True

    def _write(self, link: _Link, sock: socket.socket) -> None:
        buffer = link.to_client if sock is link.client else link.to_upstream
        try:
            sent = sock.send(buffer)
        except BlockingIOError:
            return
        del buffer[:sent]
        if link.client_eof and not link.to_upstream:
            self._close(link)

    def _close(self, link: _Link, reset: bool = False) -> None:
        if link in self._links:
            self._links.remove(link)
        for sock in (link.client, link.upstream):
            with contextlib.suppress(KeyError, ValueError, OSError):
                self._selector.unregister(sock)
            if reset:
                _reset(sock)
            else:
                sock.close()


def _reset(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, RESET)
    sock.close()
