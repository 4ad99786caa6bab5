"""Controller mutation quotas (KIP-599) as Kafka's ControllerMutationQuotaManager enforces them.

- Which quota: the first KIP-55 level holding ``controller_mutation_rate`` for the (user,
  client-id), shared as produce quotas are (``produce_quotas.QuotaLimits``). No quota: unlimited.
- The stat is a TokenBucket, not a Rate: it refills at the quota (partitions per second) up to a
  burst of ``quota.window.num`` x ``quota.window.size.seconds`` x quota (11 x the rate) and starts
  full; each topic created takes its partition count, and may take the bucket below zero.
- Strict from CreateTopics v6: a topic is refused (THROTTLING_QUOTA_EXCEEDED, no message) when the
  bucket is already below zero, before recording; the time to bring it back to zero,
  ``round(-tokens / quota x 1000)`` ms, is the response's throttle time. Older versions are
  permissive: every topic is recorded and the throttle time only reported.
- One controller decides for the whole cluster: the buckets are cluster-wide. The checks follow
  the topic's own validation, also with ``validate_only`` (ReplicationControlManager.createTopic).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass

from kvq.kafka.quota_entity import QuotaEntity

from .produce_quotas import WINDOW_MS, WINDOW_NUM, QuotaLimits, java_round

CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
STRICT_SINCE_VERSION = 6  # CreateTopics
THROTTLING_QUOTA_EXCEEDED = 89


class ThrottlingQuotaExceeded(Exception):
    """A strict quota refused a mutation: its bucket was already empty."""


@dataclass
class TokenBucket:
    tokens: float
    updated_s: float

    def refill(self, quota: float, now_s: float) -> None:
        burst = WINDOW_NUM * WINDOW_MS / 1000 * quota
        self.tokens = min(burst, self.tokens + quota * (now_s - self.updated_s))
        self.updated_s = now_s


class MutationQuota:
    """One request's view of its budget (Kafka's Strict/PermissiveControllerMutationQuota)."""

    def __init__(
        self,
        bucket: TokenBucket | None,
        bound: float | None,
        strict: bool,
        clock: Callable[[], float],
    ):
        self._bucket = bucket
        self._bound = bound
        self._strict = strict
        self._clock = clock
        self._throttle_ms = 0
        self._recorded_s = 0.0

    def record(self, permits: int) -> None:
        """Take `permits` partitions; ThrottlingQuotaExceeded if strict and already exhausted."""
        if self._bucket is None or self._bound is None:
            return
        now_s = self._clock()
        self._bucket.refill(self._bound, now_s)
        if self._strict and self._bucket.tokens < 0:
            self._note_throttle(now_s)
            raise ThrottlingQuotaExceeded()
        self._bucket.tokens -= permits
        if not self._strict and self._bucket.tokens < 0:
            self._note_throttle(now_s)

    def _note_throttle(self, now_s: float) -> None:
        assert self._bucket is not None and self._bound is not None
        # ControllerMutationQuotaManager.throttleTimeMs: Math.round(-value / bound * 1000)
        self._throttle_ms = java_round(-self._bucket.tokens / self._bound * 1000)
        self._recorded_s = now_s

    def throttle_ms(self) -> int:
        """The last throttle time, less what has passed since it was computed."""
        elapsed_ms = (self._clock() - self._recorded_s) * 1000
        return max(0, int(self._throttle_ms - elapsed_ms))


class MutationQuotas:
    """The controller's token buckets, one per budget."""

    def __init__(
        self,
        read_quotas: Callable[[], dict[QuotaEntity, dict[str, float]]],
        clock: Callable[[], float] = time.monotonic,
        version: Callable[[], Hashable] | None = None,
    ):
        self._limits = QuotaLimits(CONTROLLER_MUTATION_RATE, read_quotas, version)
        self._clock = clock
        self._buckets: dict[tuple[str, str], TokenBucket] = {}

    def quota_for(self, user: str, client_id: str, api_version: int) -> MutationQuota:
        budget = self._limits.budget(user, client_id)
        strict = api_version >= STRICT_SINCE_VERSION
        if budget.bound is None:
            return MutationQuota(None, None, strict, self._clock)
        key = (budget.user, budget.client_id)
        bucket = self._buckets.get(key)
        if bucket is None:  # Kafka's bucket starts empty at time 0: full by its first use
            burst = WINDOW_NUM * WINDOW_MS / 1000 * budget.bound
            bucket = self._buckets[key] = TokenBucket(burst, self._clock())
        return MutationQuota(bucket, budget.bound, strict, self._clock)
