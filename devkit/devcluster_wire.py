"""Helpers for tests that talk to a devcluster below (or beside) the Kafka client libraries.

``exchange`` sends kafka-python request messages on one fresh connection, all at once (pipelined),
and returns the decoded responses in order, or raises ``ConnectionError`` when the broker closes
the connection instead of answering, as Kafka does for a request it cannot parse.
``WireConnection`` is one such connection driven a request at a time, with the time each answer
arrived (a throttled, muted channel holds the next one back).
``admin_send`` sends one request through a ``KafkaAdminClient``'s own connections (how to call
DescribeClientQuotas / AlterClientQuotas, which kafka-python's admin client has no method for).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Sequence

from kafka.protocol.api_header import RequestHeader
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.metadata import ApiVersionsResponse
from kafka.protocol.schemas.fields.codecs import Int32

from devcluster.protocol_codec import APIS, FRAME_SIZE_BYTES, frame_size
from kvq.kafka.admin_session import send_on


def admin_send(admin, request: ApiMessage, node_id: int | None = None) -> ApiMessage:
    """Send ``request`` with a kafka-python ``KafkaAdminClient`` to ``node_id`` (None: any
    broker); the version is negotiated unless the request carries one. Raises what kafka-python
    raises (``KafkaConnectionError``, ``KafkaTimeoutError``...)."""
    return send_on(admin, request, node_id)


def exchange(
    address: str | tuple[str, int],
    requests: Sequence[ApiMessage],
    timeout: float = 10.0,
    client_id: str = "kvq-devcluster-test",
) -> list[ApiMessage]:
    """Every request must carry its version (``Request(version=v, ...)``)."""
    with WireConnection(address, timeout, client_id) as connection:
        for request in requests:
            connection.send(request)
        return [connection.receive()[0] for _ in requests]


class WireConnection:
    """One raw connection: requests sent when asked (pipelined if several are sent before their
    answers are read), responses read in order with the monotonic time each arrived: how long a
    muted (throttled) channel held the next answer back."""

    def __init__(
        self,
        address: str | tuple[str, int],
        timeout: float = 10.0,
        client_id: str = "kvq-devcluster-test",
    ):
        self.client_id = client_id
        self._sock = _connect(address, timeout)
        self._sent: list[tuple[int, ApiMessage]] = []
        self._next_id = 1

    def send(self, request: ApiMessage) -> int:
        """Send one request (it must carry its version); returns its size as a broker counts it
        for a quota: the frame without its 4-byte size."""
        correlation_id = self._next_id
        self._next_id += 1
        request.with_header(correlation_id=correlation_id, client_id=self.client_id)
        frame = bytes(request.encode(header=True, framed=True))
        self._sock.sendall(frame)
        self._sent.append((correlation_id, request))
        return len(frame) - FRAME_SIZE_BYTES

    def receive(self) -> tuple[ApiMessage, float]:
        """The answer to the oldest request not yet answered, and when it arrived."""
        correlation_id, request = self._sent.pop(0)
        payload = read_frame(self._sock)
        arrived = time.monotonic()
        response_class = APIS[request.API_KEY].response
        # ApiVersionsResponse.decode reads a v0 body when the error is UNSUPPORTED_VERSION.
        response = response_class.decode(payload, version=request.API_VERSION, header=True)
        if response.header.correlation_id != correlation_id:
            raise AssertionError(
                f"response {response.header.correlation_id} answers request {correlation_id}"
            )
        return response, arrived

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> WireConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def api_versions_of_unknown_version(
    address: str | tuple[str, int], version: int, correlation_id: int = 99
) -> ApiVersionsResponse:
    """Send an ApiVersions request of a version nobody knows yet (a header, no body) and decode
    the answer as a client must: header v0, body v0."""
    header = RequestHeader(
        request_api_key=18,
        request_api_version=version,
        correlation_id=correlation_id,
        client_id="future-client",
    )
    payload = bytes(header.encode(flexible=True))
    with _connect(address, 10.0) as sock:
        sock.sendall(bytes(Int32.encode(len(payload))) + payload)
        return ApiVersionsResponse.decode(read_frame(sock), version=0, header=True)


def read_frame(sock: socket.socket) -> bytes:
    return _read(sock, frame_size(_read(sock, FRAME_SIZE_BYTES)))


def _connect(address: str | tuple[str, int], timeout: float) -> socket.socket:
    if isinstance(address, str):
        host, _, port = address.rpartition(":")
        address = (host, int(port))
    return socket.create_connection(address, timeout=timeout)


def _read(sock: socket.socket, n: int) -> bytes:
    chunks = []
    while n:
        chunk = sock.recv(n)
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


__all__ = ["admin_send", "api_versions_of_unknown_version", "exchange", "read_frame"]
