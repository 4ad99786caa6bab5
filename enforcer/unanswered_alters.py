"""AlterClientQuotas requests that got no answer: they may still be applied by Kafka.

A broker keeps forwarding a request to the controller for 60 s (BrokerServer's forwarding
channel, retryTimeoutMs=60000) and the controller applies what it received without a deadline,
so a request the client gave up on can land after a later one. Until `settle_s` has passed since
the last such request, the values it carries are the enforcer's own (never an operator's drift)
and no verification of Kafka's state is final.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from enforcer.quota_plan import Change, Pair, same_value

SETTLE_S = 75.0
"""Default: the broker's 60 s of forwarding plus a margin (`kvq.enforcer.alter.settle`)."""


class UnansweredAlters:
    """What requests without an answer may still set, and until when."""

    def __init__(self, settle_s: float, monotonic: Callable[[], float]) -> None:
        self.settle_s = settle_s
        self._monotonic = monotonic
        self.deadline: float | None = None
        """Monotonic time after which none of them can land (None: none in doubt)."""
        self._values: dict[Pair, list[float | None]] = {}

    def record(self, changes: Iterable[Change]) -> None:
        """`changes` were sent and got no answer."""
        self.deadline = self._monotonic() + self.settle_s
        for change in changes:
            self._values.setdefault((change.entity, change.key), []).append(change.value)

    def may_have_set(self, pair: Pair, value: float | None) -> bool:
        return any(same_value(value, v) for v in self._values.get(pair, ()))

    def final(self, described_at: float) -> bool:
        """True when a DescribeClientQuotas made at `described_at` (monotonic) is final: no
        unanswered request could land after it. Forgets them once it is."""
        if self.deadline is not None and described_at >= self.deadline:
            self.deadline = None
            self._values.clear()
        return self.deadline is None

    def due_in(self) -> float | None:
        """Seconds until none can land (None: none in doubt)."""
        if self.deadline is None:
            return None
        return max(0.0, self.deadline - self._monotonic())
