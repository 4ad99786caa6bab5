"""Run the real Prometheus (Debian's /usr/bin/prometheus, 2.42) for a test and query it.

    from devkit.prometheus import run_prometheus

    with run_prometheus(tmp_path, targets={"kvq-exporter": ["127.0.0.1:9898"]},
                        rule_files=[RULES], alertmanager_url=am_url) as prom:
        prom.wait_for(lambda: prom.query("up") , what="first scrape")
        prom.query('kafka_volume_quota_throttle_factor')      # -> list of {"metric", "value"}
        prom.alerts()                                         # -> list of active alerts

`run_prometheus` writes a config (one scrape job per `targets` entry, rule files, scrape and
evaluation interval, optional Alertmanager), starts Prometheus on a free loopback port with its own
TSDB dir (or `storage_path`, e.g. backfilled blocks; pass a long `retention` for old data), waits
for /-/ready and always stops it. Its log is `tmp_dir/prometheus.log`. `write_config` alone gives
the YAML for `promtool check config`.
"""

from __future__ import annotations

import contextlib
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from devkit.processes import ManagedProcess, http_ok, server_port, wait_until

PROMETHEUS = "/usr/bin/prometheus"
PROMTOOL = "/usr/bin/promtool"


class PrometheusError(RuntimeError):
    """The HTTP API answered with an error (bad query, not ready ...)."""


def write_config(
    path: Path,
    targets: Mapping[str, Sequence[str]],
    rule_files: Sequence[Path] = (),
    interval: str = "1s",
    alertmanager_url: str | None = None,
    job_intervals: Mapping[str, str] | None = None,
) -> Path:
    """Write prometheus.yml: a scrape job per `targets` item (job -> ["host:port", ...]), each
    scraped every `interval` unless `job_intervals` gives it one of its own."""
    config: dict[str, Any] = {
        "global": {"scrape_interval": interval, "evaluation_interval": interval},
        "rule_files": [str(Path(f).resolve()) for f in rule_files],
        "scrape_configs": [
            scrape_job(job, hosts, (job_intervals or {}).get(job, interval))
            for job, hosts in targets.items()
        ],
    }
    if alertmanager_url:
        url = urllib.parse.urlsplit(alertmanager_url)
        config["alerting"] = {
            "alertmanagers": [
                {
                    "scheme": url.scheme or "http",
                    "path_prefix": url.path or "/",
                    "static_configs": [{"targets": [url.netloc]}],
                }
            ]
        }
    Path(path).write_text(yaml.safe_dump(config, sort_keys=False))
    return Path(path)


def scrape_job(job: str, hosts: Sequence[str], interval: str) -> dict[str, Any]:
    """One scrape job, scraped every `interval`, each scrape given as long (its timeout may not
    be longer)."""
    return {
        "job_name": job,
        "scrape_interval": interval,
        "scrape_timeout": interval,
        "static_configs": [{"targets": list(hosts)}],
    }


class Prometheus:
    """A running Prometheus: its URL and small wrappers around the HTTP API."""

    def __init__(self, url: str, process: ManagedProcess, config_path: Path) -> None:
        self.url = url
        self.process = process
        self.config_path = config_path

    def api(self, path: str, **params: Any) -> Any:
        """GET /api/v1/`path` and return `data`; raise PrometheusError on an API error."""
        query = urllib.parse.urlencode({k: v for k, v in params.items() if v is not None})
        url = f"{self.url}/api/v1/{path}" + (f"?{query}" if query else "")
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                body = json.load(response)
        except urllib.error.HTTPError as exc:
            body = json.loads(exc.read() or b"{}")
            raise PrometheusError(f"{path} {params}: {body.get('error', exc)}") from None
        if body.get("status") != "success":
            raise PrometheusError(f"{path} {params}: {body.get('error')}")
        return body["data"]

    def query(self, expr: str, at: float | None = None) -> list[dict]:
        """Instant query; the result list (vector: [{"metric": {...}, "value": [t, "v"]}])."""
        return self.api("query", query=expr, time=at)["result"]

    def query_range(self, expr: str, start: float, end: float, step: float = 1.0) -> list[dict]:
        """Range query; [{"metric": {...}, "values": [[t, "v"], ...]}]."""
        return self.api("query_range", query=expr, start=start, end=end, step=step)["result"]

    def alerts(self) -> list[dict]:
        """Active (pending or firing) alerts: labels, annotations, state, value."""
        return self.api("alerts")["alerts"]

    def firing(self, alertname: str, **labels: str) -> list[dict]:
        """Firing alerts named `alertname` whose labels include `labels`."""
        return [
            a
            for a in self.alerts()
            if a["state"] == "firing"
            and a["labels"].get("alertname") == alertname
            and all(a["labels"].get(k) == v for k, v in labels.items())
        ]

    def rules(self) -> list[dict]:
        """Loaded rule groups with each rule's health and last error."""
        return self.api("rules")["groups"]

    def targets(self) -> list[dict]:
        """Active scrape targets with health and last error."""
        return self.api("targets")["activeTargets"]

    def reload(self) -> None:
        """Re-read config and rule files (POST /-/reload; lifecycle API is enabled)."""
        request = urllib.request.Request(f"{self.url}/-/reload", method="POST")
        with urllib.request.urlopen(request, timeout=10):
            pass

    def wait_for(self, predicate: Callable[[], Any], timeout: float = 30.0, what: str = "") -> Any:
        """Poll `predicate` until truthy; the failure message ends with Prometheus' log tail."""
        try:
            return wait_until(predicate, timeout=timeout, interval=0.2, what=what)
        except TimeoutError as exc:
            raise TimeoutError(f"{exc}\n--- prometheus log ---\n{self.log_tail()}") from None

    def log_tail(self, lines: int = 30) -> str:
        return "\n".join(self.process.log_text().splitlines()[-lines:])


@contextlib.contextmanager
def run_prometheus(
    tmp_dir: Path,
    targets: Mapping[str, Sequence[str]],
    rule_files: Sequence[Path] = (),
    interval: str = "1s",
    alertmanager_url: str | None = None,
    storage_path: Path | None = None,
    retention: str | None = None,
    extra_args: Sequence[str] = (),
    port: int | None = None,
    job_intervals: Mapping[str, str] | None = None,
) -> Iterator[Prometheus]:
    """Start Prometheus with a fresh config in `tmp_dir`; yield it ready; always stop it.

    `interval` is both scrape and rule evaluation interval (`job_intervals`: a job's own scrape
    interval, e.g. {"kafka": "30s"}). `storage_path` defaults to
    `tmp_dir/tsdb`; `retention` (e.g. "10y") keeps old backfilled blocks from being deleted;
    `port` (default: a free one) lets a process started before know Prometheus' URL.
    """
    tmp_dir = Path(tmp_dir)
    tmp_dir.mkdir(parents=True, exist_ok=True)
    config = write_config(
        tmp_dir / "prometheus.yml", targets, rule_files, interval, alertmanager_url, job_intervals
    )
    port = port or server_port()
    argv = [
        PROMETHEUS,
        f"--config.file={config}",
        f"--storage.tsdb.path={storage_path or tmp_dir / 'tsdb'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--web.enable-lifecycle",
        *([f"--storage.tsdb.retention.time={retention}"] if retention else []),
        *extra_args,
    ]
    url = f"http://127.0.0.1:{port}"
    with ManagedProcess(argv, tmp_dir / "prometheus.log") as process:
        prom = Prometheus(url, process, config)
        started = time.monotonic()
        while not http_ok(f"{url}/-/ready"):
            if not process.running:
                raise RuntimeError(f"prometheus exited:\n{prom.log_tail()}")
            if time.monotonic() - started > 30:
                raise TimeoutError(f"prometheus not ready after 30s:\n{prom.log_tail()}")
            time.sleep(0.05)
        yield prom
