"""Wires the exporter together: client -> volume source -> throttle source -> poller -> HTTP."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol

from prometheus_client import CollectorRegistry, Histogram, generate_latest

from exporter.archive import ArchiveWriter
from exporter.cluster_client import KafkaClusterClient
from exporter.cluster_volume_source import ClusterClient, ClusterVolumeSource
from exporter.exposition import render_family, render_volumes
from exporter.http_server import exporter_routes, exporter_server
from exporter.poller import Poller
from exporter.retention_check_audit import RetentionCheckAudit
from exporter.retention_forecast_source import ForecastClient, RetentionForecastSource
from exporter.scrape_phase import ScrapePhase
from exporter.settings import ExporterSettings
from exporter.status import status_document
from kvq.contract.metric_families import ARCHIVE_WRITE_FAILURES, POLL_DURATION
from kvq.contract.metric_samples import Family, cluster_families, judged_volumes, policy_columns
from kvq.model.throttle_factor_source import ThrottleFactorSource
from kvq.web.server import ConnectionLimits, WebServer
from kvq.web.standard_metrics import register_standard_metrics
from kvq.web.web_config import WebConfig

log = logging.getLogger("kvq.exporter")

POLL_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


class ExporterClient(ClusterClient, ForecastClient, Protocol):
    """What the exporter asks of the cluster: its volumes and, for the retention forecast, its
    topics' leaders, configs and offsets (`KafkaClusterClient`)."""


class Exporter:
    """The running exporter; `start()` serves HTTP and polls in threads, `stop()` ends both."""

    def __init__(
        self,
        settings: ExporterSettings,
        client: ExporterClient | None = None,
        clock: Callable[[], float] = time.time,
        web_config: WebConfig | None = None,
        limits: ConnectionLimits | None = None,
        metrics_path: str = "/metrics",
    ) -> None:
        self.settings = settings
        self.config = config = settings.config
        self.clock = clock
        timeout = settings.request_timeout.total_seconds()
        self.client = client or KafkaClusterClient(config.admin_properties, timeout)
        self.throttle = ThrottleFactorSource(
            config.policy,
            config.validity.total_seconds(),
            config.fallback_factor,
            start_time=clock(),
            checking=config.check_interval.total_seconds() > 0,
            hold_seconds=config.violation_hold.total_seconds(),
        )
        archive_dir = settings.archive_dir
        self.archive = ArchiveWriter(archive_dir, config.cluster_name) if archive_dir else None
        self.registry = CollectorRegistry(auto_describe=False)
        histogram = Histogram(
            POLL_DURATION.name,
            POLL_DURATION.help,
            list(POLL_DURATION.label_names(config.cluster.label)),
            buckets=POLL_BUCKETS,
            registry=self.registry,
        ).labels(config.cluster.name)
        self.lock = threading.Lock()
        """Guards `throttle`: the poller feeds it, metrics and /status read it."""
        self.scrape_phase = ScrapePhase()
        self.poller = Poller(
            ClusterVolumeSource(
                self.client,
                clock,
                config.reads_partition_sizes,
                (
                    RetentionForecastSource(self.client, clock)
                    if config.reads_retention_forecast
                    else None
                ),
            ),
            self.throttle,
            clock,
            config.check_interval.total_seconds(),
            archive=self.archive,
            violation_interval_seconds=settings.violation_check_interval.total_seconds(),
            on_duration=histogram.observe,
            lock=self.lock,
            scrape_phase=self.scrape_phase,
            on_taken=(
                RetentionCheckAudit(self.client.broker_configs)
                if config.reads_partition_sizes
                else lambda observation: None
            ),
        )
        self._rendered: tuple[object, bytes] | None = None
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.server: WebServer = exporter_server(
            settings.listen,
            exporter_routes(
                self.render_metrics,
                self.render_live,
                self.poller.ready.is_set,
                self.status,
                metrics_path,
                lambda peer: self.scrape_phase.scraped(peer, time.monotonic()),
            ),
            web_config,
            limits,
        )
        self.live_registry = CollectorRegistry(auto_describe=False)
        register_standard_metrics(self.live_registry, "kvq-exporter", self.server)
        self._serving = False
        self.metrics_path = metrics_path

    def render_metrics(self) -> bytes:
        """The exposition text; re-rendered only when the state or the factor in force changed.

        The poll duration histogram comes from prometheus_client, every other family from
        `exporter.exposition` (the first render at 24,000 volumes: see bench/metrics_render.py);
        between polls every scrape reuses the last text.
        """
        with self.lock:
            now = self.clock()
            factor = self.throttle.factor_at(now)
            archive = self.archive_family()
            key = (self.throttle.state.observations_total, factor, archive.samples[0][1])
            if self._rendered is not None and self._rendered[0] == key:
                return self._rendered[1]
            config = self.config
            interval = config.check_interval.total_seconds()
            cluster = [archive] + list(
                cluster_families(self.throttle, now, config.cluster, config.limit, interval)
            )
            state = self.throttle.state
            volumes = judged_volumes(state)
            violating = {v.key for v in state.violating}
            policy = policy_columns(self.throttle, volumes)
        text = "".join(map(render_family, cluster)) + render_volumes(
            volumes, violating, config.cluster, policy
        )
        self._rendered = (key, generate_latest(self.registry) + text.encode())
        return self._rendered[1]

    def archive_family(self) -> Family:
        """The archive's write failures (0 without an archive): measured by this process, so
        published live only, as the poll duration is."""
        failures = self.archive.failures if self.archive is not None else 0
        return Family(ARCHIVE_WRITE_FAILURES).add(failures, **self.config.cluster.labels)

    def render_live(self) -> bytes:
        """The families that change on every scrape (process, connections, build info): small,
        rendered each time and served after the cached text."""
        return generate_latest(self.live_registry)

    def status(self) -> dict:
        with self.lock:
            return status_document(
                self.throttle, self.clock(), self.config.cluster_name, self.config.limit
            )

    def start(self) -> WebServer:
        self.server.start()
        self._serving = True
        self._threads = [
            self._thread(self.poller.run, "kvq-poll"),
            self._thread(self.poller.watch_expiry, "kvq-expiry"),
        ]
        log.info(
            "serving %s%s for cluster %s",
            self.server.url,
            self.metrics_path,
            self.config.cluster_name,
        )
        return self.server

    def _thread(self, target, name: str) -> threading.Thread:
        thread = threading.Thread(target=target, args=(self._stop,), name=name, daemon=True)
        thread.start()
        return thread

    def stop(self) -> None:
        self._stop.set()
        if self._serving:
            self.server.stop()
            self._serving = False
        for thread in self._threads:
            thread.join(timeout=30)
        if self.archive is not None:
            self.archive.close()
        close = getattr(self.client, "close", None)
        if close:
            close()
