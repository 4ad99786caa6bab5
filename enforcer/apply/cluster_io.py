"""What every phase of an apply acts through: one cluster's Kafka, its journal, its requests in
doubt, its metrics and the pace of describing again."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from enforcer.journal import ClusterJournal
from enforcer.metrics import EnforcerMetrics
from enforcer.quota_client import QuotaClient, QuotaClientError, QuotaRejected
from enforcer.quota_plan import Change
from enforcer.unanswered_alters import UnansweredAlters


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
