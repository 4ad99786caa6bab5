"""KafkaAdminSession: one kafka-python admin connection, made on first use, dropped after a failure.

The exporter (DescribeLogDirs fan-out) and the enforcer (client quotas) both talk to Kafka through
kafka-python's connection manager. This module is the one place that touches kafka-python's
internals (the admin client's manager, its connections, its IO loop); everyone else uses:

- `send(request, node_id)`: one request, within the session's timeout;
- `send_to_any(build, api)`: one request that any broker can answer, to the broker that answered
  last, else to the others and the bootstrap brokers in turn, each try with its own share of one
  deadline: a stopped broker costs a refused connection, not the call;
- `send_to_each(node_ids, build, api)`: one request per node, all at once, each at the highest
  version of `api` *that node* supports, under one deadline; per node its response or its error
  (a request whose connection closed under it is sent once more on a new connection);
  `send_to_each_its_own(builds, api)` the same with a request of its own for each node;
- `api_versions(node_id)`: what that node's current connection negotiated (None: not asked yet).

Certificates renewed while it runs (Strimzi rewrites a KafkaUser's or the cluster CA's Secret, the
kubelet swaps the mounted files): before each call the session looks at the files its TLS settings
name (kvq.kafka.tls_stores.FileWatch), and when their content changed it reads them again and drops
its client, so the next call connects with the new certificates; one log line says so.
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from kafka.admin import KafkaAdminClient
from kafka.errors import KafkaConnectionError
from kafka.future import Future

from kvq.kafka.client_settings import KafkaSettingsError, kafka_python_config
from kvq.kafka.tls_stores import FileWatch, watched_files

log = logging.getLogger("kvq.kafka")

NodeId = int | str
"""A broker's id, or kafka-python's name for a bootstrap address ('bootstrap-0')."""

MAX_HUNG_TRIES = 3
"""`send_to_any` keeps time for this many tries that hang (a broker that accepts but never
answers); tries that fail at once cost nothing."""


class KafkaUnavailable(Exception):
    """Kafka could not be reached or the call failed; the message is safe to log (no secrets)."""


class UnsupportedApi(Exception):
    """The node does not speak the API at all."""


def describe_error(exc: BaseException) -> str:
    """A short, secret-free description of a client exception."""
    if isinstance(exc, (KafkaUnavailable, UnsupportedApi)):
        return str(exc)
    text = str(exc).strip() or exc.__class__.__name__
    name = exc.__class__.__name__
    return text if text.startswith(name) else f"{name}: {text}"


def send_on(admin: KafkaAdminClient, request: Any, node_id: int | None = None) -> Any:
    """Send `request` through an existing kafka-python admin client's own connections (to
    `node_id`, or any broker); the version is negotiated unless the request carries one.
    Raises what kafka-python raises. For tests driving a stock `KafkaAdminClient`."""
    manager = admin._manager

    async def call() -> Any:
        return await manager.send(request, node_id=node_id)

    return manager.run(call)


class KafkaAdminSession:
    """Sends requests on a lazily created kafka-python admin client's connection manager."""

    def __init__(
        self,
        admin_properties: Mapping[str, str],
        client_id: str,
        timeout_ms: int,
        admin_factory: Callable[..., Any] = KafkaAdminClient,
        socket_options: Sequence[tuple[int, int, int | bytes]] | None = None,
    ) -> None:
        """`socket_options`: what kafka-python sets on each connection's socket (None: its
        default, TCP_NODELAY)."""
        self._properties = dict(admin_properties)
        self._defaults: dict[str, Any] = {"request_timeout_ms": timeout_ms, "client_id": client_id}
        if socket_options is not None:
            self._defaults["socket_options"] = list(socket_options)
        self._tls_files = FileWatch(watched_files(admin_properties))
        self.kwargs = self._keywords()
        self.timeout_ms = int(self.kwargs["request_timeout_ms"])
        self._factory = admin_factory
        self._admin: Any = None
        self._lock = threading.Lock()
        self._versions: dict[NodeId, tuple[object, dict[int, int]]] = {}
        """node id -> (the connection that answered ApiVersions, api key -> max version)."""
        self.answered_last: NodeId | None = None
        """The node that answered the last `send_to_any` (asked first next time)."""

    def _keywords(self) -> dict[str, Any]:
        """kafka-python's keywords for the admin client, TLS files read now."""
        kwargs = {**self._defaults, **kafka_python_config(self._properties)}
        kwargs["bootstrap_timeout_ms"] = kwargs["request_timeout_ms"]
        return kwargs

    @property
    def bootstrap(self) -> str:
        return ",".join(self.kwargs.get("bootstrap_servers", []))

    def send(self, request: Any, node_id: int | None = None) -> Any:
        """One request to `node_id` (None: any broker) within the session's timeout."""

        async def call(manager: Any) -> Any:
            return await manager.wait_for(manager.send(request, node_id=node_id), self.timeout_ms)

        return self._run(call)

    def send_to_each(
        self,
        node_ids: Iterable[int],
        build: Callable[[int], Any],
        api: Any,
        timeout_seconds: float,
    ) -> dict[int, Any]:
        """`build(version)` sent to every node concurrently, at the highest version of `api` (a
        kafka-python request class) that node supports; all within `timeout_seconds`.

        Returns per node its response or the exception it failed with. Nodes the client's
        metadata does not know yet are looked up first (one metadata refresh). Raises
        KafkaUnavailable when Kafka cannot be reached at all.
        """
        return self.send_to_each_its_own(dict.fromkeys(node_ids, build), api, timeout_seconds)

    def send_to_each_its_own(
        self, builds: Mapping[int, Callable[[int], Any]], api: Any, timeout_seconds: float
    ) -> dict[int, Any]:
        """`send_to_each` with a request of its own for each node (`builds[node](version)`): the
        partitions it leads, say."""
        ids = list(builds)

        async def fan_out(manager: Any) -> dict[int, Any]:
            deadline = time.monotonic() + timeout_seconds
            if any(manager.cluster.broker_metadata(n) is None for n in ids):
                try:
                    refresh = manager.call_soon(manager.cluster.refresh_metadata)
                    await manager.wait_for(refresh, _remaining_ms(deadline))
                except Exception as exc:
                    raise KafkaUnavailable(
                        f"metadata refresh failed: {describe_error(exc)}"
                    ) from None
            # One timer for the whole fan-out, not one per node: at 200 brokers the IO loop's
            # per-future timers and wake-ups cost more than the round trip itself.
            pending = {
                n: self._start_at_best_version(manager, n, builds[n], api, deadline) for n in ids
            }
            await _settled_by(manager, pending.values(), deadline)
            dropped = [n for n, future in pending.items() if _connection_dropped(future)]
            if dropped and time.monotonic() < deadline:
                # A connection that closed under its request (its SASL session expired before
                # the client re-authenticated, the broker reaped it as idle) is dialled once
                # more: Java's admin client retries a disconnect within its timeout too.
                for n in dropped:
                    self._versions.pop(n, None)
                    pending[n] = self._start_at_best_version(manager, n, builds[n], api, deadline)
                await _settled_by(manager, (pending[n] for n in dropped), deadline)
            results: dict[int, Any] = {}
            for node_id, future in pending.items():
                if future.succeeded():
                    results[node_id] = future.value
                    continue
                self._versions.pop(node_id, None)
                results[node_id] = (
                    future.exception
                    if future.is_done
                    else KafkaUnavailable(
                        f"broker {node_id} did not answer within {timeout_seconds:g} s"
                    )
                )
            return results

        return self._run(fan_out)

    def send_to_any(self, build: Callable[[int], Any], api: Any, timeout_seconds: float) -> Any:
        """`build(version)` to one broker, at the highest version of `api` it supports.

        Tried in turn: the broker that answered last, the other brokers the session's metadata
        lists (those already connected first), then the bootstrap brokers; all within
        `timeout_seconds`. A try that fails (refused, reconnect backoff, unsupported API) moves on
        at once; one that hangs gets at most its share of what is left, shared with the next
        MAX_HUNG_TRIES - 1 candidates, so one hung broker cannot use up the whole call. Raises
        KafkaUnavailable naming every broker tried when none answered.
        """

        async def ask_any(manager: Any) -> Any:
            deadline = time.monotonic() + timeout_seconds
            candidates = self._candidates(manager)
            failures: list[str] = []
            for index, node_id in enumerate(candidates):
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                share = left / min(MAX_HUNG_TRIES, len(candidates) - index)
                try_deadline = time.monotonic() + share
                attempt = manager.call_soon(
                    self._send_at_best_version, manager, node_id, build, api, try_deadline
                )
                try:
                    response = await manager.wait_for(attempt, _remaining_ms(try_deadline))
                except Exception as exc:
                    self._versions.pop(node_id, None)
                    failures.append(f"{node_id}: {describe_error(exc)}")
                    continue
                self.answered_last = node_id
                return response
            tried = "; ".join(failures) or f"no time left of {timeout_seconds:g} s"
            raise KafkaUnavailable(f"no broker answered {api.__name__} ({tried})")

        return self._run(ask_any)

    def _candidates(self, manager: Any) -> list[NodeId]:
        """Who `send_to_any` asks, in order: the last to answer, connected brokers, the other
        brokers (shuffled, so many exporters spread), the bootstrap brokers."""
        known = [broker.node_id for broker in manager.cluster.brokers()]
        random.shuffle(known)
        connections = manager._conns

        def connected(node_id: NodeId) -> bool:
            connection = connections.get(node_id)
            return connection is not None and connection.connected

        ordered = sorted(known, key=lambda n: (n != self.answered_last, not connected(n)))
        return ordered + [broker.node_id for broker in manager.cluster.bootstrap_brokers()]

    def api_versions(self, node_id: int) -> dict[int, int] | None:
        """{api key: max version} the node's current connection answered, None if not asked."""
        cached = self._versions.get(node_id)
        return None if cached is None else dict(cached[1])

    def _start_at_best_version(
        self, manager: Any, node_id: NodeId, build: Callable[[int], Any], api: Any, deadline: float
    ) -> Any:
        """`_send_at_best_version` as a kafka-python Future; when this connection's versions
        are known, the request goes out at once, without a task on the IO loop."""
        supported = self._known_versions(manager, node_id)
        if supported is None:
            return manager.call_soon(
                self._send_at_best_version, manager, node_id, build, api, deadline
            )
        if api.API_KEY not in supported:
            return Future().failure(
                UnsupportedApi(f"broker {node_id} does not support {api.__name__}")
            )
        version = min(supported[api.API_KEY], api.max_version)
        return manager.send(
            build(version), node_id=node_id, request_timeout_ms=_remaining_ms(deadline)
        )

    async def _send_at_best_version(
        self, manager: Any, node_id: NodeId, build: Callable[[int], Any], api: Any, deadline: float
    ) -> Any:
        if manager.cluster.broker_metadata(node_id) is None:
            raise KafkaUnavailable(f"broker {node_id} is not in the metadata")
        supported = await self._node_versions(manager, node_id, deadline)
        if api.API_KEY not in supported:
            raise UnsupportedApi(f"broker {node_id} does not support {api.__name__}")
        version = min(supported[api.API_KEY], api.max_version)
        return await manager.send(
            build(version), node_id=node_id, request_timeout_ms=_remaining_ms(deadline)
        )

    def _known_versions(self, manager: Any, node_id: NodeId) -> dict[int, int] | None:
        """What the node's current connection answered to ApiVersions; None: ask it."""
        connection = manager._conns.get(node_id)
        cached = self._versions.get(node_id)
        if cached is not None and connection is not None and cached[0] is connection:
            return cached[1]
        return None

    async def _node_versions(
        self, manager: Any, node_id: NodeId, deadline: float
    ) -> dict[int, int]:
        """Ask the node itself (ApiVersions v0) which versions it speaks, once per connection.

        kafka-python applies the bootstrap broker's versions to every connection: in a mixed
        cluster it would ask a new broker with an old version (DescribeLogDirs v3: no sizes).
        A reconnected (restarted) node is asked again.
        """
        from kafka.protocol.metadata import ApiVersionsRequest

        known = self._known_versions(manager, node_id)
        if known is not None:
            return known
        response = await manager.send(
            ApiVersionsRequest(version=0),
            node_id=node_id,
            request_timeout_ms=_remaining_ms(deadline),
        )
        supported = {k.api_key: k.max_version for k in response.api_keys}
        self._versions[node_id] = (manager._conns.get(node_id), supported)
        return supported

    def _run(self, coroutine_function: Callable[[Any], Any]) -> Any:
        """Run `coroutine_function(manager)` on the client's IO loop and return its result.

        Any failure drops the client (the next call connects afresh) and raises KafkaUnavailable.
        """
        manager = self._manager()
        try:
            return manager.run(coroutine_function, manager)
        except KafkaUnavailable:
            self.close()
            raise
        except Exception as exc:  # connection errors, timeouts, protocol errors
            login = self._login_failure()
            self.close()
            raise KafkaUnavailable(describe_error(exc) + login) from None

    def _manager(self) -> Any:
        with self._lock:
            if self._tls_files.changed():
                self._reload_tls()
            if self._admin is None:
                try:
                    self._admin = self._factory(**self.kwargs)
                except Exception as exc:  # any bootstrap failure means 'down'
                    raise KafkaUnavailable(
                        f"cannot reach Kafka at {self.bootstrap}: {describe_error(exc)}"
                        f"{self._login_failure()}"
                    ) from None
                _without_client_metrics(self._admin._manager)
            return self._admin._manager

    def _reload_tls(self) -> None:
        """The TLS files changed: new keywords, and the client dropped so that the next call
        connects with them. Files that cannot be used are logged and the current ones kept."""
        files = ", ".join(self._tls_files.paths)
        try:
            kwargs = self._keywords()
        except KafkaSettingsError as exc:
            log.warning("TLS files changed (%s), kept the previous ones: %s", files, exc)
            return
        self.kwargs = kwargs
        admin, self._admin = self._admin, None
        self._versions.clear()
        if admin is not None:
            with contextlib.suppress(Exception):
                admin.close()
        log.info("TLS files changed (%s): reconnecting to Kafka with the new certificates", files)

    def _login_failure(self) -> str:
        """`; <why>` when the OAUTHBEARER token provider could not get a token, else ''."""
        reason = getattr(self.kwargs.get("sasl_oauth_token_provider"), "last_error", None)
        return f"; {reason}" if reason else ""

    def close(self) -> None:
        with self._lock:
            admin, self._admin = self._admin, None
            self._versions.clear()
        if admin is not None:
            with contextlib.suppress(Exception):  # closing a broken client may fail too
                admin.close()


def _all_settled(futures: Iterable[Any]) -> Future:
    """A kafka-python Future that succeeds once every one of `futures` is done, either way."""
    waiting = list(futures)
    settled = Future()
    left = [len(waiting)]

    def one_done(_: object) -> None:
        left[0] -= 1
        if left[0] == 0:
            settled.success(None)

    if not waiting:
        return settled.success(None)
    for future in waiting:
        future.add_both(one_done)
    return settled


async def _settled_by(manager: Any, futures: Iterable[Any], deadline: float) -> None:
    """Wait until every one of `futures` is done or the deadline passes (what is still out
    then is the caller's to report)."""
    with contextlib.suppress(Exception):
        await manager.wait_for(_all_settled(futures), _remaining_ms(deadline))


def _connection_dropped(future: Any) -> bool:
    """The request failed because its connection closed (not an answer, not a timeout)."""
    return future.failed() and isinstance(future.exception, KafkaConnectionError)


def _remaining_ms(deadline: float) -> int:
    return max(1, int((deadline - time.monotonic()) * 1000))


def _without_client_metrics(manager: Any) -> None:
    """kafka-python records sensors (bytes, request latency) on every request of every
    connection, and nobody reads them here: connections made from now on (all but the
    bootstrap one) skip them, a sixth of the IO thread's time in a 200-broker fan-out."""
    if isinstance(getattr(manager, "config", None), dict):
        manager.config["metrics"] = None
        manager._sensors = None
