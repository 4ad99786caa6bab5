"""Poller: runs observations on schedule and keeps the factor's expiry judged between polls."""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable

from exporter.archive import ArchiveWriter
from exporter.cluster_volume_source import ClusterVolumeSource
from exporter.scrape_phase import ScrapePhase
from kvq.model.observation import Observation
from kvq.model.throttle_factor_source import ThrottleFactor, ThrottleFactorSource

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
        scrape_phase: ScrapePhase | None = None,
        violation_interval_seconds: float = 0.0,
        on_taken: Callable[[Observation], None] = lambda observation: None,
    ) -> None:
        self.volume_source = volume_source
        self.throttle = throttle
        self.clock = clock
        self.interval_seconds = interval_seconds
        self.violation_interval_seconds = violation_interval_seconds
        """While a volume violated the limit at the last successful poll, polls come at most this
        far apart (0: every `interval_seconds` always): freed space lifts the throttle sooner."""
        self.archive = archive
        self.on_duration = on_duration
        self.on_taken = on_taken
        """Called with each observation taken in (a poll, or a decisive check), after the
        factor; what it raises is logged, never the poll's failure."""
        self.lock = lock or threading.Lock()
        """Guards `throttle`; whoever else reads it (metrics, /status) takes the same lock."""
        self.ready = threading.Event()
        self._last_outcome: tuple | None = None
        """What the last poll found, as logged (a poll finding the same is logged at debug)."""
        self._failures = 0
        """Polls failed in a row."""
        self.scrape_phase = scrape_phase
        """When scrapes come: each poll is started to end just before one (None: on schedule)."""
        self._last_duration = 0.0
        self._throttled_at = -math.inf
        """When a poll (or a check taken in) last gave a calculated factor below 1."""

    def poll_once(self) -> Observation:
        observation = self._observe(poll=True)
        self._take(observation)
        return observation

    def check_once(self) -> bool:
        """Observe between polls; take the observation in as a poll only if it shows a volume
        past its limit, a throttled volume's space freed or a volume closing on its limit fast
        (`ThrottleFactorSource.decisive`),
        else drop it: the factor, the archive and the policy's readings stay as the last poll
        left them. Returns whether it was taken."""
        observation = self._observe()
        with self.lock:
            decisive = self.throttle.decisive(observation)
        if decisive:
            self._take(observation)
        return decisive

    def _observe(self, poll: bool = False) -> Observation:
        started = time.monotonic()
        observation = self.volume_source.observe(poll)
        self._last_duration = time.monotonic() - started
        self.on_duration(self._last_duration)
        return observation

    def _take(self, observation: Observation) -> None:
        self.volume_source.taken_in(observation)
        with self.lock:
            self.throttle.observe(observation)
            factor = self.throttle.factor_at(observation.time)
        if factor.value < 1.0 and not factor.fallback:
            self._throttled_at = observation.time
        if self.archive is not None:
            try:
                self.archive.append(observation)
            except OSError as exc:
                log.error("archive write failed: %s", exc)
        if observation.succeeded:
            self.ready.set()
        self._log_outcome(observation, factor)
        try:
            self.on_taken(observation)
        except Exception:  # noqa: BLE001 - an audit's failure must not stop the polls
            log.exception("after the poll")

    def _log_outcome(self, observation: Observation, factor: ThrottleFactor) -> None:
        """Log a poll at info (a failure at warn) only when what it found differs from the poll
        before: the factor or its fallback, the number of brokers or log dirs, failing or
        recovering, a different failure. A poll like the last one is routine: debug (a poll
        every 5 s at info would be ~17,000 lines a day)."""
        fallback = ", fallback" if factor.fallback else ""
        if observation.succeeded:
            brokers, dirs = len(observation.active_brokers), len(observation.log_dirs)
            outcome: tuple = ("ok", brokers, dirs, factor.value, factor.fallback)
            level = logging.INFO if outcome != self._last_outcome else logging.DEBUG
            again = f" again after {self._failures} failed polls" if self._failures else ""
            log.log(
                level,
                "poll ok%s: %d brokers, %d log dirs, factor %s%s",
                again,
                brokers,
                dirs,
                factor.value,
                fallback,
            )
            self._failures = 0
        else:
            stage, error = observation.failure_stage, observation.error
            outcome = ("failed", stage, error, factor.value, factor.fallback)
            level = logging.WARNING if outcome != self._last_outcome else logging.DEBUG
            self._failures += 1
            log.log(
                level,
                "poll failed at %s: %s (factor %s%s; %d failed polls in a row)",
                stage,
                error,
                factor.value,
                fallback,
                self._failures,
            )
        self._last_outcome = outcome

    def run(self, stop: threading.Event) -> None:
        """Poll every interval until `stop` is set (an interval of 0 disables polling); while
        throttled, check in between (`check_interval`)."""
        if self.interval_seconds <= 0:
            log.warning("storage.check.interval is PT0S: polling is disabled")
            return
        next_at = time.monotonic()
        checked = False
        while not stop.is_set():
            if not checked:  # a check taken in was this turn's poll
                self._guarded(self.poll_once)
            interval = self.current_interval()
            next_at = max(next_at + interval, time.monotonic())
            checked = self._check_until(stop, self._start_for(next_at, interval))
            if checked:
                next_at = time.monotonic()

    def _check_until(self, stop: threading.Event, poll_at: float) -> bool:
        """Wait until `poll_at`, checking every `check_interval` meanwhile; True as soon as a
        check was taken in as a poll (the schedule then starts again from it)."""
        while True:
            every, now = self.check_interval(), time.monotonic()
            if every <= 0 or now + every >= poll_at:
                stop.wait(poll_at - now)
                return False
            if stop.wait(every):
                return False
            if self._guarded(self.check_once):
                return True

    @staticmethod
    def _guarded(step: Callable[[], object]) -> object:
        try:
            return step()
        except Exception:  # never let one bad poll end the exporter
            log.exception("unexpected error during poll")
            return None

    def current_interval(self) -> float:
        """Seconds until the next poll: `violation_interval_seconds`, if shorter, while a volume
        violated the limit at the last successful poll (a failed poll changes nothing); else
        `interval_seconds`. Only then: at the limit the factor is 0 whatever the policy, and the
        graceful-slowdown policy's fill rate, a median over its last three intervals, needs
        intervals longer than the gaps between a volume's writes (at 1 s, a volume written to
        in bursts every 2 s or more would seem not to fill half the time)."""
        if self.throttle.state.violating and self._violation_interval_applies:
            return self.violation_interval_seconds
        return self.interval_seconds

    def check_interval(self) -> float:
        """Seconds between checks until the next poll (0: none): `violation_interval_seconds`
        while a calculated factor below 1 is in force, and for as many poll intervals after it
        was lifted as the policy asks (`polls_watched_after_lift`: the load the throttle held
        comes back at once), or always if it asks (`checks_unthrottled`: graceful-slowdown, whose
        fill rate shows a load step two polls late), unless a volume violates the limit
        (graceful-slowdown long before the limit; held volumes count as violating). A check is
        taken in only when it shows a throttled volume's space freed, a volume closing on its
        limit fast or one past it (`check_once`), so freed space lifts a throttle within a check
        interval, not a poll interval, and a load step is slowed a poll sooner, while otherwise
        the policy's readings stay a poll interval apart."""
        if not self._violation_interval_applies or self.throttle.state.violating:
            return 0.0
        now = self.clock()
        with self.lock:
            factor = self.throttle.factor_at(now)
        policy = self.throttle.policy
        watched = now - self._throttled_at < policy.polls_watched_after_lift * self.interval_seconds
        if factor.fallback or (factor.value >= 1.0 and not (watched or policy.checks_unthrottled)):
            return 0.0
        return self.violation_interval_seconds

    @property
    def _violation_interval_applies(self) -> bool:
        return 0 < self.violation_interval_seconds < self.interval_seconds

    def _start_for(self, planned: float, interval: float) -> float:
        """When to start the poll the schedule puts at `planned` (the schedule stays as it is)."""
        if self.scrape_phase is None:
            return planned
        return self.scrape_phase.start_for(planned, self._last_duration, interval, time.monotonic())

    def watch_expiry(self, stop: threading.Event, every_seconds: float = 1.0) -> None:
        """Judge expiry every few seconds, so a hung poll never keeps a stale factor alive."""
        while not stop.wait(every_seconds):
            with self.lock:
                self.throttle.factor_at(self.clock())
