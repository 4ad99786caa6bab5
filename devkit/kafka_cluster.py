"""A real Apache Kafka cluster on loopback: N KRaft nodes in combined mode, small real disks.

    with KafkaCluster(tmp_path, nodes=3, log_dir_bytes=64 << 20) as kafka:
        exporter_properties = kafka.admin_properties        # SASL/PLAIN as the super user
        kafka.log_dirs(0)                                   # node 0's two data log dirs (tmpfs)
        kafka.stop_node(2); kafka.start_node(2)             # a broker restarted

Every node is broker and controller (`process.roles=broker,controller`) with static
`controller.quorum.voters`, formatted by `kafka.tools.StorageTool` before its first start. Each
node keeps its metadata log in a plain directory apart from its data log dirs: Kafka halts a broker
whose metadata log dir fails, while a full data log dir only goes offline. As root each data log
dir is a tmpfs of `log_dir_bytes` (a real small file system: ENOSPC, sizes in DescribeLogDirs);
otherwise plain directories, with a warning. Listeners: `PLAIN` (PLAINTEXT, principal ANONYMOUS),
`SASL` (SASL_PLAINTEXT, PLAIN mechanism, the given users; brokers replicate over it as the super
user) and `CONTROLLER` (SASL too). With `scram=True` the SASL listener takes SCRAM-SHA-512 too,
every user's credential stored when the nodes are formatted (as Strimzi's User Operator stores a
KafkaUser's); with `tls=ServerTls(...)` a `TLS` listener (SSL, client certificates required, as
Strimzi's `tls` listener with `authentication: tls`; a client's principal is `User:CN=<its CN>`),
and with both a `SASL_TLS` listener (SASL_SSL, SCRAM-SHA-512: Strimzi's `scram-sha-512` on TLS);
with `oauth` (an `OAuthListener`) also `OAUTH` (SASL_PLAINTEXT, OAUTHBEARER mechanism, tokens
checked by Kafka's own OAuthBearerValidatorCallbackHandler against a JWKS endpoint, see
`OAuthListener`). The StandardAuthorizer is on with `User:admin` as super user and
`allow.everyone.if.no.acl.found=true`, so ACLs a test adds take effect.

Ready means every running node answers DescribeCluster listing every running node, unfenced. Each
node's logs (`server.log`: log4j2 WARN and up; `console-N.log`: the JVM's stdout/stderr of its Nth
start; `format.log`) stay under `work_dir/node-<id>/logs` after the cluster stops. Leaving the
context (or `stop()`) stops every JVM (SIGTERM to all at once, SIGKILL to the process group after
a timeout) and unmounts every tmpfs, also when the start failed.
"""

from __future__ import annotations

import base64
import contextlib
import logging
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devkit.kafka_class_archive import KafkaClassArchive
from devkit.kafka_dist import LOG4J2_CONFIG, REQUEST_LOG4J2_CONFIG, KafkaDist, fetch
from devkit.processes import ManagedProcess, server_port, start_dying_with_parent
from devkit.tls_certificates import Pki
from spark.class_archive import java_binary

log = logging.getLogger(__name__)

ADMIN = "admin"
DEFAULT_USERS = {ADMIN: "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
JVM_OPTIONS = ("-Xms64m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
"""Per node on a 2-core machine: a 512 MB heap (Kafka's script gives 1 GB), the serial collector
and C1 only, so three brokers leave CPU for the test that drives them."""
STORAGE_TOOL_OPTIONS = ("-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
CLASS_ARCHIVE_WRITE_SECONDS = 60.0
"""How much longer than `KafkaCluster.stop_timeout` a node writing the class archive may take to
exit: the JVM writes it after its shutdown, seconds on a loaded machine."""
SMALL_MACHINE = {
    "num.network.threads": "2",
    "num.io.threads": "2",
    "background.threads": "2",
    "num.recovery.threads.per.data.dir": "1",
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.num.partitions": "1",
    "transaction.state.log.min.isr": "1",
    "share.coordinator.state.topic.min.isr": "1",
    # The active controller's no-op record every 5 s, not every 500 ms: an idle 3-node cluster
    # (every node a voter) then takes 0.046 CPU-s a second, not 0.064. Nothing waits for them:
    # the leader completes its followers' parked fetches as soon as its high watermark moves.
    "metadata.max.idle.interval.ms": "5000",
}
"""Broker defaults sized for a few brokers on two cores; a caller's properties override them."""
JMX_EXPORTER_CONFIG = (
    Path(__file__).resolve().parent.parent / "deploy" / "jmx-exporter" / "kafka-quota-rates.yaml"
)
"""What operators add to their brokers' JMX exporter: the quota sensors' rates."""
STRIMZI_QUOTA_CALLBACK = "io.strimzi.kafka.quotas.StaticQuotaCallback"
STRIMZI_PREFIX = "client.quota.callback.static."
STRIMZI_ADMIN = f"{STRIMZI_PREFIX}kafka.admin."


OAUTH_VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
OAUTH_LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
ALLOWED_OAUTH_URLS = "org.apache.kafka.sasl.oauthbearer.allowed.urls"
"""The JVM system property listing every URL Kafka's OAuth code may fetch (Kafka 4.0 on: none by
default, BrokerSecurityConfigs.ALLOWED_SASL_OAUTHBEARER_URLS_CONFIG)."""

NodeProperties = Callable[["KafkaCluster", "KafkaNode"], Mapping[str, str]]
SCRAM_MECHANISM = "SCRAM-SHA-512"
"""The mechanism of Strimzi's `scram-sha-512` KafkaUsers."""


@dataclass(frozen=True)
class ServerTls:
    """The TLS listener's certificate and key (PEM text: the broker's chain, its unencrypted
    PKCS8 key) and the CA certificates its clients' certificates must chain to."""

    certificate_chain: str
    key: str
    client_cas: str


@dataclass(frozen=True)
class OAuthListener:
    """An `OAUTH` listener on every node: SASL/OAUTHBEARER (over TLS with `tls`), JWTs validated
    by Kafka itself.

    The principal is the token's `sub` claim. `reauth_ms` makes the brokers ask clients on this
    listener to authenticate again at least that often (connections.max.reauth.ms), and never
    later than their token expires: a client whose token provider does not refresh is cut off.
    """

    jwks_url: str
    reauth_ms: int | None = None
    clock_skew_seconds: int = 0
    """How far past `exp` a token is still accepted (Kafka's default is 30)."""
    tls: Pki | None = None
    """SASL_SSL with the PKI's server certificate (for 127.0.0.1) instead of SASL_PLAINTEXT."""

    @property
    def protocol(self) -> str:
        return "SASL_PLAINTEXT" if self.tls is None else "SASL_SSL"

    def broker_properties(self) -> dict[str, str]:
        prefix = "listener.name.oauth.oauthbearer."
        properties = self._tls_properties()
        properties |= {
            "listener.name.oauth.sasl.enabled.mechanisms": "OAUTHBEARER",
            f"{prefix}sasl.jaas.config": f"{OAUTH_LOGIN_MODULE} required ;",
            f"{prefix}sasl.server.callback.handler.class": OAUTH_VALIDATOR,
            f"{prefix}sasl.oauthbearer.jwks.endpoint.url": self.jwks_url,
            f"{prefix}sasl.oauthbearer.clock.skew.seconds": str(self.clock_skew_seconds),
        }
        if self.reauth_ms is not None:
            properties[f"{prefix}connections.max.reauth.ms"] = str(self.reauth_ms)
        return properties

    def _tls_properties(self) -> dict[str, str]:
        """The listener's PEM keystore: the server's key and certificate in one file."""
        if self.tls is None:
            return {}
        keystore = self.tls.server.key.with_name("oauth-listener-keystore.pem")
        keystore.write_bytes(self.tls.server.key.read_bytes() + self.tls.server.cert.read_bytes())
        return {
            "listener.name.oauth.ssl.keystore.type": "PEM",
            "listener.name.oauth.ssl.keystore.location": str(keystore),
        }

    @property
    def jvm_options(self) -> list[str]:
        return [f"-D{ALLOWED_OAUTH_URLS}={self.jwks_url}"]


class KafkaClusterError(RuntimeError):
    """The cluster could not be started; the message names the node and where its logs are."""


@dataclass
class KafkaNode:
    """One combined broker+controller: its ports, its directories and its JVM."""

    node_id: int
    home: Path
    plain_port: int
    sasl_port: int
    controller_port: int
    log_dirs: tuple[Path, ...]
    process: ManagedProcess | None = None
    starts: int = 0
    wanted: bool = False
    """Started and not stopped on purpose: its JVM should be running."""
    metrics_port: int | None = None
    """The JMX exporter agent's port (KafkaCluster(jmx_exporter=True)), else None."""
    tls_port: int | None = None
    """The TLS listener's port (KafkaCluster(tls=...)), else None."""
    sasl_tls_port: int | None = None
    """The SASL_TLS listener's port (KafkaCluster(tls=..., scram=True)), else None."""
    oauth_port: int | None = None
    """The OAUTH listener's port (KafkaCluster(oauth=...)), else None."""
    proxied_port: int | None = None
    """The PROXIED listener's own port (KafkaCluster(proxied=True)), else None."""
    proxy_port: int | None = None
    """The port the PROXIED listener advertises, where a proxy forwards to `proxied_port`."""
    writes_class_archive: tuple[KafkaClassArchive, Path] | None = None
    """The class archive its JVM writes as it exits, and the file it writes it to; else None."""

    @property
    def metadata_dir(self) -> Path:
        return self.home / "metadata"

    @property
    def logs_dir(self) -> Path:
        return self.home / "logs"

    @property
    def config_path(self) -> Path:
        return self.home / "server.properties"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.running

    def log_tail(self, lines: int = 20) -> str:
        """The last lines of this node's newest console log and of its server.log."""
        parts = []
        for path in (self.logs_dir / f"console-{self.starts}.log", self.logs_dir / "server.log"):
            if path.is_file():
                text = path.read_text(errors="replace").splitlines()[-lines:]
                parts.append(f"--- {path}\n" + "\n".join(text))
        return "\n".join(parts)


@dataclass
class KafkaCluster:
    """An N-node KRaft cluster of real Kafka brokers; see the module docstring."""

    work_dir: Path
    nodes: int = 1
    log_dirs_per_node: int = 2
    log_dir_bytes: int | None = 64 << 20
    users: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_USERS))
    broker_properties: Mapping[str, str] | NodeProperties = field(default_factory=dict)
    """Added to (and overriding) every node's server.properties; a function of the cluster and
    the node when a value needs the ports, which are chosen at start (the Strimzi plugin's
    `client.quota.callback.static.kafka.admin.bootstrap.servers`)."""
    jvm_options: Sequence[str] = JVM_OPTIONS
    class_archive: bool = True
    """Start the JVMs from the distribution's class archive, the first node writing it when it is
    missing (devkit.kafka_class_archive); False: load every class from the jars."""
    host: str = "127.0.0.1"
    ready_timeout: float = 240.0
    stop_timeout: float = 20.0
    last_node_seconds: float | None = 1.0
    """How long `stop` lets the last node left shut down once the others have exited, before it
    kills it (None: up to `stop_timeout`): its Raft client waits 5 s for voters that are gone."""
    dist: KafkaDist | None = None
    jmx_exporter: bool = False
    """Start every broker with the Prometheus JMX exporter agent and JMX_EXPORTER_CONFIG (the
    per-quota-entity rates); `metrics_url(node_id)` is where Prometheus scrapes it."""
    scram: bool = False
    """SCRAM-SHA-512 on the SASL listener too, with a credential for every user."""
    tls: ServerTls | None = None
    """A TLS listener with client authentication (mTLS), `tls_bootstrap`."""
    oauth: OAuthListener | None = None
    """Add the `OAUTH` listener (SASL/OAUTHBEARER) to every node; `oauth_bootstrap` names it."""
    request_log: bool = False
    """Log every request each node completes (kafka.request.logger) to its `requests.log`."""
    proxied: bool = False
    """Add a `PROXIED` listener (SASL_PLAINTEXT, as `SASL`) that advertises a proxy port per node
    (`proxy_routes`: what devkit.tcp_proxy.TcpProxy forwards), so that a client bootstrapping
    at `proxied_bootstrap` makes every connection through the proxy."""
    cluster_id: str = field(default_factory=lambda: new_cluster_id())
    node_list: list[KafkaNode] = field(default_factory=list, init=False)
    mounts: list[Path] = field(default_factory=list, init=False)
    real_file_systems: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        if self.nodes < 1 or self.log_dirs_per_node < 1:
            raise ValueError(
                f"nodes={self.nodes}, log_dirs_per_node={self.log_dirs_per_node}: both must be >= 1"
            )
        if ADMIN not in self.users:
            raise ValueError(f"users must include the super user {ADMIN!r}")
        self.work_dir = Path(self.work_dir)

    # ---- what tests use -------------------------------------------------------------------------

    @property
    def node_ids(self) -> list[int]:
        return [node.node_id for node in self.node_list]

    @property
    def bootstrap(self) -> str:
        """`host:port,...` of every node's PLAINTEXT listener (principal User:ANONYMOUS)."""
        return ",".join(f"{self.host}:{n.plain_port}" for n in self.node_list)

    @property
    def sasl_bootstrap(self) -> str:
        """`host:port,...` of every node's SASL_PLAINTEXT (PLAIN) listener."""
        return ",".join(f"{self.host}:{n.sasl_port}" for n in self.node_list)

    @property
    def tls_bootstrap(self) -> str:
        """`host:port,...` of every node's TLS listener (needs `tls`)."""
        if self.tls is None:
            raise KafkaClusterError("this cluster has no TLS listener (tls=None)")
        return ",".join(f"{self.host}:{n.tls_port}" for n in self.node_list)

    @property
    def sasl_tls_bootstrap(self) -> str:
        """`host:port,...` of every node's SASL_TLS listener (needs `tls` and `scram`)."""
        if self.tls is None or not self.scram:
            raise KafkaClusterError("this cluster has no SASL_TLS listener (needs tls and scram)")
        return ",".join(f"{self.host}:{n.sasl_tls_port}" for n in self.node_list)

    @property
    def oauth_bootstrap(self) -> str:
        """`host:port,...` of every node's OAUTH listener (needs `oauth`)."""
        if self.oauth is None:
            raise KafkaClusterError("this cluster has no OAUTH listener (oauth=None)")
        return ",".join(f"{self.host}:{n.oauth_port}" for n in self.node_list)

    @property
    def proxied_bootstrap(self) -> str:
        """`host:port,...` of every node's PROXIED listener as advertised: the proxy's ports."""
        return ",".join(f"{self.host}:{port}" for port in self.proxy_routes)

    @property
    def proxy_routes(self) -> dict[int, int]:
        """Each node's advertised PROXIED port -> its listener's own port (needs `proxied`)."""
        if not self.proxied:
            raise KafkaClusterError("this cluster has no PROXIED listener (proxied=False)")
        return {
            n.proxy_port: n.proxied_port
            for n in self.node_list
            if n.proxy_port is not None and n.proxied_port is not None
        }

    def client_properties(self, user: str = ADMIN, proxied: bool = False) -> dict[str, str]:
        """Java-style client properties (kvq's `kafka.admin.*` names) for `user` over SASL;
        through the proxy (the PROXIED listener) if `proxied`."""
        return {
            "bootstrap.servers": self.proxied_bootstrap if proxied else self.sasl_bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": user,
            "sasl.password": self.users[user],
        }

    @property
    def admin_properties(self) -> dict[str, str]:
        """What the exporter and the enforcer need: the super user over SASL."""
        return self.client_properties(ADMIN)

    def node(self, node_id: int) -> KafkaNode:
        for node in self.node_list:
            if node.node_id == node_id:
                return node
        raise KeyError(f"no node {node_id}: nodes are {self.node_ids}")

    def metrics_url(self, node_id: int) -> str:
        """The node's JMX exporter endpoint (needs `jmx_exporter=True`)."""
        port = self.node(node_id).metrics_port
        if port is None:
            raise KafkaClusterError(f"node {node_id} runs no JMX exporter (jmx_exporter=False)")
        return f"http://{self.host}:{port}/metrics"

    @property
    def metrics_targets(self) -> list[str]:
        """`host:port` of every node's JMX exporter (empty without `jmx_exporter`)."""
        return [f"{self.host}:{n.metrics_port}" for n in self.node_list if n.metrics_port]

    def log_dirs(self, node_id: int) -> tuple[Path, ...]:
        """The node's data log dirs (its `log.dirs`, each a tmpfs mount point when mounted)."""
        return self.node(node_id).log_dirs

    # ---- lifecycle ------------------------------------------------------------------------------

    def start(self) -> KafkaCluster:
        """Prepare, format and start every node, then wait until the cluster is ready."""
        if self.node_list:
            raise KafkaClusterError(f"this cluster in {self.work_dir} was started before")
        try:
            self.dist = self.dist or fetch()
            self._lay_out()
            self._format()
            for node in self.node_list:
                self._launch(node)
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop every JVM (all at once, SIGKILL after `stop_timeout`) and unmount every tmpfs.
        A node writing the class archive is stopped first, alone: nodes stopping together lose
        the controllers' quorum, and a broker's controlled shutdown then waits for it until it
        is killed, before its JVM could write the archive."""
        for node in self.node_list:
            node.wanted = False
        for node in self.node_list:
            if node.writes_class_archive is not None and node.process is not None:
                node.process.stop(timeout=self.stop_timeout + CLASS_ARCHIVE_WRITE_SECONDS)
                self._publish_class_archive(node)
        running = [n.process for n in self.node_list if n.process is not None]
        for process in running:
            process.signal(signal.SIGTERM)
        self._await_exits(running)
        for process in running:
            process.stop(timeout=0.1)  # SIGKILL whatever is left
        for node in self.node_list:
            self._publish_class_archive(node)
        self._unmount_all()

    def _await_exits(self, processes: list[ManagedProcess]) -> None:
        """Wait until the stopped `processes` have exited, at most `stop_timeout`, and the
        last one left at most `last_node_seconds` once the others have exited: it is the last
        controller, whose Raft client waits 5 s (KafkaRaftClient's graceful shutdown, not
        configurable) for voters that are gone to take over, and the cluster is not started
        again (bench/kafka_start.py measures the stop both ways)."""
        deadline = time.monotonic() + self.stop_timeout
        alone_since: float | None = None
        while (alive := sum(p.running for p in processes)) and time.monotonic() < deadline:
            if alive == 1 and len(processes) > 1 and self.last_node_seconds is not None:
                alone_since = alone_since or time.monotonic()
                if time.monotonic() - alone_since >= self.last_node_seconds:
                    return
            time.sleep(0.05)  # polling: waiting for the first of several processes has no call

    def stop_node(self, node_id: int) -> None:
        """Stop one node (controlled shutdown on SIGTERM; SIGKILL after `stop_timeout`, and
        the time to write the class archive if it writes it)."""
        node = self.node(node_id)
        node.wanted = False
        if node.process is not None:
            writing = node.writes_class_archive is not None
            node.process.stop(
                timeout=self.stop_timeout + (CLASS_ARCHIVE_WRITE_SECONDS if writing else 0.0)
            )
        self._publish_class_archive(node)

    def start_node(self, node_id: int) -> None:
        """Start a stopped node again with its data, and wait until every running node sees it."""
        node = self.node(node_id)
        if node.running:
            raise KafkaClusterError(f"node {node_id} is already running")
        self._launch(node)
        self.wait_ready()

    def wait_ready(self, timeout: float | None = None) -> None:
        """Until every node that should run answers DescribeCluster listing exactly those nodes."""
        from kvq.kafka.admin_session import KafkaAdminSession

        patience = self.ready_timeout if timeout is None else timeout
        deadline = time.monotonic() + patience
        session = KafkaAdminSession(self.admin_properties, "kvq-devkit-ready", 2000)
        try:
            while True:
                self._check_alive()
                expected = sorted(n.node_id for n in self.node_list if n.wanted)
                gap = self._describe_cluster_gap(session, expected)
                if gap is None:
                    return
                if time.monotonic() > deadline:
                    raise KafkaClusterError(
                        f"Kafka nodes {expected} not ready after {patience:.0f} s ({gap}); "
                        f"logs in {self.work_dir}/node-*/logs"
                    )
                time.sleep(0.2)
        finally:
            session.close()

    def __enter__(self) -> KafkaCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- steps ----------------------------------------------------------------------------------

    def _lay_out(self) -> None:
        """Ports, directories (tmpfs log dirs as root) and server.properties of every node."""
        self.real_file_systems = self.log_dir_bytes is not None and os.geteuid() == 0
        if self.log_dir_bytes is not None and not self.real_file_systems:
            log.warning(
                "not root: Kafka's log dirs are plain directories, not %d-byte tmpfs",
                self.log_dir_bytes,
            )
        ports: list[int] = []

        def port() -> int:
            ports.append(server_port(self.host, avoid=ports))
            return ports[-1]

        for node_id in range(self.nodes):
            home = self.work_dir / f"node-{node_id}"
            log_dirs = tuple(home / f"data-{index}" for index in range(self.log_dirs_per_node))
            node = KafkaNode(node_id, home, port(), port(), port(), log_dirs)
            if self.jmx_exporter:
                node.metrics_port = port()
            if self.tls is not None:
                node.tls_port = port()
                if self.scram:
                    node.sasl_tls_port = port()
            if self.oauth is not None:
                node.oauth_port = port()
            if self.proxied:
                node.proxied_port, node.proxy_port = port(), port()
            self.node_list.append(node)
            for path in (node.metadata_dir, node.logs_dir, *log_dirs):
                path.mkdir(parents=True, exist_ok=True)
            if self.real_file_systems:
                for path in log_dirs:
                    self._mount_tmpfs(path)
        for node in self.node_list:
            write_properties(node.config_path, self._server_properties(node))

    def _server_properties(self, node: KafkaNode) -> dict[str, str]:
        host = self.host
        jaas = plain_jaas(ADMIN, self.users)
        replication = str(min(3, self.nodes))
        voters = ",".join(f"{n.node_id}@{host}:{n.controller_port}" for n in self.node_list)
        extra = self.broker_properties
        if callable(extra):
            extra = extra(self, node)
        listeners = {
            "PLAIN": ("PLAINTEXT", node.plain_port),
            "SASL": ("SASL_PLAINTEXT", node.sasl_port),
        }
        if node.tls_port is not None:
            listeners["TLS"] = ("SSL", node.tls_port)
        if node.sasl_tls_port is not None:
            listeners["SASL_TLS"] = ("SASL_SSL", node.sasl_tls_port)
        oauth: dict[str, str] = {}
        if self.oauth is not None and node.oauth_port is not None:
            listeners["OAUTH"] = (self.oauth.protocol, node.oauth_port)
            oauth = self.oauth.broker_properties()
        advertise: dict[str, int | None] = {}
        proxied: dict[str, str] = {}
        if node.proxied_port is not None:
            listeners["PROXIED"] = ("SASL_PLAINTEXT", node.proxied_port)
            advertise["PROXIED"] = node.proxy_port
            proxied["listener.name.proxied.plain.sasl.jaas.config"] = jaas
        own = ",".join(f"{name}://{host}:{port}" for name, (_, port) in listeners.items())
        advertised = ",".join(
            f"{name}://{host}:{advertise.get(name, port)}" for name, (_, port) in listeners.items()
        )
        protocols = ",".join(f"{name}:{protocol}" for name, (protocol, _) in listeners.items())
        return {
            "process.roles": "broker,controller",
            "node.id": str(node.node_id),
            "controller.quorum.voters": voters,
            "controller.listener.names": "CONTROLLER",
            "listeners": f"{own},CONTROLLER://{host}:{node.controller_port}",
            "advertised.listeners": advertised,
            "listener.security.protocol.map": f"{protocols},CONTROLLER:SASL_PLAINTEXT",
            "inter.broker.listener.name": "SASL",
            "sasl.enabled.mechanisms": "PLAIN",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "sasl.mechanism.controller.protocol": "PLAIN",
            "listener.name.sasl.plain.sasl.jaas.config": jaas,
            "listener.name.controller.plain.sasl.jaas.config": jaas,
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": f"User:{ADMIN}",
            "allow.everyone.if.no.acl.found": "true",
            "metadata.log.dir": str(node.metadata_dir),
            "log.dirs": ",".join(str(path) for path in node.log_dirs),
            "offsets.topic.replication.factor": replication,
            "transaction.state.log.replication.factor": replication,
            "share.coordinator.state.topic.replication.factor": replication,
            **SMALL_MACHINE,
            **self._scram_properties(),
            **self._tls_properties(),
            **oauth,
            **proxied,
            **extra,
        }

    def _scram_properties(self) -> dict[str, str]:
        if not self.scram:
            return {}
        login = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
        scram = SCRAM_MECHANISM.lower()
        properties = {
            "listener.name.sasl.sasl.enabled.mechanisms": f"PLAIN,{SCRAM_MECHANISM}",
            f"listener.name.sasl.{scram}.sasl.jaas.config": login,
        }
        if self.tls is not None:
            properties |= {
                "listener.name.sasl_tls.sasl.enabled.mechanisms": SCRAM_MECHANISM,
                f"listener.name.sasl_tls.{scram}.sasl.jaas.config": login,
            }
        return properties

    def _tls_properties(self) -> dict[str, str]:
        if self.tls is None:
            return {}
        server = {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.certificate.chain": self.tls.certificate_chain,
            "ssl.keystore.key": self.tls.key,
        }
        properties = {
            "listener.name.tls.ssl.client.auth": "required",
            "listener.name.tls.ssl.truststore.type": "PEM",
            "listener.name.tls.ssl.truststore.certificates": self.tls.client_cas,
            **{f"listener.name.tls.{key}": value for key, value in server.items()},
        }
        if self.scram:
            properties |= {f"listener.name.sasl_tls.{key}": value for key, value in server.items()}
        return properties

    def _format(self) -> None:
        """`StorageTool format` for every node, the JVMs side by side (static voters: no
        --standalone)."""
        assert self.dist is not None
        running: list[tuple[KafkaNode, subprocess.Popen, Any]] = []
        try:
            for node in self.node_list:
                scram = [
                    f"--add-scram={SCRAM_MECHANISM}=[name={user},password={password}]"
                    for user, password in self.users.items()
                    if self.scram
                ]
                argv = self.dist.java_argv(
                    "kafka.tools.StorageTool",
                    ["format", "-t", self.cluster_id, "-c", str(node.config_path), *scram],
                    node.logs_dir,
                    list(STORAGE_TOOL_OPTIONS),
                    class_archive=self.class_archive,
                )
                output = open(node.logs_dir / "format.log", "wb")  # noqa: SIM115 - closed below
                process = start_dying_with_parent(
                    argv, stdout=output, stderr=subprocess.STDOUT, start_new_session=True
                )
                running.append((node, process, output))
            for node, process, _ in running:
                if process.wait(timeout=self.ready_timeout) != 0:
                    text = (node.logs_dir / "format.log").read_text(errors="replace")
                    raise KafkaClusterError(
                        f"formatting node {node.node_id} failed (exit {process.returncode}; "
                        f"{node.logs_dir}/format.log): {_last_line(text)}"
                    )
        finally:
            for _, process, output in running:
                if process.poll() is None:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
                output.close()

    def _launch(self, node: KafkaNode) -> None:
        assert self.dist is not None
        node.starts += 1
        options = [*self.jvm_options, *self._class_archive_writing(node)]
        if self.oauth is not None:
            options += self.oauth.jvm_options
        if node.metrics_port is not None:
            agent = f"{self.dist.jmx_agent}={self.host}:{node.metrics_port}:{JMX_EXPORTER_CONFIG}"
            options.append(f"-javaagent:{agent}")
        log_config = (
            f"{LOG4J2_CONFIG},{REQUEST_LOG4J2_CONFIG}" if self.request_log else LOG4J2_CONFIG
        )
        argv = self.dist.java_argv(
            "kafka.Kafka",
            [str(node.config_path)],
            node.logs_dir,
            options,
            log_config,
            class_archive=self.class_archive,
        )
        node.process = ManagedProcess(argv, node.logs_dir / f"console-{node.starts}.log")
        node.wanted = True

    def _class_archive_writing(self, node: KafkaNode) -> list[str]:
        """The options that have `node` write the distribution's class archive as it exits, when
        the archive is missing, no other node of this cluster writes it and `node` runs no Java
        agent (the JMX exporter): the JVM refuses to start when asked to archive classes with an
        agent loaded ("Must enable AllowArchivingWithJavaAgent"), a diagnostic option meant for
        testing. A cluster of agents only leaves the archive to the next cluster without."""
        assert self.dist is not None
        java = java_binary()
        writer = any(n.writes_class_archive for n in self.node_list)
        if not self.class_archive or java is None or writer or node.metrics_port is not None:
            return []
        archive = self.dist.class_archive(java)
        pending = archive.pending()
        if pending is None:
            return []
        node.writes_class_archive = (archive, pending)
        return archive.writing(pending)

    def _publish_class_archive(self, node: KafkaNode) -> None:
        """Once `node`'s JVM has exited: the class archive it wrote, if complete."""
        if node.writes_class_archive is not None and not node.running:
            archive, pending = node.writes_class_archive
            node.writes_class_archive = None
            archive.publish(pending)

    def _check_alive(self) -> None:
        """Fail at once, with the node's log, when a node's JVM has exited unasked."""
        for node in self.node_list:
            if node.wanted and node.process is not None and not node.running:
                raise KafkaClusterError(
                    f"Kafka node {node.node_id} exited with {node.process.proc.returncode}; "
                    f"logs in {node.logs_dir}\n{node.log_tail()}"
                )

    def _describe_cluster_gap(self, session: Any, expected: list[int]) -> str | None:
        """None when every expected node lists exactly the expected nodes; else what is missing."""
        from kafka.protocol.admin import DescribeClusterRequest

        from kvq.kafka.admin_session import KafkaUnavailable, describe_error

        try:
            answers = session.send_to_each(
                expected,
                lambda version: DescribeClusterRequest(version=version),
                DescribeClusterRequest,
                3.0,
            )
        except KafkaUnavailable as exc:
            return str(exc)
        for node_id in expected:
            answer = answers.get(node_id)
            if isinstance(answer, Exception):
                return f"node {node_id}: {describe_error(answer)}"
            if answer.error_code != 0:
                return f"node {node_id}: DescribeCluster error {answer.error_code}"
            listed = sorted(broker.broker_id for broker in answer.brokers)
            if listed != expected:
                return f"node {node_id} lists brokers {listed}"
        return None

    def _mount_tmpfs(self, path: Path) -> None:
        self.mounts.append(path)
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={self.log_dir_bytes}", "tmpfs", str(path)],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            self.mounts.pop()
            raise KafkaClusterError(f"mount -t tmpfs at {path} failed: {done.stderr.strip()}")

    def _unmount_all(self) -> None:
        while self.mounts:
            path = self.mounts.pop()
            done = subprocess.run(["umount", str(path)], capture_output=True, check=False)
            if done.returncode != 0:  # still busy: detach now, freed when the last user closes
                subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)


def strimzi_quota_callback(static: Mapping[str, str]) -> NodeProperties:
    """Broker properties that make the Strimzi plugin every node's quota callback, with `static`
    (keys after `client.quota.callback.static.`, e.g. `produce`, `storage.check-interval`); its
    admin client reads log dirs through the node's own PLAINTEXT listener."""

    def properties(cluster: KafkaCluster, node: KafkaNode) -> dict[str, str]:
        return {
            "client.quota.callback.class": STRIMZI_QUOTA_CALLBACK,
            f"{STRIMZI_PREFIX}kafka.admin.bootstrap.servers": f"{cluster.host}:{node.plain_port}",
            **{f"{STRIMZI_PREFIX}{key}": value for key, value in static.items()},
        }

    return properties


def kafka_admin_settings(admin_properties: Mapping[str, str]) -> dict[str, str]:
    """The `client.quota.callback.static.kafka.admin.*` settings (exporter and enforcer) for a
    cluster's admin properties: SASL/PLAIN as a Strimzi user writes it, a JAAS line."""
    settings = {"bootstrap.servers": admin_properties["bootstrap.servers"]}
    if "sasl.username" in admin_properties:
        user, password = admin_properties["sasl.username"], admin_properties["sasl.password"]
        settings |= {
            "security.protocol": admin_properties["security.protocol"],
            "sasl.mechanism": admin_properties["sasl.mechanism"],
            "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule "
            f'required username="{user}" password="{password}";',
        }
    return {f"{STRIMZI_ADMIN}{k}": v for k, v in settings.items()}


def new_cluster_id() -> str:
    """A Kafka cluster id: 16 random bytes, URL-safe base64 without padding. Like Kafka's
    `Uuid.randomUuid()`, never one starting with '-', which command lines take for an option."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not text.startswith("-"):
            return text


def plain_jaas(login_user: str, users: Mapping[str, str]) -> str:
    """A PlainLoginModule JAAS entry: the broker logs in as `login_user` and accepts `users`."""
    accepted = " ".join(f'user_{name}="{_jaas_quote(pw)}"' for name, pw in users.items())
    return (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="{login_user}" password="{_jaas_quote(users[login_user])}" {accepted};'
    )


def _jaas_quote(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def write_properties(path: Path, properties: Mapping[str, str]) -> None:
    """A Java properties file (backslashes escaped), written whole or not at all."""
    lines = [f"{key}={_escaped(value)}" for key, value in properties.items()]
    partial = path.with_name(path.name + ".tmp")
    partial.write_text("\n".join(lines) + "\n")
    partial.replace(path)


def _escaped(value: str) -> str:
    """A value as a properties file holds it: backslashes doubled, line breaks as `\\n` (PEM)."""
    return value.replace("\\", "\\\\").replace("\n", "\\n")


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1].strip() if lines else "no output"
