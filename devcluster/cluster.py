"""DevCluster: N Kafka brokers in one process, their log dirs, the shared quota store, the faults.

The brokers run on one asyncio event loop in a background thread; the control API (and any Python
caller) changes the cluster from other threads through the methods below, which take the same
JSON-shaped arguments as the HTTP API and raise ControlError for a bad request.

    with DevCluster(brokers=3, log_dirs_per_broker=2, data_dir=tmp_path) as dc:
        admin = KafkaAdminClient(bootstrap_servers=dc.bootstrap)
        dc.set_log_dir(0, 1, fill_bytes=10_000_000)
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kafka.errors import for_code

from kvq.kafka.quota_entity import QuotaEntity

from .broker import Broker
from .broker_configs import CLIENT_QUOTA_CALLBACK_CLASS, SETTABLE, check_class_name, check_setting
from .cluster_acls import ClusterAcls
from .cluster_setup import check_arguments, cluster_id_for, raise_open_files_limit
from .cluster_view import BrokerNode
from .control_api import ControlServer
from .faults import KAFKA_STORAGE_ERROR, AlterFault
from .kafka_version import DEFAULT as DEFAULT_KAFKA_VERSION
from .kafka_version import parse
from .log_dirs import DiskFull, LogDir
from .mutation_quotas import MutationQuotas
from .quota_store import QuotaStore
from .replicas import ReplicaStore
from .request_counts import RequestCounter
from .sasl import SaslUsers
from .topics import (
    TOPIC_ALREADY_EXISTS,
    NewTopic,
    TopicError,
    TopicRegistry,
    place_replicas,
    validate_name,
)
from .validation import ControlError, boolean, optional_integer, require_object

log = logging.getLogger(__name__)

LOG_DIR_FIELDS = ("clear", "online", "capacity_bytes", "usable_bytes", "fill_bytes")
DEFAULT_HOST = "127.0.0.1"
_STARTUP_TIMEOUT_S = 60


class DevCluster:
    """``base_port=0`` gives every broker a free port of its own, otherwise broker ``i`` listens on
    ``base_port + i``; ``control_port=0`` picks a free port, ``None`` runs no control API.
    ``data_dir=None`` uses a temporary directory that ``stop()`` removes. ``sasl_users`` (name ->
    password, or a ``SaslUsers``) opens a SASL_PLAINTEXT listener on every broker too.
    ``kafka_version`` is the Kafka release to answer as where releases differ (kafka_version.py:
    NaN quotas refused from 4.4)."""

    def __init__(
        self,
        brokers: int = 3,
        log_dirs_per_broker: int = 2,
        data_dir: str | Path | None = None,
        host: str = DEFAULT_HOST,
        base_port: int = 0,
        control_port: int | None = 0,
        capacity_bytes: int | None = None,
        cluster_id: str | None = None,
        client_quota_callback_class: str | None = None,
        sasl_users: Mapping[str, str] | SaslUsers | None = None,
        cluster_acls: Mapping[str, list[str]] | ClusterAcls | None = None,
        kafka_version: str = DEFAULT_KAFKA_VERSION,
    ):
        check_arguments(brokers, log_dirs_per_broker, base_port, control_port, capacity_bytes)
        callback = check_class_name("client_quota_callback_class", client_quota_callback_class)
        self.kafka_version = parse(kafka_version)
        """The Kafka release whose answers devcluster gives where releases differ."""
        self._own_data_dir = data_dir is None
        if data_dir is None:
            data_dir = tempfile.mkdtemp(prefix="kvq-devcluster-")
        self.data_dir = Path(data_dir).absolute()
        self.host = host
        self._control_port = control_port
        self.acls: ClusterAcls | None = None
        """ACLs on the cluster resource; None: no authorizer (see ``cluster_acls``)."""
        if cluster_acls is not None:
            try:
                self.acls = (
                    cluster_acls
                    if isinstance(cluster_acls, ClusterAcls)
                    else ClusterAcls.parse(cluster_acls)
                )
            except ControlError as exc:
                raise ValueError(exc.message) from None
        self.sasl_users: SaslUsers | None = (
            sasl_users
            if sasl_users is None or isinstance(sasl_users, SaslUsers)
            else SaslUsers(sasl_users)
        )
        self.topic_registry = TopicRegistry(self.data_dir / "topics.json")
        self.storage_errors: list[dict[str, Any]] = []
        self._producer_ids = 999
        self.brokers = [
            Broker(
                self,
                i,
                host,
                base_port + i if base_port else 0,
                [
                    LogDir(self.data_dir / f"broker-{i}" / f"logdir-{j}", capacity_bytes)
                    for j in range(log_dirs_per_broker)
                ],
            )
            for i in range(brokers)
        ]
        self.replicas = ReplicaStore(self.brokers, self.topic_registry, self.record_storage_error)
        if callback is not None:
            for broker in self.brokers:
                broker.config_overrides[CLIENT_QUOTA_CALLBACK_CLASS] = callback
        self.cluster_id = cluster_id_for(self.data_dir / "meta.properties", cluster_id)
        self.quotas = QuotaStore(self.data_dir / "quotas.json", self.kafka_version)
        self.mutation_quotas = MutationQuotas(
            self.producer_quotas, version=lambda: self.quotas.generation
        )
        self.requests = RequestCounter()
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._control: ControlServer | None = None

    # ---- lifecycle ---------------------------------------------------------------------------
    def start(self) -> DevCluster:
        """Open every broker port and the control API; returns when all of them listen."""
        if self._loop is not None:
            return self
        raise_open_files_limit(len(self.brokers))
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="devcluster", daemon=True
        )
        self._thread.start()
        try:
            self._run(self._start_all(), _STARTUP_TIMEOUT_S)
            if self._control_port is not None:
                self._control = ControlServer(self, self.host, self._control_port)
                self._control.start()
        except BaseException:
            self.stop()
            raise
        log.info("devcluster %s up: %s", self.cluster_id, self.bootstrap)
        return self

    async def _start_all(self) -> None:
        for broker in self.brokers:
            try:
                await broker.start()
            except OSError as exc:
                raise OSError(
                    exc.errno,
                    f"broker {broker.broker_id} cannot listen on "
                    f"{broker.host}:{broker.port}: {exc.strerror}",
                ) from exc

    async def _stop_all(self) -> None:
        for broker in self.brokers:
            await broker.stop()
        # Connections still waiting (a latency fault) end now, not when the loop is collected.
        pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    def stop(self) -> None:
        """Close the control API, every broker and the event loop (idempotent)."""
        if self._control is not None:
            self._control.stop()
            self._control = None
        loop, thread = self._loop, self._thread
        if loop is not None and loop.is_running():
            try:
                self._run(self._stop_all(), 10)
            finally:
                loop.call_soon_threadsafe(loop.stop)
                if thread is not None:
                    thread.join(10)
        if loop is not None and not loop.is_running():
            loop.close()
        self._loop = self._thread = None
        self.replicas.close()
        if self._own_data_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    close = stop

    def __enter__(self) -> DevCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self, coro, timeout: float = 30):
        if self._loop is None:
            coro.close()
            raise ControlError(409, "the devcluster is not running")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    # ---- addresses -----------------------------------------------------------------------------
    @property
    def bootstrap(self) -> str:
        """``host:port,host:port`` of every broker (stopped ones included)."""
        return ",".join(f"{b.host}:{b.port}" for b in self.brokers)

    bootstrap_servers = bootstrap

    @property
    def sasl_bootstrap(self) -> str:
        """``host:port,...`` of every broker's SASL_PLAINTEXT listener (needs ``sasl_users``)."""
        if self.sasl_users is None:
            raise ControlError(409, "this devcluster has no SASL listener: give it sasl_users")
        return ",".join(f"{b.host}:{b.sasl_port}" for b in self.brokers)

    @property
    def broker_ports(self) -> dict[int, int]:
        return {b.broker_id: b.port for b in self.brokers}

    @property
    def control_url(self) -> str | None:
        return None if self._control is None else self._control.url

    def log_dir_path(self, broker_id: int, index: int) -> Path:
        return self.log_dir(broker_id, index).path

    # ---- read by the API handlers, on the event loop -------------------------------------------
    def live_brokers(self) -> list[Broker]:
        return [b for b in self.brokers if b.up]

    def topics(self) -> dict[str, dict[int, list[int]]]:
        """topic -> partition -> replica broker ids: the created topics (assignment order), and
        partition directories found in log dirs (made by hand) for the others."""
        out = self.topic_registry.all()
        for topic, partitions in self._scanned_topics().items():
            if topic not in out:
                out[topic] = partitions
        return out

    def partition_replicas(self, topic: str, partition: int) -> list[int] | None:
        found = self.topic_registry.replicas(topic, partition)
        if found is None and self.topic_registry.get(topic) is None:
            found = self._scanned_topics().get(topic, {}).get(partition)
        return found

    def producer_quotas(self) -> dict:
        """The stored quotas as ``{QuotaEntity: {key: value}}`` (user / client-id entities)."""
        return {
            QuotaEntity.of(item["entity"]): item["values"]
            for item in self.quotas.snapshot()
            if "ip" not in item["entity"]
        }

    def create_topic(self, topic: NewTopic, validate_only: bool = False) -> dict[int, list[int]]:
        """Check and (unless ``validate_only``) create a topic; its placement. TopicError."""
        if topic.name in self.topics():
            raise TopicError(TOPIC_ALREADY_EXISTS, f"Topic '{topic.name}' already exists.")
        validate_name(topic.name)
        live = [b.broker_id for b in self.live_brokers()]
        placement = place_replicas(
            topic, live, self.topic_registry.partition_count(), self.kafka_version
        )
        if not validate_only:
            self.replicas.create(topic.name, placement)
            self.topic_registry.add(topic.name, placement)
        return placement

    def next_producer_id(self) -> int:
        with self._lock:
            self._producer_ids += 1
            return self._producer_ids

    def record_storage_error(self, broker_id: int, index: int) -> None:
        """A write failed on this log dir (it is offline now); kept for ``state()``."""
        self.storage_errors.append({"broker": broker_id, "log_dir": index, "time": time.time()})

    def _scanned_topics(self) -> dict[str, dict[int, list[int]]]:
        out: dict[str, dict[int, list[int]]] = {}
        for broker in self.brokers:
            for index, log_dir in enumerate(broker.log_dirs):
                if index in broker.faults.log_dir_errors:
                    continue
                try:
                    partitions = log_dir.partitions()
                except OSError:
                    continue
                for topic, partition, _ in partitions:
                    replicas = out.setdefault(topic, {}).setdefault(partition, [])
                    if broker.broker_id not in replicas:
                        replicas.append(broker.broker_id)
        return out

    def topic_id(self, topic: str) -> uuid.UUID:
        return uuid.uuid5(uuid.NAMESPACE_URL, f"kafka://{self.cluster_id}/{topic}")

    # ---- control operations (any thread) -------------------------------------------------------
    def broker(self, broker_id: int) -> Broker:
        if not 0 <= broker_id < len(self.brokers):
            raise ControlError(
                404, f"no broker {broker_id}: broker ids are 0-{len(self.brokers) - 1}"
            )
        return self.brokers[broker_id]

    def log_dir(self, broker_id: int, index: int) -> LogDir:
        broker = self.broker(broker_id)
        if not 0 <= index < len(broker.log_dirs):
            raise ControlError(
                404,
                f"broker {broker_id} has no log dir {index}: "
                f"indexes are 0-{len(broker.log_dirs) - 1}",
            )
        return broker.log_dirs[index]

    def stop_broker(self, broker_id: int) -> dict[str, Any]:
        """Close the broker's port and connections; it disappears from Metadata and DescribeCluster
        (listed as fenced only when a v2 DescribeCluster asks for fenced brokers, as Kafka keeps a
        stopped broker registered)."""
        self._run(self.broker(broker_id).stop())
        return self.broker_state(broker_id)

    def start_broker(self, broker_id: int) -> dict[str, Any]:
        """Listen again on the broker's port (the same one it had)."""
        broker = self.broker(broker_id)
        try:
            self._run(broker.start())
        except OSError as exc:
            raise ControlError(
                409, f"broker {broker_id} cannot listen on port {broker.port}: {exc}"
            ) from exc
        return self.broker_state(broker_id)

    def set_faults(self, broker_id: int, body: Any = None, **faults: Any) -> dict[str, Any]:
        """Change a broker's faults (see ``faults.py``); returns the faults now active."""
        broker = self.broker(broker_id)
        with self._lock:
            broker.faults = broker.faults.updated(_body(body, faults), len(broker.log_dirs))
        return broker.faults.active()

    def disarm_leave_fault(self, broker: BrokerNode) -> None:
        """The leave fault fires once (called on the event loop when it does)."""
        with self._lock:
            broker.faults = dataclasses.replace(broker.faults, leave_before_describe_log_dirs=False)

    def spend_drop_fault(self, broker: BrokerNode) -> None:
        """One of the ``drop_describe_log_dirs`` drops happened (called on the event loop)."""
        with self._lock:
            left = max(0, broker.faults.drop_describe_log_dirs - 1)
            broker.faults = dataclasses.replace(broker.faults, drop_describe_log_dirs=left)

    def set_broker_config(self, broker_id: int, body: Any) -> dict[str, str]:
        """Set or unset (null) static configs of a broker, as if it had been restarted with them
        in ``server.properties``: ``{"client.quota.callback.class": "io.strimzi...."}``,
        ``{"log.retention.check.interval.ms": 1000}``; returns
        the configs set."""
        broker = self.broker(broker_id)
        body = require_object(body, SETTABLE)
        try:
            values = {k: check_setting(k, v) for k, v in body.items()}
        except ValueError as exc:
            raise ControlError(400, str(exc)) from None
        with self._lock:
            overrides = dict(broker.config_overrides)
            for key, value in values.items():
                if value is None:
                    overrides.pop(key, None)
                else:
                    overrides[key] = value
            broker.config_overrides = overrides  # replaced whole: the handlers read it unlocked
        return dict(overrides)

    def take_alter_fault(self, broker: BrokerNode, validate_only: bool) -> AlterFault | None:
        """The ``alter_client_quotas`` fault hitting this request, counted (on the event loop)."""
        with self._lock:
            fault = broker.faults.alter_client_quotas
            if fault is None or not fault.matches(validate_only):
                return None
            broker.faults = dataclasses.replace(broker.faults, alter_client_quotas=fault.spent())
            return fault

    def clear_faults(self, broker_id: int) -> dict[str, Any]:
        return self.set_faults(broker_id, clear=True)

    def set_log_dir(self, broker_id: int, index: int, body: Any = None, **fields: Any):
        """Apply ``clear``, then ``capacity_bytes`` / ``usable_bytes`` (null: unset), then
        ``fill_bytes`` (a new real file of n bytes); returns the log dir's state."""
        log_dir = self.log_dir(broker_id, index)
        body = require_object(_body(body, fields), LOG_DIR_FIELDS)
        clear = boolean("clear", body["clear"]) if "clear" in body else False
        online = boolean("online", body["online"]) if "online" in body else False
        capacity = optional_integer("capacity_bytes", body.get("capacity_bytes"), 1)
        usable = optional_integer("usable_bytes", body.get("usable_bytes"), 0)
        fill = optional_integer("fill_bytes", body.get("fill_bytes"), 1)
        with self._lock:
            if clear:
                log_dir.clear()
            if online:
                log_dir.offline_reason = None
            if "capacity_bytes" in body:
                log_dir.capacity_bytes = capacity
            if "usable_bytes" in body:
                log_dir.pinned_usable_bytes = usable
        if fill is not None:
            try:
                log_dir.fill(fill)
            except DiskFull as exc:
                raise ControlError(
                    507,
                    f"log dir {log_dir.path} is full: wrote {exc.written} of {fill} bytes "
                    f"({exc.strerror}); the partial file stays",
                ) from exc
        if (clear or online) and self.brokers[broker_id].up:
            self._run(self._catch_up(self.brokers[broker_id]))
        return self._log_dir_state(self.brokers[broker_id], index)

    async def _catch_up(self, broker: Broker) -> None:
        self.replicas.catch_up(broker)

    # ---- SASL users (any thread) ---------------------------------------------------------------
    def _require_sasl(self) -> SaslUsers:
        if self.sasl_users is None:
            raise ControlError(409, "this devcluster has no SASL listener: give it sasl_users")
        return self.sasl_users

    def sasl_user_names(self) -> list[str]:
        return self._require_sasl().names()

    def set_sasl_user(self, name: str, body: Any = None, **fields: Any) -> list[str]:
        """Add or change a SASL/PLAIN user: ``{"password": "..."}``; returns the user names."""
        body = require_object(_body(body, fields), ("password",))
        users = self._require_sasl()
        users.set(name, body["password"])
        return users.names()

    def remove_sasl_user(self, name: str) -> list[str]:
        users = self._require_sasl()
        users.remove(name)
        return users.names()

    def acl_state(self) -> dict[str, list[str]] | None:
        """The cluster ACLs, or None when the devcluster runs without an authorizer."""
        acls = self.acls
        return None if acls is None else acls.snapshot()

    def set_acls(self, body: Any) -> dict[str, list[str]] | None:
        """Replace the cluster ACLs (``{"User:name": ["Describe", ...]}``); None: no authorizer."""
        self.acls = None if body is None else ClusterAcls.parse(body)
        return self.acl_state()

    def quota_state(self) -> list[dict[str, Any]]:
        """``[{"entity": {"user": "alice", "client-id": None}, "values": {key: value}}]``"""
        return self.quotas.snapshot()

    def request_counts(self) -> dict[str, Any]:
        return self.requests.snapshot()

    def reset_request_counts(self) -> dict[str, Any]:
        self.requests.reset()
        return self.requests.snapshot()

    # ---- state -----------------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        live = self.live_brokers()
        return {
            "cluster_id": self.cluster_id,
            "bootstrap": self.bootstrap,
            "control_url": self.control_url,
            "data_dir": str(self.data_dir),
            "controller_id": live[0].broker_id if live else -1,
            "brokers": [self.broker_state(b.broker_id) for b in self.brokers],
            "quotas": self.quota_state(),
            "acls": self.acl_state(),
            "topics": {
                name: {str(p): r for p, r in parts.items()} for name, parts in self.topics().items()
            },
            "storage_errors": list(self.storage_errors),
            "faults": {
                str(b.broker_id): b.faults.active() for b in self.brokers if b.faults.active()
            },
        }

    def broker_state(self, broker_id: int) -> dict[str, Any]:
        broker = self.broker(broker_id)
        return {
            "id": broker.broker_id,
            "host": broker.host,
            "port": broker.port,
            "sasl_port": broker.sasl_port,
            "up": broker.up,
            "log_dirs": [self._log_dir_state(broker, i) for i in range(len(broker.log_dirs))],
            "faults": broker.faults.active(),
            "config": dict(broker.config_overrides),
        }

    def _log_dir_state(self, broker: Broker, index: int) -> dict[str, Any]:
        log_dir = broker.log_dirs[index]
        state: dict[str, Any] = {
            "index": index,
            "path": str(log_dir.path),
            "total_bytes": None,
            "usable_bytes": None,
            "capacity_bytes": log_dir.capacity_bytes,
            "pinned_usable_bytes": log_dir.pinned_usable_bytes,
            "error": None,
            "error_code": 0,
        }
        code = broker.faults.log_dir_errors.get(index)
        if log_dir.offline_reason is not None:
            code = code or KAFKA_STORAGE_ERROR
            state["offline_reason"] = log_dir.offline_reason
        try:
            space = log_dir.space()
            state["total_bytes"], state["usable_bytes"] = space.total_bytes, space.usable_bytes
        except OSError as exc:
            code = code or KAFKA_STORAGE_ERROR
            state["os_error"] = str(exc)
        if code:
            state["error"] = for_code(code).__name__
            state["error_code"] = code
        return state


def _body(body: Any, fields: dict[str, Any]) -> Any:
    if body is None:
        return fields
    if fields:
        raise TypeError("give either a body mapping or keyword fields, not both")
    return body
