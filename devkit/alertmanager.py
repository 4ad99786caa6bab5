"""Start the real Alertmanager (Debian 0.25) for tests, and record the webhooks it sends.

    with WebhookRecorder() as hook, alertmanager(tmp_path, hook.url) as am:
        am.fire({"alertname": "KafkaVolumeQuotaThrottle", "cluster": "c1"},
                {"throttle_factor": "0"})
        body = hook.wait_for(lambda b: b["status"] == "firing")
        am.resolve({"alertname": "KafkaVolumeQuotaThrottle", "cluster": "c1"})

`alertmanager(...)` writes a config with one route to `webhook_url` (group_wait 0s, group_interval
1s, so notifications arrive within about a second), optional bearer `credentials_file`, starts the
binary on a free loopback port with its own storage dir and no gossip, waits for /-/ready and always
stops it. `WebhookRecorder` is a tiny HTTP server that keeps every body and header it receives and
answers with a configurable status (Alertmanager retries 5xx).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
import threading
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from devkit.processes import ManagedProcess, http_ok, server_port, wait_until
from kvq.settings.config import CLUSTER_LABEL_DEFAULT

BINARY = "prometheus-alertmanager"


def find_binary() -> str:
    path = shutil.which(BINARY) or shutil.which("alertmanager")
    if path is None:
        raise RuntimeError(
            f"{BINARY} not found: install Debian's prometheus-alertmanager (make system-deps)"
        )
    return path


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


HEARTBEAT = "KafkaVolumeQuotaHeartbeat"
HEARTBEAT_GROUP_INTERVAL = "5s"
HEARTBEAT_REPEAT_INTERVAL = "10s"
"""How rules/alertmanager.example.yml and the chart route the heartbeat to the enforcer: re-sent
every 10 s, well within the enforcer's kvq.enforcer.failsafe.after (PT30S)."""


def config_text(
    webhook_url: str,
    credentials_file: str | Path | None = None,
    group_by: tuple[str, ...] = ("alertname", "cluster"),
    group_wait: str = "0s",
    group_interval: str = "1s",
    repeat_interval: str = "1h",
) -> str:
    """Alertmanager YAML (written as JSON, which YAML accepts) routing everything to one hook."""
    webhook: dict[str, Any] = {"url": webhook_url, "send_resolved": True}
    if credentials_file is not None:
        webhook["http_config"] = {"authorization": {"credentials_file": str(credentials_file)}}
    return json.dumps(
        {
            "route": {
                "receiver": "kvq-enforcer",
                "group_by": list(group_by),
                "group_wait": group_wait,
                "group_interval": group_interval,
                "repeat_interval": repeat_interval,
            },
            "receivers": [{"name": "kvq-enforcer", "webhook_configs": [webhook]}],
        },
        indent=2,
    )


class Alertmanager:
    """A running Alertmanager; `fire`/`resolve` post alerts through its v2 API."""

    def __init__(
        self, work_dir: Path, config: str, binary: str | None = None, port: int | None = None
    ) -> None:
        """`port`: reuse a port (a restart in place); default a free one."""
        self.work_dir = Path(work_dir)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.config_path = self.work_dir / "alertmanager.yml"
        self.config_path.write_text(config)
        self.port = port or server_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = ManagedProcess(
            [
                binary or find_binary(),
                f"--config.file={self.config_path}",
                f"--storage.path={self.work_dir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--cluster.listen-address=",
                "--log.level=debug",
            ],
            self.work_dir / "alertmanager.log",
        )
        try:
            wait_until(
                lambda: self._check_running() and http_ok(self.url + "/-/ready"),
                timeout=15,
                what=f"Alertmanager on {self.url}",
            )
        except BaseException:
            self.stop()
            raise

    def _check_running(self) -> bool:
        if not self.process.running:
            raise RuntimeError(f"Alertmanager exited:\n{self.process.log_text()[-2000:]}")
        return True

    def post_alerts(self, alerts: list[Mapping[str, Any]]) -> None:
        request = urllib.request.Request(
            self.url + "/api/v2/alerts",
            data=json.dumps(alerts).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=5) as response:
            if response.status != 200:
                raise RuntimeError(f"Alertmanager refused alerts: {response.status}")

    def fire(self, labels: Mapping[str, str], annotations: Mapping[str, str] | None = None) -> None:
        """A firing alert (ends in an hour unless resolved)."""
        now = datetime.now(UTC)
        self.post_alerts(
            [
                {
                    "labels": dict(labels),
                    "annotations": dict(annotations or {}),
                    "startsAt": rfc3339(now - timedelta(seconds=1)),
                    "endsAt": rfc3339(now + timedelta(hours=1)),
                }
            ]
        )

    def resolve(
        self, labels: Mapping[str, str], annotations: Mapping[str, str] | None = None
    ) -> None:
        """The same alert, ended now: Alertmanager notifies 'resolved' at the next group tick."""
        now = datetime.now(UTC)
        self.post_alerts(
            [
                {
                    "labels": dict(labels),
                    "annotations": dict(annotations or {}),
                    "startsAt": rfc3339(now - timedelta(seconds=2)),
                    "endsAt": rfc3339(now - timedelta(milliseconds=1)),
                }
            ]
        )

    def log_text(self) -> str:
        return self.process.log_text()

    def stop(self) -> None:
        self.process.stop()


@contextlib.contextmanager
def alertmanager(
    work_dir: Path,
    webhook_url: str,
    credentials_file: str | Path | None = None,
    **route: Any,
) -> Iterator[Alertmanager]:
    """A started Alertmanager routing every alert to `webhook_url`; stopped on exit."""
    manager = Alertmanager(work_dir, config_text(webhook_url, credentials_file, **route))
    try:
        yield manager
    finally:
        manager.stop()


class WebhookRecorder:
    """An HTTP server on a free loopback port that records every POST (JSON body + headers)."""

    def __init__(self, status: int = 200) -> None:
        self.status = status
        self.requests: list[tuple[dict[str, str], Any]] = []
        self._cond = threading.Condition()
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    body: Any = json.loads(raw)
                except ValueError:
                    body = raw
                with recorder._cond:
                    recorder.requests.append((dict(self.headers.items()), body))
                    recorder._cond.notify_all()
                self.send_response(recorder.status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *_args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/webhook"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def bodies(self) -> list[Any]:
        with self._cond:
            return [body for _, body in self.requests]

    def wait_for(self, predicate: Callable[[Any], bool], timeout: float = 20.0) -> Any:
        """The first recorded body matching `predicate` (waits for it)."""

        def found() -> Any:
            return next((b for b in self.bodies if predicate(b)), None)

        return wait_until(found, timeout=timeout, what="a matching webhook from Alertmanager")

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(5)

    def __enter__(self) -> WebhookRecorder:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# --- webhook bodies shaped exactly like Alertmanager 0.25's (captured, see devkit/data) ---------

DATA_DIR = Path(__file__).resolve().parent / "data"
THROTTLE_ALERT = "KafkaVolumeQuotaThrottle"


def captured_webhook(status: str = "firing") -> dict[str, Any]:
    """The body a real Alertmanager 0.25 posted (devkit/data/alertmanager_webhook_<status>.json)."""
    return json.loads((DATA_DIR / f"alertmanager_webhook_{status}.json").read_text())


_last_time = datetime.min.replace(tzinfo=UTC)
_time_lock = threading.Lock()


def fresh_time() -> datetime:
    """Now (microseconds, UTC), always later than the previous call's: each body built without
    explicit times is newer than the ones before, as Alertmanager's notifications are."""
    global _last_time
    with _time_lock:
        _last_time = max(datetime.now(UTC), _last_time + timedelta(microseconds=1))
        return _last_time


def throttle_webhook(
    alerts: list[tuple[str, float | None]] | None = None,
    *,
    cluster: str = "prod-eu-1",
    factor: float | None = 0.0,
    group_key: str | None = None,
    starts_at: datetime | None = None,
    ends_at: datetime | None = None,
    cluster_label: str = CLUSTER_LABEL_DEFAULT,
) -> dict[str, Any]:
    """A captured body rewritten for throttle alerts; `alerts` lists (cluster, factor or None for
    resolved). With no `alerts`: one alert for `cluster`, firing at `factor` (None: resolved).
    The cluster's name is in the label `cluster_label` (kvq.cluster.label; the alert is grouped by
    it, as the chart's AlertmanagerConfig groups).

    Times, as Alertmanager sends them: a firing alert has `startsAt` (default: now, so each body is
    a new episode) and `endsAt` 0001-01-01; a resolved one `endsAt` (default: now) and the
    episode's `startsAt` (default: its `endsAt`)."""
    items = alerts if alerts is not None else [(cluster, factor)]
    now = fresh_time()
    firing_template = captured_webhook("firing")
    resolved_template = captured_webhook("resolved")
    body = firing_template if any(f is not None for _, f in items) else resolved_template
    out_alerts = []
    for index, (name, value) in enumerate(items):
        template = (firing_template if value is not None else resolved_template)["alerts"][0]
        alert = json.loads(json.dumps(template))
        del alert["labels"]["cluster"]
        alert["labels"][cluster_label] = name
        if value is not None:
            alert["annotations"]["throttle_factor"] = format(value, "g")
            alert["startsAt"] = rfc3339(starts_at or now)
        else:
            alert["endsAt"] = rfc3339(ends_at or now)
            alert["startsAt"] = rfc3339(starts_at or ends_at or now)
        alert["fingerprint"] = hashlib.sha256(f"{name}/{index}".encode()).hexdigest()[:16]
        out_alerts.append(alert)
    body["alerts"] = out_alerts
    body["groupLabels"] = {"alertname": THROTTLE_ALERT, cluster_label: items[0][0]}
    body["commonLabels"] = {"alertname": THROTTLE_ALERT}
    body["groupKey"] = group_key or (
        f'{{}}:{{alertname="{THROTTLE_ALERT}", {cluster_label}="{items[0][0]}"}}'
    )
    return body
