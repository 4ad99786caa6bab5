"""One devcluster broker: TCP listeners speaking the Kafka protocol on the cluster's event loop.

A broker has a PLAINTEXT listener (``port``, principal ``User:ANONYMOUS``) and, when the cluster
has SASL users, a SASL_PLAINTEXT listener (``sasl_port``) whose connections authenticate first.
Like a Kafka broker, it handles one request per connection at a time (the channel is muted until
the response is sent), so pipelined requests are answered in order; a request it cannot parse
closes the connection without an answer. A produce over quota mutes the channel for the throttle
time after the response is sent (KIP-219). Different connections (and brokers) never wait for each
other: the only waiting is ``asyncio.sleep`` for the latency fault and for throttled channels.
"""

from __future__ import annotations

import asyncio
import functools
import logging

from kafka.protocol.api_key import ApiKey

from .api_handlers import HANDLERS, Handler, alter_client_quotas_with_faults
from .broker_configs import static_config
from .cluster_view import ClusterView
from .faults import Faults
from .log_dirs import LogDir
from .produce_api import init_producer_id, produce
from .produce_quotas import ProduceQuotas
from .protocol_codec import (
    ADVERTISED_ONLY,
    APIS,
    FRAME_SIZE_BYTES,
    MAX_FRAME_BYTES,
    BadRequest,
    api_name,
    decode_request,
    encode_response,
    frame_size,
)
from .sasl import (
    PLAINTEXT,
    SASL_PLAINTEXT,
    Session,
    allowed_before_authentication,
    authenticated_user,
)
from .sasl_api import sasl_authenticate, sasl_handshake
from .topics_api import create_topics

log = logging.getLogger(__name__)

ALL_HANDLERS: dict[int, Handler] = {
    **HANDLERS,
    ApiKey.Produce: produce,
    ApiKey.CreateTopics: create_topics,
    ApiKey.InitProducerId: init_producer_id,
    ApiKey.SaslHandshake: sasl_handshake,
    ApiKey.SaslAuthenticate: sasl_authenticate,
}


class Broker:
    def __init__(
        self, cluster: ClusterView, broker_id: int, host: str, port: int, log_dirs: list[LogDir]
    ):
        self.cluster = cluster
        self.broker_id = broker_id
        self.host = host
        self.port = port
        self.log_dirs = log_dirs
        self.faults = Faults()  # replaced whole by the control API, read by the handlers
        self.config_overrides: dict[str, str] = {}  # static configs set by the devcluster's user
        self.sasl_port: int | None = None
        """The SASL_PLAINTEXT listener's port, once it listened; None without SASL users."""
        self.up = False
        self.produce_quotas = ProduceQuotas(
            cluster.producer_quotas, version=lambda: cluster.quotas.generation
        )
        self._servers: list[asyncio.Server] = []
        self._connections: set[asyncio.StreamWriter] = set()

    def port_for(self, listener: str) -> int:
        """The port of this broker's listener of that name (Metadata answers per listener)."""
        if listener == SASL_PLAINTEXT and self.sasl_port is not None:
            return self.sasl_port
        return self.port

    def api_versions(self) -> dict[int, tuple[int, int]]:
        """API key -> (min, max) version this broker supports now (faults included)."""
        versions = {int(key): (api.min_version, api.max_version) for key, api in APIS.items()}
        versions.update({int(key): span for key, span in ADVERTISED_ONLY.items()})
        cap = self.faults.max_describe_log_dirs_version
        if cap is not None:
            versions[ApiKey.DescribeLogDirs] = (APIS[ApiKey.DescribeLogDirs].min_version, cap)
        return versions

    def static_config(self) -> dict[str, str]:
        """The broker's ``server.properties`` as DescribeConfigs reports it."""
        log_dirs = [str(d.path) for d in self.log_dirs]
        return static_config(self.broker_id, self.host, self.port, log_dirs, self.config_overrides)

    async def start(self) -> None:
        if self.up:
            return
        listeners = [(PLAINTEXT, self.port)]
        if self.cluster.sasl_users is not None:
            listeners.append((SASL_PLAINTEXT, self.sasl_port or 0))
        try:
            for name, port in listeners:
                server = await asyncio.start_server(
                    functools.partial(self._serve, listener=name),
                    self.host,
                    port,
                    reuse_address=True,
                    backlog=128,
                )
                self._servers.append(server)
                bound = server.sockets[0].getsockname()[1]
                if name == PLAINTEXT:
                    self.port = bound
                else:
                    self.sasl_port = bound
        except BaseException:
            for server in self._servers:
                server.close()
            self._servers = []
            raise
        self.up = True
        self.cluster.replicas.catch_up(self)

    async def stop(self) -> None:
        """Close the port and every connection at once (a broker that died or left)."""
        if not self.up:
            return
        self.up = False
        for server in self._servers:
            server.close()  # closes the listening socket now
        self._servers = []
        self.drop_connections()

    def drop_connections(self) -> None:
        for writer in list(self._connections):
            writer.transport.abort()

    async def _serve(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, listener: str
    ) -> None:
        self._connections.add(writer)
        session = Session(listener)
        try:
            while self.up:
                size = frame_size(await reader.readexactly(FRAME_SIZE_BYTES))
                if not 0 < size <= MAX_FRAME_BYTES:
                    log.info("broker %d: closing connection: %d-byte frame", self.broker_id, size)
                    return
                payload = await reader.readexactly(size)
                if session.stage == "raw":  # after a v0 SaslHandshake: a bare token frame
                    if not await self._raw_sasl_token(payload, session, writer):
                        return
                    continue
                if not await self._answer(payload, writer, session):
                    return
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass  # the client left, or the broker stopped
        except Exception:
            log.exception("broker %d: request failed; closing the connection", self.broker_id)
        finally:
            self._connections.discard(writer)
            writer.transport.abort()

    async def _raw_sasl_token(
        self, token: bytes, session: Session, writer: asyncio.StreamWriter
    ) -> bool:
        try:
            session.user = authenticated_user(self.cluster.sasl_users, token)
        except Exception as exc:
            log.info("broker %d: SASL/PLAIN authentication failed: %s", self.broker_id, exc)
            return False
        session.stage = "done"
        writer.write(b"\0\0\0\0")  # an empty server token
        await writer.drain()
        return True

    async def _answer(self, payload: bytes, writer: asyncio.StreamWriter, session: Session) -> bool:
        """Answer one request; False when the connection must close instead."""
        try:
            # Versions above a fault's cap are still read: see ``describe_log_dirs``.
            req = decode_request(payload)
        except BadRequest as exc:
            name = "Invalid" if exc.api_key is None else api_name(exc.api_key)
            self.cluster.requests.count(self.broker_id, name)
            log.info("broker %d: closing connection: %s", self.broker_id, exc)
            return False
        self.cluster.requests.count(self.broker_id, req.name)
        req.session = session
        if not allowed_before_authentication(session, req.api_key):
            log.info(
                "broker %d: closing connection: unexpected %s during SASL authentication",
                self.broker_id,
                req.name,
            )
            return False
        if req.api_key == ApiKey.DescribeLogDirs and self.faults.leave_before_describe_log_dirs:
            log.info("broker %d leaves the cluster on DescribeLogDirs (fault)", self.broker_id)
            self.cluster.disarm_leave_fault(self)
            await self.stop()
            return False
        if req.api_key == ApiKey.DescribeLogDirs and self.faults.drop_describe_log_dirs:
            log.info("broker %d: closing connection on DescribeLogDirs (fault)", self.broker_id)
            self.cluster.spend_drop_fault(self)
            return False
        latency_ms = self.faults.latency_ms
        if latency_ms:
            await asyncio.sleep(latency_ms / 1000)
            if not self.up:
                return False
        if req.api_key == ApiKey.AlterClientQuotas:
            response = await alter_client_quotas_with_faults(self, req)
        else:
            response = ALL_HANDLERS[req.api_key](self, req)
        if response is not None:
            writer.write(encode_response(response, req.correlation_id))
            await writer.drain()
        if req.close_after:
            return False
        if req.throttle_ms > 0:  # the channel stays muted (KIP-219)
            await asyncio.sleep(req.throttle_ms / 1000)
        return True
