"""Kafka framing: requests decoded and responses encoded with kafka-python's own protocol classes.

A frame is a 4-byte big-endian size and a payload; a request payload is a request header (v1, or v2
when the API version is flexible) and the body. Nothing here writes protocol bytes by hand.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field

from kafka.protocol.admin import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
)
from kafka.protocol.api_header import RequestHeader
from kafka.protocol.api_key import ApiKey
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.metadata import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    MetadataRequest,
    MetadataResponse,
)
from kafka.protocol.producer import (
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProduceRequest,
    ProduceResponse,
)
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from kafka.protocol.schemas.fields.codecs import Int32

from .sasl import PLAINTEXT, Session

MAX_FRAME_BYTES = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes default
FRAME_SIZE_BYTES = Int32.size


@dataclass(frozen=True)
class Api:
    request: type[ApiMessage]
    response: type[ApiMessage]
    min_version: int
    max_version: int

    @property
    def name(self) -> str:
        return self.request.name.removesuffix("Request")


# What a devcluster broker supports: the versions Kafka 4.x brokers support, within kafka-python's.
APIS: dict[int, Api] = {
    ApiKey.ApiVersions: Api(ApiVersionsRequest, ApiVersionsResponse, 0, 4),
    ApiKey.Metadata: Api(MetadataRequest, MetadataResponse, 0, 13),
    ApiKey.DescribeCluster: Api(DescribeClusterRequest, DescribeClusterResponse, 0, 2),
    ApiKey.DescribeLogDirs: Api(DescribeLogDirsRequest, DescribeLogDirsResponse, 1, 4),
    ApiKey.DescribeClientQuotas: Api(
        DescribeClientQuotasRequest, DescribeClientQuotasResponse, 0, 1
    ),
    ApiKey.AlterClientQuotas: Api(AlterClientQuotasRequest, AlterClientQuotasResponse, 0, 1),
    ApiKey.DescribeConfigs: Api(DescribeConfigsRequest, DescribeConfigsResponse, 1, 4),
    ApiKey.Produce: Api(ProduceRequest, ProduceResponse, 3, 12),
    ApiKey.CreateTopics: Api(CreateTopicsRequest, CreateTopicsResponse, 2, 7),
    ApiKey.InitProducerId: Api(InitProducerIdRequest, InitProducerIdResponse, 0, 5),
    ApiKey.SaslHandshake: Api(SaslHandshakeRequest, SaslHandshakeResponse, 0, 1),
    ApiKey.SaslAuthenticate: Api(SaslAuthenticateRequest, SaslAuthenticateResponse, 0, 2),
}


# Listed in ApiVersions but not served (a request closes the connection): librdkafka writes
# magic-2 record batches only to brokers listing Fetch v4+ next to Produce v3+ (its MsgVer2
# feature), and a consumer is not needed here.
ADVERTISED_ONLY: dict[int, tuple[int, int]] = {ApiKey.Fetch: (4, 12)}


def api_name(api_key: int) -> str:
    """Kafka's name of an API (``DescribeLogDirs``), also for keys the devcluster does not serve."""
    try:
        return ApiKey(api_key).name
    except ValueError:
        return f"ApiKey{api_key}"


class BadRequest(Exception):
    """A request Kafka cannot parse (unknown API, unsupported version, bad bytes): Kafka closes the
    connection without answering, and so does the devcluster."""

    def __init__(self, api_key: int | None, message: str):
        super().__init__(message)
        self.api_key = api_key


@dataclass
class Request:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: ApiMessage
    """None only for an ApiVersions request of a version the broker does not know (KIP-511);
    kafka-python's messages are untyped (Any), so a handler of another API reads it as it is."""
    size: int = 0
    """Bytes of the request (header and body), what a produce quota counts."""
    session: Session = field(default_factory=lambda: Session(PLAINTEXT))
    """The connection's; the broker sets it before a handler runs (a PLAINTEXT one until then)."""
    throttle_ms: int = 0
    """Set by a handler whose quota was exceeded: the broker mutes the channel that long."""
    close_after: bool = False
    """Set by a handler when Kafka closes the connection after (or instead of) answering."""

    @property
    def name(self) -> str:
        return api_name(self.api_key)


def frame_size(prefix: bytes) -> int:
    """The payload size announced by the 4 bytes in front of every frame."""
    return Int32.decode(io.BytesIO(prefix))


def decode_request(payload: bytes, max_version: dict[int, int] | None = None) -> Request:
    """Decode one request payload (the frame without its size).

    ``max_version`` lowers the supported maximum of some APIs (a fault). A version outside the
    supported range is a ``BadRequest``, except for ApiVersions, which Kafka answers (KIP-511)."""
    try:
        # Every request header starts like v1 (key, version, correlation id, client id).
        peek = RequestHeader.decode(io.BytesIO(payload), flexible=False)
    except Exception as exc:  # too short or garbage
        raise BadRequest(None, f"unreadable request header ({len(payload)} bytes): {exc}") from exc
    api_key, api_version = peek.request_api_key, peek.request_api_version
    api = APIS.get(api_key)
    if api is None:
        raise BadRequest(api_key, f"unsupported API {api_name(api_key)} (key {api_key})")
    top = (max_version or {}).get(api_key, api.max_version)
    supported = api.min_version <= api_version <= top
    if not supported and api_key != ApiKey.ApiVersions:
        raise BadRequest(
            api_key,
            f"unsupported {api.name} version {api_version} (supported {api.min_version}-{top})",
        )
    if not supported:
        return Request(
            api_key, api_version, peek.correlation_id, peek.client_id, None, len(payload)
        )
    try:
        body = api.request.decode(payload, version=api_version, header=True)
    except Exception as exc:  # malformed bytes: kafka-python raises various errors
        raise BadRequest(api_key, f"malformed {api.name} v{api_version} request: {exc}") from exc
    return Request(api_key, api_version, peek.correlation_id, peek.client_id, body, len(payload))


def encode_response(response: ApiMessage, correlation_id: int) -> bytes:
    """A framed response; ``response`` must carry its version (``Response(version=v, ...)``).

    The header is v1 for flexible versions and v0 otherwise; ApiVersions always uses v0."""
    response.with_header(correlation_id=correlation_id)
    return bytes(response.encode(header=True, framed=True))
