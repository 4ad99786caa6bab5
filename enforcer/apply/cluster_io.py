"""What every phase of an apply acts through: one cluster's Kafka, its journal, its requests in
doubt, its metrics and the pace of describing again."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from enforcer.broker_quota_settings import BrokerQuotaSettings
from enforcer.journal import ClusterJournal
from enforcer.metrics import EnforcerMetrics
from enforcer.quota_client import QuotaClient, QuotaClientError, QuotaRejected
from enforcer.quota_plan import (
    KAFKA_QUOTA_SAMPLE_SECONDS,
    KAFKA_QUOTA_WINDOW_SECONDS,
    KAFKA_THROTTLE_AVERAGE_SECONDS,
    Change,
)
from enforcer.unanswered_alters import UnansweredAlters

log = logging.getLogger("kvq.enforcer")


class QuotaWindow:
    """The longest window the cluster's brokers said they measure a quota's rate over (the W of
    Kafka's throttle time, `QuotaPolicy.quota_window_seconds`) and their longest sample
    (`QuotaPolicy.quota_sample_seconds`): Kafka's defaults until one answered, then what they
    answered last (read with every check of the quota callback); and how far back they average
    each quota entity's throttle times (`QuotaPolicy.throttle_average_seconds`), alike."""

    def __init__(self, cluster: str, sized_throttle_seconds: float | None = None) -> None:
        """`sized_throttle_seconds`: the throttle time raises for large requests are for
        (kvq.enforcer.throttle.request.throttle.time) when entities are sized by their
        throttle times (`request_sizes`); None when they are not."""
        self.cluster = cluster
        self.seconds = KAFKA_QUOTA_WINDOW_SECONDS
        self.sample_seconds = KAFKA_QUOTA_SAMPLE_SECONDS
        self.sized_throttle_seconds = sized_throttle_seconds
        self.average_seconds = KAFKA_THROTTLE_AVERAGE_SECONDS
        self._said: tuple[float, float] | None = None
        """What the brokers answered last (None: nothing yet)."""

    def learned(self, settings: BrokerQuotaSettings) -> None:
        """Take in the brokers' answer (none said: nothing changes); logged when it changes."""
        self._learned_average(settings.longest_average)
        seconds, sample = settings.longest_window, settings.longest_sample
        if seconds is None or sample is None:
            return
        if (seconds, sample) == self._said:
            return
        self._said = seconds, sample
        log.info(
            "cluster %s: its brokers measure quotas over %g s in samples of %g s (the longest "
            "quota.window.num x quota.window.size.seconds); each quota entity's own minimum "
            "follows it",
            self.cluster,
            seconds,
            sample,
        )
        self.seconds, self.sample_seconds = seconds, sample
        self._advise_on_sizes()

    def _learned_average(self, seconds: float | None) -> None:
        """The brokers' throttle-time average, logged when it changes (Kafka's default, the
        usual answer, goes unsaid)."""
        if seconds is None or seconds == self.average_seconds:
            return
        self.average_seconds = seconds
        log.info(
            "cluster %s: its brokers average each quota entity's throttle times over %g s (the "
            "longest metrics.num.samples x metrics.sample.window.ms); the request sizes read from "
            "them follow it",
            self.cluster,
            seconds,
        )

    def _advise_on_sizes(self) -> None:
        """Warn where the window hides large requests from the sizes: a request meets the
        ones before it in a window that outlasts half the throttle time a raise is for, so
        Kafka's average throttle time shows a producer's large requests only once most of its
        throttle times are theirs (the 40 principals' Java producers on Kafka's 11 s window:
        10.4-12.6 s without an acknowledgement, within 9.3 s on 3 s)."""
        throttle = self.sized_throttle_seconds
        if throttle is None or self.seconds - self.sample_seconds < throttle / 2.0:
            return
        log.warning(
            "cluster %s: its brokers measure quotas over %g s, more than half "
            "kvq.enforcer.throttle.request.throttle.time (%g s) and a sample: Kafka's average "
            "throttle time shows a producer's large requests (a Java producer's batches) late "
            "there, and it may wait out longer throttle times before it is raised for them; "
            "quota.window.num=3 on every broker shows them at its first long throttle times, "
            "where no producer buffers minutes of its writes (docs/reaction-time.md)",
            self.cluster,
            self.seconds,
            throttle,
        )


@dataclass(frozen=True, slots=True)
class ClusterIO:
    """One cluster as an apply reads and writes it."""

    name: str
    client: QuotaClient
    journal: ClusterJournal
    """This cluster's episode and requests in doubt, and the lock of its applies."""
    unanswered: UnansweredAlters
    metrics: EnforcerMetrics
    monotonic: Callable[[], float]
    sleep: Callable[[float], None]
    verify_attempts: int
    """How many times a view that does not show what it should is asked for."""
    verify_delay_s: float
    """Seconds between two of them (brokers learn quota changes a moment later)."""
    sized_throttle_seconds: float | None = None
    """`QuotaWindow.sized_throttle_seconds`."""
    quota_window: QuotaWindow = field(init=False)

    def __post_init__(self) -> None:
        window = QuotaWindow(self.name, self.sized_throttle_seconds)
        object.__setattr__(self, "quota_window", window)

    def alter(self, todo: list[Change]) -> None:
        """AlterClientQuotas, journaled before it is sent: a request without an answer may still
        land (also after a restart), so it is remembered until it is answered or settled."""
        if not todo:
            return
        request = self.unanswered.sending(todo)  # durable before it is sent
        try:
            self.client.alter(todo)
        except QuotaRejected:
            self.unanswered.answered(request)
            raise
        except QuotaClientError:
            self.unanswered.record(todo)
            raise
        self.unanswered.answered(request)
