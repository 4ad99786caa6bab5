"""Exporter- and enforcer-shaped /metrics served from a state the test changes.

Prometheus rule and dashboard tests need series with the names, labels and types of the metric
contract, with values a test controls (a volume below the limit, a fallback, a filling disk). This
module serves them on a free loopback port; the real exporter is tested against devcluster
elsewhere (tests/system/test_rules_live_exporter.py).

    with FakeExporter(cluster="c1") as fake:      # fake.target, fake.enforcer_target: host:port
        fake.set_available(1, "/data/a", 10)       # below the limit: factor 0
        fake.set_available(2, "/data/b", 500_000, fill=1000)   # a disk filling at 1000 B/s
        fake.set_fallback(0.5)                     # the fallback factor applies
        fake.held_log_dirs = 1                     # a departed broker's violating volume held

Both servers also serve the families every kvq server publishes (build info, process, HTTP
connections), made by the real collectors of kvq/web/standard_metrics.py.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CollectorRegistry, generate_latest

from kvq.contract import metric_families as mf
from kvq.model.observation import STAGE_DESCRIBE_CLUSTER, STAGE_DESCRIBE_LOG_DIRS
from kvq.model.volume import UNUSABLE_REASONS
from kvq.settings.config import CLUSTER_LABEL_DEFAULT, CLUSTER_NAME_DEFAULT
from kvq.web.server import DROP_REASONS
from kvq.web.standard_metrics import register_standard_metrics

Labels = dict[str, str]


@dataclass
class Volume:
    total: int
    available: float
    fill_bytes_per_s: float = 0.0  # > 0: available shrinks with wall time (a filling disk)
    since: float = field(default_factory=time.time)

    def available_at(self, now: float) -> float:
        return max(self.available - self.fill_bytes_per_s * (now - self.since), 0.0)


@dataclass
class FakeExporter:
    """State of one exporter (one cluster) plus an enforcer; rendered at every scrape."""

    cluster: str = CLUSTER_NAME_DEFAULT
    cluster_label: str = CLUSTER_LABEL_DEFAULT
    """The label naming the cluster (kvq.cluster.label); both default as the settings do."""
    limit_ratio: float = 0.1
    brokers: int = 3
    fallback_factor: float | None = None  # not None: the fallback applies with this factor
    unusable: dict[str, int] = field(default_factory=lambda: dict.fromkeys(UNUSABLE_REASONS, 0))
    volumes: dict[tuple[int, str], Volume] = field(default_factory=dict)
    scrapes: int = 0
    violated_total: int = 0
    fallback_applied_total: int = 0
    enforcer_applied_factor: float = 1.0
    held_log_dirs: int = 0
    hold_expired_log_dirs: int = 0
    archive_write_failures: int = 0

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        if not self.volumes:
            for broker in range(1, self.brokers + 1):
                for log_dir in ("/data/a", "/data/b"):
                    self.volumes[(broker, log_dir)] = Volume(total=1_000_000, available=500_000)

    # --- what a test changes ---
    def set_available(self, broker: int, log_dir: str, available: float, fill: float = 0.0) -> None:
        with self._lock:
            self.volumes[(broker, log_dir)] = Volume(
                self.volumes[(broker, log_dir)].total, available, fill
            )

    def set_fallback(self, factor: float | None) -> None:
        with self._lock:
            if factor is not None and self.fallback_factor is None:
                self.fallback_applied_total += 1
            self.fallback_factor = factor

    # --- rendering ---
    def factor(self, now: float | None = None) -> float:
        now = time.time() if now is None else now
        if self.fallback_factor is not None:
            return self.fallback_factor
        return 0.0 if self._violating(now) else 1.0

    def _violating(self, now: float) -> list[tuple[int, str]]:
        return [
            key
            for key, v in self.volumes.items()
            if v.available_at(now) / v.total <= self.limit_ratio
        ]

    def render(self) -> str:
        with self._lock:
            now = time.time()
            self.scrapes += 1
            violating = self._violating(now)
            self.violated_total += len(violating)
            c = {self.cluster_label: self.cluster}
            out = _Text()
            out.histogram(
                mf.POLL_DURATION.short, c, self.scrapes, 0.004 * self.scrapes, mf.POLL_DURATION.help
            )
            out.table(mf.ARCHIVE_WRITE_FAILURES, [(c, self.archive_write_failures)])
            out.table(mf.THROTTLE_FACTOR, [(c, self.factor(now))])
            out.table(mf.FALLBACK_APPLIED, [(c, self.fallback_applied_total)])
            out.table(mf.LIMIT_VIOLATED, [(c, self.violated_total)])
            out.table(mf.ACTIVE_BROKERS, [(c, self.brokers)])
            out.table(mf.ACTIVE_LOG_DIRS, [(c, len(self.volumes))])
            out.table(mf.FALLBACK_ACTIVE, [(c, int(self.fallback_factor is not None))])
            out.table(mf.CACHED_LOG_DIRS, [(c, 0)])
            out.table(mf.LOG_DIR_EVICTIONS, [(c, 0)])
            out.table(mf.HELD_LOG_DIRS, [(c, self.held_log_dirs)])
            out.table(mf.VIOLATION_HOLD_EXPIRED, [(c, self.hold_expired_log_dirs)])
            out.table(
                mf.UNUSABLE_LOG_DIRS,
                [({**c, "reason": r}, n) for r, n in sorted(self.unusable.items())],
            )
            out.table(
                mf.POLL_FAILURES,
                [
                    ({**c, "stage": STAGE_DESCRIBE_CLUSTER}, 0),
                    ({**c, "stage": STAGE_DESCRIBE_LOG_DIRS}, self.scrapes // 10),
                ],
            )
            out.table(mf.LAST_SUCCESSFUL_POLL, [(c, now)])
            out.table(mf.LIMIT_RATIO, [(c, self.limit_ratio)])
            out.table(mf.CHECK_INTERVAL, [(c, 1.0)])
            rows = sorted(self.volumes.items())
            per_volume = [({**c, "broker_id": str(b), "log_dir": d}, v) for (b, d), v in rows]
            out.table(mf.LOG_DIR_TOTAL_BYTES, [(lb, v.total) for lb, v in per_volume])
            out.table(
                mf.LOG_DIR_AVAILABLE_BYTES, [(lb, v.available_at(now)) for lb, v in per_volume]
            )
            out.table(
                mf.LOG_DIR_AVAILABLE_RATIO,
                [(lb, v.available_at(now) / v.total) for lb, v in per_volume],
            )
            out.table(
                mf.LOG_DIR_VIOLATING,
                [
                    (lb, int((int(lb["broker_id"]), lb["log_dir"]) in violating))
                    for lb, _ in per_volume
                ],
            )
            return out.text()

    def render_enforcer(self) -> str:
        """The enforcer's series (names from enforcer/metrics.py)."""
        with self._lock:
            c = {self.cluster_label: self.cluster}
            out = _Text("kafka_volume_quota_enforcer")
            out.family(
                "webhooks",
                "counter",
                [({"outcome": "applied"}, self.scrapes), ({"outcome": "ignored"}, 0)],
            )
            out.family("inbox_entries", "counter", [({"outcome": "handled"}, 0)])
            out.family("applies", "counter", [(c, self.scrapes)])
            out.family("apply_failures", "counter", [(c, self.scrapes // 5)])
            out.family("quota_changes", "counter", [(c, 2 * self.scrapes)])
            out.histogram("apply_duration_seconds", c, self.scrapes, 0.02 * self.scrapes)
            out.histogram("alert_to_enforce_seconds", c, self.scrapes, 2.0 * self.scrapes)
            out.family("target_factor", "gauge", [(c, self.factor())])
            out.family("applied_factor", "gauge", [(c, self.enforcer_applied_factor)])
            out.family("drift_pairs", "gauge", [(c, 1)])
            for name in (
                "drift_changes",
                "reverted_pairs",
                "originals_recovered",
                "lost_resolutions",
                "no_limit_stand_ins",
                "reconcile_failures",
                "throttle_checks",
                "heartbeats",
            ):
                out.family(name, "counter", [(c, 0)])
            out.family("acting", "gauge", [(c, 1)])
            out.family("failsafe_active", "gauge", [(c, 0)])
            out.family("failsafe_factor", "gauge", [(c, 1)])
            out.family("originals_unknown", "gauge", [(c, 0)])
            out.family("quota_callback_active", "gauge", [(c, 0)])
            out.family("escaping_entities", "gauge", [(c, 0)])
            return out.text()

    # --- serving ---
    def __enter__(self) -> FakeExporter:
        exporter, enforcer = _StandardMetrics("kvq-exporter"), _StandardMetrics("kvq-enforcer")
        self._servers = [
            _serve(lambda: self.render() + exporter.render()),
            _serve(lambda: self.render_enforcer() + enforcer.render()),
        ]
        return self

    def __exit__(self, *exc: object) -> None:
        for server in self._servers:
            server.shutdown()
            server.server_close()

    @property
    def target(self) -> str:
        """host:port of the exporter-shaped /metrics."""
        return _address(self._servers[0])

    @property
    def enforcer_target(self) -> str:
        """host:port of the enforcer-shaped /metrics."""
        return _address(self._servers[1])


class _StandardMetrics:
    """Build info, process and HTTP connection families from the real collectors, with a
    connection count of 1 (the scrape) and one more idle timeout every third scrape."""

    def __init__(self, program: str) -> None:
        self.open_connections = 1
        self.dropped = dict.fromkeys(DROP_REASONS, 0)
        self.scrapes = 0
        self.registry = CollectorRegistry()
        register_standard_metrics(self.registry, program, self)

    def render(self) -> str:
        self.scrapes += 1
        self.dropped["idle_timeout"] = self.scrapes // 3
        return generate_latest(self.registry).decode()


def _serve(render: Callable[[], str]) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server API
            if self.path != "/metrics":
                self.send_error(404)
                return
            body = render().encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _address(server: ThreadingHTTPServer) -> str:
    host, port = server.server_address[:2]
    return f"{host!s}:{port}"


class _Text:
    """Prometheus text exposition format 0.0.4."""

    def __init__(self, prefix: str = "kafka_volume_quota") -> None:
        self.prefix = prefix
        self.lines: list[str] = []

    def family(
        self, name: str, kind: str, samples: list[tuple[Labels, float]], help_text: str = ""
    ) -> None:
        full = f"{self.prefix}_{name}" + ("_total" if kind == "counter" else "")
        self.lines += [f"# HELP {full} {help_text or name}", f"# TYPE {full} {kind}"]
        self.lines += [f"{full}{_labels(lb)} {float(v)!r}" for lb, v in samples]

    def table(self, family: mf.MetricFamily, samples: list[tuple[Labels, float]]) -> None:
        """A family of the exporter's metric table: its name, type and help from the table."""
        self.family(family.short, family.type, samples, family.help)

    def histogram(
        self, name: str, labels: Labels, count: int, total: float, help_text: str = ""
    ) -> None:
        full = f"{self.prefix}_{name}"
        self.lines += [f"# HELP {full} {help_text or name}", f"# TYPE {full} histogram"]
        for le, share in (("0.005", 0.5), ("0.05", 0.9), ("0.5", 1.0), ("+Inf", 1.0)):
            self.lines.append(f"{full}_bucket{_labels({**labels, 'le': le})} {int(count * share)}")
        self.lines += [
            f"{full}_sum{_labels(labels)} {total!r}",
            f"{full}_count{_labels(labels)} {count}",
        ]

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def _labels(labels: Labels) -> str:
    if not labels:
        return ""
    inner = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return "{" + inner + "}"


def metric_families(text: str) -> dict[str, tuple[str, frozenset[str]]]:
    """{family: (type, label names)} of an exposition, to compare the fake with the real thing
    (the families every kvq server publishes, build info and process, left out)."""
    from prometheus_client.parser import text_string_to_metric_families

    from kvq.web.standard_metrics import STANDARD_PREFIXES

    families = {}
    for family in text_string_to_metric_families(text):
        if family.name.endswith("_created") or family.name.startswith(STANDARD_PREFIXES):
            continue
        labels = {k for s in family.samples for k in s.labels if k != "le"}
        families[family.name] = (family.type, frozenset(labels))
    return families
