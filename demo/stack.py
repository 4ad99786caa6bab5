"""DemoStack: the whole loop on loopback, every part a real process.

devcluster (3 brokers x 2 log dirs, virtual capacity) <- exporter (PT1S) <- Prometheus (1 s scrape
and rule evaluation, the project's rules) -> Alertmanager (group_wait 1s) -> enforcer (bearer token,
journal in the work dir) -> AlterClientQuotas on devcluster. Every process is stopped on exit.
With ``kafka="apache"`` a real Apache Kafka cluster (devkit/kafka_cluster.py: KRaft nodes whose log
dirs are tmpfs file systems of ``capacity_bytes``) takes devcluster's place; the exporter and the
enforcer reach it over SASL/PLAIN as its super user.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import requests

from devcluster.control_client import ControlClient
from devkit.alertmanager import (
    HEARTBEAT,
    HEARTBEAT_GROUP_INTERVAL,
    HEARTBEAT_REPEAT_INTERVAL,
    Alertmanager,
)
from devkit.loop_settings import LoopSettings, demo, iso_duration, prometheus_duration
from devkit.processes import (
    ManagedProcess,
    http_ok,
    server_port,
    start_dying_with_parent,
    wait_until,
)
from devkit.prometheus import run_prometheus
from enforcer.quota_client import KafkaQuotaClient
from kvq.kafka.quota_entity import ORIGINALS_USER, USER

if TYPE_CHECKING:  # imported when an Apache Kafka stack starts
    from devkit.kafka_cluster import KafkaCluster

ROOT = Path(__file__).resolve().parent.parent
P = "client.quota.callback.static."
CLUSTER = "demo"
ALERT = "KafkaVolumeQuotaThrottle"
ENFORCER_JOURNAL = "enforcer-journal.sqlite3"
"""The enforcer's journal, in the stack's work dir."""
KAFKA_BACKENDS = ("devcluster", "apache")
STACK_PARTS = {
    "devcluster": "devcluster, exporter, enforcer, Prometheus, Alertmanager",
    "apache": "Kafka (3 nodes), exporter, enforcer, Prometheus, Alertmanager",
}
"""What the timeline's first line says is up, per Kafka backend."""


class DemoStack:
    """Start with `with DemoStack(work_dir) as stack:`; URLs and clients are attributes."""

    DEFAULT_PRODUCE = 10_000_000
    """The enforcer's base `produce` (B/s per broker) unless one is given."""

    def __init__(
        self,
        work_dir: Path,
        brokers: int = 3,
        log_dirs_per_broker: int = 2,
        capacity_bytes: int = 100_000_000,
        min_available_ratio: float = 0.1,
        produce: int = DEFAULT_PRODUCE,
        loop: LoopSettings | None = None,
        sasl_users: dict[str, str] | None = None,
        validity: str = "PT30S",
        extra_properties: str = "",
        kafka: str = "devcluster",
        broker_properties: dict[str, str] | None = None,
        jmx_exporter: bool = False,
        enforcer_prometheus: bool = False,
        other_data: int = 0,
        kafka_scrape: float | None = None,
    ) -> None:
        if kafka not in KAFKA_BACKENDS:
            raise ValueError(f"kafka={kafka!r}: must be one of {', '.join(KAFKA_BACKENDS)}")
        self.kafka_backend = kafka
        self.kafka: KafkaCluster | None = None
        """The KafkaCluster when ``kafka="apache"``."""
        self.work_dir = Path(work_dir)
        self.brokers = brokers
        self.log_dirs_per_broker = log_dirs_per_broker
        self.capacity_bytes = capacity_bytes
        self.min_available_ratio = min_available_ratio
        self.produce = produce
        self.loop = loop or demo()
        """Poll, scrape, evaluation and Alertmanager timings (default: the demo's, all 1 s)."""
        self.sasl_users = sasl_users
        self.validity = validity
        self.extra_properties = extra_properties
        self.broker_properties = broker_properties or {}
        """Real Kafka's broker properties beyond demo.apache.BROKER_PROPERTIES."""
        self.jmx_exporter = jmx_exporter
        """Real Kafka: the JMX exporter agent in every broker, scraped by Prometheus (job kafka):
        the per-quota-entity rates of the enforcer's observed-rate references."""
        self.prometheus_port = server_port()
        self.exporter_port = server_port()
        self.enforcer_prometheus = enforcer_prometheus
        """Set kvq.enforcer.prometheus.url to this stack's Prometheus."""
        self.other_data = other_data
        """Bytes of other data on broker 0's first log dir, there before the exporter starts:
        a disk that already holds them (put there later, they would read as a fill rate)."""
        self.kafka_scrape = kafka_scrape
        """Seconds between Prometheus' scrapes of the brokers' JMX exporters (None: the loop's
        scrape interval, as every other job)."""
        self.token = secrets.token_urlsafe(24)
        self._stack = contextlib.ExitStack()
        self.processes: dict[str, ManagedProcess] = {}

    # --- lifecycle -------------------------------------------------------------------------

    def __enter__(self) -> DemoStack:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._stack.close()

    def start(self) -> None:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        if self.apache:
            self._start_apache()
        else:
            self._start_devcluster()
        if self.other_data:
            self._put_other_data()
        self.config_path = self._write_config()
        self.start_exporter()
        self.start_enforcer()
        self.start_alertmanager()
        self.prometheus = self._stack.enter_context(
            run_prometheus(
                self.work_dir / "prometheus",
                targets={
                    "kvq-exporter": [self.exporter_address],
                    "kvq-enforcer": [self.enforcer_address],
                    **self._kafka_targets(),
                },
                port=self.prometheus_port,
                rule_files=self.loop.rule_files(self.work_dir),
                interval=prometheus_duration(self.loop.scrape),
                job_intervals=self.job_intervals(),
                alertmanager_url=self.alertmanager.url,
                # resend firing alerts every second (default 1m): a restarted Alertmanager
                # learns them at once
                extra_args=["--rules.alert.resend-delay=1s"],
            )
        )

    def _kafka_targets(self) -> dict[str, list[str]]:
        """The brokers' JMX exporters as a Prometheus job, when they run one."""
        kafka: Any = self.kafka
        return {"kafka": kafka.metrics_targets} if kafka is not None and self.jmx_exporter else {}

    def job_intervals(self) -> dict[str, str]:
        """The brokers' job's own scrape interval, when it has one."""
        if self.kafka_scrape is None:
            return {}
        return {"kafka": prometheus_duration(self.kafka_scrape)}

    def _process(self, name: str, argv: list[str]) -> ManagedProcess:
        process = ManagedProcess(argv, self.work_dir / f"{name}.log", cwd=ROOT)
        self._stack.callback(process.stop)
        self.processes[name] = process
        return process

    def _start_devcluster(self) -> None:
        users_file = None
        if self.sasl_users is not None:
            users_file = self.work_dir / "sasl-users.json"
            users_file.write_text(json.dumps(self.sasl_users))
        self.bootstrap, self.control_url = self._stack.enter_context(
            devcluster_process(
                self.work_dir / "kafka-data",
                self.brokers,
                self.log_dirs_per_broker,
                self.capacity_bytes,
                sasl_users_file=users_file,
            )
        )
        self.control = ControlClient(self.control_url)
        self.admin_properties = {"bootstrap.servers": self.bootstrap}

    def _put_other_data(self) -> None:
        """A file of `other_data` bytes that is not Kafka's on broker 0's volume: devcluster
        writes it beside its log dir's partitions; on Kafka it is written into the tmpfs (Kafka
        loads only the log dir's directories, so it is left alone)."""
        if self.kafka is None:
            self.control.set_log_dir(0, 0, fill_bytes=self.other_data)
            return
        chunk = bytes(1 << 20)
        with open(self.kafka.log_dirs(0)[0] / "other-data.bin", "wb") as out:
            for start in range(0, self.other_data, len(chunk)):
                out.write(chunk[: min(len(chunk), self.other_data - start)])

    @property
    def apache(self) -> bool:
        return self.kafka_backend == "apache"

    def _start_apache(self) -> None:
        from demo.apache import BROKER_PROPERTIES
        from devkit.kafka_cluster import DEFAULT_USERS, KafkaCluster

        self.kafka = self._stack.enter_context(
            KafkaCluster(
                self.work_dir / "kafka",
                nodes=self.brokers,
                log_dirs_per_node=self.log_dirs_per_broker,
                log_dir_bytes=self.capacity_bytes,
                users={**DEFAULT_USERS, **(self.sasl_users or {})},
                broker_properties={**BROKER_PROPERTIES, **self.broker_properties},
                jmx_exporter=self.jmx_exporter,
            )
        )
        self.bootstrap = self.kafka.bootstrap
        self.admin_properties = self.kafka.admin_properties
        self._quota_client = KafkaQuotaClient(self.admin_properties)
        self._stack.callback(self._quota_client.close)

    @property
    def sasl_bootstrap(self) -> str:
        """The brokers' SASL_PLAINTEXT listeners (the stack needs ``sasl_users``)."""
        if self.kafka is not None:
            return self.kafka.sasl_bootstrap
        brokers = self.control.state()["brokers"]
        return ",".join(f"{b['host']}:{b['sasl_port']}" for b in brokers)

    def _write_config(self) -> Path:
        (self.work_dir / "webhook.token").write_text(self.token + "\n")
        path = self.work_dir / "kvq.properties"
        admin = "".join(f"{P}kafka.admin.{k}={v}\n" for k, v in self.admin_properties.items())
        path.touch(mode=0o600)  # the super user's password, when on Kafka
        path.write_text(
            f"{admin}"
            f"{P}storage.per.volume.limit.min.available.ratio={self.min_available_ratio}\n"
            f"{P}storage.check.interval={iso_duration(self.loop.poll)}\n"
            f"{P}throttle.factor.validity.duration={self.validity}\n"
            f"{P}throttle.factor.fallback=1.0\n"
            f"{P}produce={self.produce}\n"
            f"{P}excluded.principal.name.list=User:replicator\n"
            f"kvq.cluster.name={CLUSTER}\n"
            f"kvq.exporter.request.timeout=PT2S\n"
            f"kvq.exporter.archive.dir={self.work_dir / 'archive'}\n"
            f"kvq.enforcer.auth.bearer.token.file={self.work_dir / 'webhook.token'}\n"
            f"kvq.enforcer.journal={self.work_dir / ENFORCER_JOURNAL}\n"
            f"kvq.enforcer.failsafe.exporter.urls=http://127.0.0.1:{self.exporter_port}/metrics\n"
            + (
                f"kvq.enforcer.prometheus.url=http://127.0.0.1:{self.prometheus_port}\n"
                if self.enforcer_prometheus
                else ""
            )
            + f"{self.extra_properties}"
        )
        return path

    def start_exporter(self) -> None:
        self.exporter_address = self._start_app("exporter", self.exporter_port, "/ready")
        self.exporter_url = f"http://{self.exporter_address}"

    def start_enforcer(self) -> None:
        """Start the enforcer (again on the same port when it was started before)."""
        self.enforcer_port = getattr(self, "enforcer_port", None) or server_port()
        self.enforcer_address = self._start_app("enforcer", self.enforcer_port, "/healthz")
        self.enforcer_url = f"http://{self.enforcer_address}"

    def _start_app(self, name: str, port: int, ready_path: str) -> str:
        """Run `python -m <name>.cli` on this stack's config at 127.0.0.1:port until it is ready;
        returns its address."""
        address = f"127.0.0.1:{port}"
        argv = [sys.executable, "-m", f"{name}.cli", "--config", str(self.config_path)]
        self._process(name, [*argv, "--listen", address])
        url = f"http://{address}{ready_path}"
        wait_until(lambda: http_ok(url), timeout=30, what=name)
        return address

    def stop_enforcer(self) -> None:
        self.processes.pop("enforcer").stop()

    def start_alertmanager(self, fresh_storage: bool = False) -> None:
        """Start Alertmanager (again on the same port; `fresh_storage`: as a replaced instance
        that lost its notification log, so it notifies again)."""
        webhook = {
            "url": self.enforcer_url + "/webhook",
            "send_resolved": True,
            "http_config": {
                "authorization": {
                    "type": "Bearer",
                    "credentials_file": str(self.work_dir / "webhook.token"),
                }
            },
        }
        config = {
            "route": {
                "receiver": "nobody",
                "routes": [
                    {  # the heartbeat, as rules/alertmanager.example.yml routes it
                        "receiver": "kvq-enforcer",
                        "matchers": [f'alertname="{HEARTBEAT}"'],
                        "group_by": ["cluster"],
                        "group_wait": "0s",
                        "group_interval": HEARTBEAT_GROUP_INTERVAL,
                        "repeat_interval": HEARTBEAT_REPEAT_INTERVAL,
                    },
                    {
                        "receiver": "kvq-enforcer",
                        "matchers": [f'alertname="{ALERT}"'],
                        "group_by": ["cluster"],
                        "group_wait": prometheus_duration(self.loop.group_wait),
                        "group_interval": prometheus_duration(self.loop.group_interval),
                        "repeat_interval": prometheus_duration(self.loop.repeat_interval),
                    },
                ],
            },
            "receivers": [
                {"name": "nobody"},
                {"name": "kvq-enforcer", "webhook_configs": [webhook]},
            ],
        }
        port = getattr(self, "alertmanager_port", None)
        self._alertmanager_runs = getattr(self, "_alertmanager_runs", 0) + 1
        run_dir = f"alertmanager-{self._alertmanager_runs}" if fresh_storage else "alertmanager"
        self.alertmanager = Alertmanager(self.work_dir / run_dir, json.dumps(config), port=port)
        self.alertmanager_port = self.alertmanager.port
        self._stack.callback(self.alertmanager.stop)

    # --- what the scenario reads -----------------------------------------------------------

    def exporter_status(self) -> dict:
        return requests.get(self.exporter_url + "/status", timeout=5).json()

    def enforcer_status(self) -> dict:
        """The enforcer's /status (it needs the webhook's bearer token)."""
        headers = {"Authorization": f"Bearer {self.token}"}
        response = requests.get(self.enforcer_url + "/status", headers=headers, timeout=5)
        response.raise_for_status()
        return response.json()

    def quotas(self) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
        """Kafka's stored quotas (devcluster: through its control API; Kafka: DescribeClientQuotas),
        keyed by entity; without the enforcer's copy of the originals (user
        __kvq_enforcer_originals)."""
        if self.kafka is not None:
            return described_quotas(self._quota_client)
        return {
            tuple(sorted(entry["entity"].items())): entry["values"]
            for entry in self.control.quotas()
            if entry["entity"].get("user") != ORIGINALS_USER
        }

    def log_tails(self, lines: int = 40) -> str:
        """The last `lines` of each of the stack's logs (the apps', Alertmanager's, Prometheus'),
        for a failed test to say what the loop was doing."""
        logs = {name: process.log_path for name, process in self.processes.items()}
        for name in ("alertmanager", "prometheus"):
            server = getattr(self, name, None)
            if server is not None:
                logs[name] = server.process.log_path
        parts = []
        for name, path in logs.items():
            text = path.read_text(errors="replace") if path.is_file() else "(no log)"
            parts.append(f"--- {name} ({path})\n" + "\n".join(text.splitlines()[-lines:]))
        return "\n".join(parts)

    def urls(self) -> dict[str, str]:
        urls = {
            "Prometheus": self.prometheus.url,
            "Alertmanager": self.alertmanager.url,
            "exporter /status": self.exporter_url + "/status",
            "exporter /metrics": self.exporter_url + "/metrics",
            "enforcer /status": self.enforcer_url + "/status",
        }
        if self.kafka is not None:
            return {**urls, "Kafka (SASL)": self.kafka.sasl_bootstrap}
        return {**urls, "devcluster state": self.control_url + "/state"}


@contextlib.contextmanager
def devcluster_process(
    data_dir: Path,
    brokers: int,
    log_dirs_per_broker: int,
    capacity_bytes: int | None = None,
    sasl_users_file: Path | None = None,
) -> Iterator[tuple[str, str]]:
    """`kvq-devcluster` in its own process on free ports; yields (bootstrap, control URL)."""
    argv = [
        sys.executable, "-m", "devcluster.cli",
        "--brokers", str(brokers),
        "--log-dirs-per-broker", str(log_dirs_per_broker),
        "--data-dir", str(data_dir),
        "--base-port", "0", "--control-port", "0",
        *(["--capacity-bytes", str(capacity_bytes)] if capacity_bytes else []),
        *(["--sasl-users", str(sasl_users_file)] if sasl_users_file else []),
    ]  # fmt: skip
    process = start_dying_with_parent(
        argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=ROOT
    )
    assert process.stdout is not None, "stdout=PIPE"
    try:
        lines: dict[str, str] = {}
        for line in process.stdout:
            key, _, value = line.strip().partition("=")
            if key == "ready":
                break
            lines[key] = value
        else:
            raise RuntimeError("kvq-devcluster exited before it was ready")
        yield lines["bootstrap"], lines["control"]
    finally:
        _stop_popen(process)


def _stop_popen(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
    if process.stdout:
        process.stdout.close()


def described_quotas(client: KafkaQuotaClient) -> dict[tuple[tuple[str, str | None], ...], dict]:
    """DescribeClientQuotas as `DemoStack.quotas` keys it (entity pairs sorted by type name),
    without the enforcer's copy of the originals."""
    return {
        tuple(sorted(entity.components)): dict(values)
        for entity, values in client.describe().items()
        if (USER, ORIGINALS_USER) not in entity.components
    }
