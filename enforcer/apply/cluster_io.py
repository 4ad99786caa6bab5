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
from enforcer.quota_plan import KAFKA_QUOTA_SAMPLE_SECONDS, KAFKA_QUOTA_WINDOW_SECONDS, Change
from enforcer.unanswered_alters import UnansweredAlters

log = logging.getLogger("kvq.enforcer")


class QuotaWindow:
    """The longest window the cluster's brokers said they measure a quota's rate over (the W of
    Kafka's throttle time, `QuotaPolicy.quota_window_seconds`) and their longest sample
    (`QuotaPolicy.quota_sample_seconds`): Kafka's defaults until one answered, then what they
    answered last (read with every check of the quota callback)."""

    def __init__(self, cluster: str) -> None:
        self.cluster = cluster
        self.seconds = KAFKA_QUOTA_WINDOW_SECONDS
        self.sample_seconds = KAFKA_QUOTA_SAMPLE_SECONDS

    def learned(self, settings: BrokerQuotaSettings) -> None:
        """Take in the brokers' answer (none said: nothing changes); logged when it changes."""
        seconds, sample = settings.longest_window, settings.longest_sample
        if seconds is None or sample is None:
            return
        if (seconds, sample) == (self.seconds, self.sample_seconds):
            return
        log.info(
            "cluster %s: its brokers measure quotas over %g s in samples of %g s (the longest "
            "quota.window.num x quota.window.size.seconds); each quota entity's own minimum "
            "follows it",
            self.cluster,
            seconds,
            sample,
        )
        self.seconds, self.sample_seconds = seconds, sample


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
    quota_window: QuotaWindow = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "quota_window", QuotaWindow(self.name))

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
