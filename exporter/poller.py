"""Poller: runs observations on schedule and keeps the factor's expiry judged between polls."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from exporter.archive import ArchiveWriter
from exporter.cluster_volume_source import ClusterVolumeSource
from kvq.model.observation import Observation
from kvq.model.throttle_factor_source import ThrottleFactorSource

log = logging.getLogger("kvq.exporter")


class Poller:
    """Feeds each observation to the ThrottleFactorSource (under `lock`) and to the archive."""

    def __init__(
        self,
        volume_source: ClusterVolumeSource,
        throttle: ThrottleFactorSource,
        clock: Callable[[], float],
        interval_seconds: float,
        archive: ArchiveWriter | None = None,
        on_duration: Callable[[float], None] = lambda seconds: None,
        lock: threading.Lock | None = None,
    ) -> None:
        self.volume_source = volume_source
        self.throttle = throttle
        self.clock = clock
        self.interval_seconds = interval_seconds
        self.archive = archive
        self.on_duration = on_duration
        self.lock = lock or threading.Lock()
        """Guards `throttle`; whoever else reads it (metrics, /status) takes the same lock."""
        self.ready = threading.Event()

    def poll_once(self) -> Observation:
        started = time.monotonic()
        observation = self.volume_source.observe()
        self.on_duration(time.monotonic() - started)
        with self.lock:
            self.throttle.observe(observation)
            factor = self.throttle.factor_at(observation.time)
        if self.archive is not None:
            try:
                self.archive.append(observation)
            except OSError as exc:
                log.error("archive write failed: %s", exc)
        if observation.succeeded:
            self.ready.set()
            log.info(
                "poll ok: %d brokers, %d log dirs, factor %s",
                len(observation.active_brokers),
                len(observation.log_dirs),
                factor.value,
            )
        else:
            log.warning(
                "poll failed at %s: %s (factor %s%s)",
                observation.failure_stage,
                observation.error,
                factor.value,
                ", fallback" if factor.fallback else "",
            )
        return observation

    def run(self, stop: threading.Event) -> None:
        """Poll every interval until `stop` is set (an interval of 0 disables polling)."""
        if self.interval_seconds <= 0:
            log.warning("storage.check.interval is PT0S: polling is disabled")
            return
        next_at = time.monotonic()
        while not stop.is_set():
            try:
                self.poll_once()
            except Exception:  # never let one bad poll end the exporter
                log.exception("unexpected error during poll")
            next_at += self.interval_seconds
            next_at = max(next_at, time.monotonic())
            stop.wait(next_at - time.monotonic())

    def watch_expiry(self, stop: threading.Event, every_seconds: float = 1.0) -> None:
        """Judge expiry every few seconds, so a hung poll never keeps a stale factor alive."""
        while not stop.wait(every_seconds):
            with self.lock:
                self.throttle.factor_at(self.clock())
