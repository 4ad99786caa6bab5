"""One devcluster broker: a TCP listener speaking the Kafka protocol on the cluster's event loop.

Like a Kafka broker, it handles one request per connection at a time (the channel is muted until
the response is sent), so pipelined requests are answered in order; a request it cannot parse
closes the connection without an answer. Different connections (and brokers) never wait for each
other: the only waiting is ``asyncio.sleep`` for the latency fault.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from kafka.protocol.api_key import ApiKey

from .api_handlers import HANDLERS, alter_client_quotas_with_faults
from .broker_configs import static_config
from .faults import Faults
from .log_dirs import LogDir
from .protocol_codec import (
    APIS,
    FRAME_SIZE_BYTES,
    MAX_FRAME_BYTES,
    BadRequest,
    api_name,
    decode_request,
    encode_response,
    frame_size,
)

if TYPE_CHECKING:
    from .cluster import DevCluster

log = logging.getLogger(__name__)


class Broker:
    def __init__(
        self, cluster: DevCluster, broker_id: int, host: str, port: int, log_dirs: list[LogDir]
    ):
        self.cluster = cluster
        self.broker_id = broker_id
        self.host = host
        self.port = port
        self.log_dirs = log_dirs
        self.faults = Faults()  # replaced whole by the control API, read by the handlers
        self.config_overrides: dict[str, str] = {}  # static configs set by the devcluster's user
        self.up = False
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.StreamWriter] = set()

    def api_versions(self) -> dict[int, tuple[int, int]]:
        """API key -> (min, max) version this broker supports now (faults included)."""
        versions = {int(key): (api.min_version, api.max_version) for key, api in APIS.items()}
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
        self._server = await asyncio.start_server(
            self._serve, self.host, self.port, reuse_address=True, backlog=128
        )
        self.port = self._server.sockets[0].getsockname()[1]
        self.up = True

    async def stop(self) -> None:
        """Close the port and every connection at once (a broker that died or left)."""
        if not self.up:
            return
        self.up = False
        self._server.close()  # closes the listening socket now
        self._server = None
        self.drop_connections()

    def drop_connections(self) -> None:
        for writer in list(self._connections):
            writer.transport.abort()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._connections.add(writer)
        try:
            while self.up:
                size = frame_size(await reader.readexactly(FRAME_SIZE_BYTES))
                if not 0 < size <= MAX_FRAME_BYTES:
                    log.info("broker %d: closing connection: %d-byte frame", self.broker_id, size)
                    return
                payload = await reader.readexactly(size)
                if not await self._answer(payload, writer):
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        except Exception:
            log.exception("broker %d: request failed; closing the connection", self.broker_id)
        finally:
            self._connections.discard(writer)
            writer.transport.abort()

    async def _answer(self, payload: bytes, writer: asyncio.StreamWriter) -> bool:
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
        if req.api_key == ApiKey.DescribeLogDirs and self.faults.leave_before_describe_log_dirs:
            log.info("broker %d leaves the cluster on DescribeLogDirs (fault)", self.broker_id)
            self.cluster.disarm_leave_fault(self)
            await self.stop()
            return False
        latency_ms = self.faults.latency_ms
        if latency_ms:
            await asyncio.sleep(latency_ms / 1000)
            if not self.up:
                return False
        if req.api_key == ApiKey.AlterClientQuotas:
            response = await alter_client_quotas_with_faults(self, req)
        else:
            response = HANDLERS[req.api_key](self, req)
        writer.write(encode_response(response, req.correlation_id))
        await writer.drain()
        return True
