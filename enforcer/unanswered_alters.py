"""AlterClientQuotas requests that got no answer: they may still be applied by Kafka.

A broker keeps forwarding a request to the controller for 60 s (BrokerServer's forwarding
channel, retryTimeoutMs=60000) and the controller applies what it received without a deadline,
so a request the client gave up on can land after a later one. Until `settle_s` has passed since
the last such request, the values it carries are the enforcer's own (never an operator's drift)
and no verification of Kafka's state is final.

Every request is journaled before it is sent and removed from the journal when it is answered,
so after a crash (the enforcer killed while waiting, or after a timeout) the requests that may
still land are known again, with `settle_s` counted from when they were sent.

With the state in Kafka another replica reads such a request as in doubt, `settle_s` counted from
when this one journaled it. A request is sent only if journaling it took at most
JOURNAL_WRITE_LIMIT_S: a journal write that took longer may have been committed in Kafka just
before another replica took over and answered only when the network came back, and the request
sent then could land after that replica's settle time is over.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from enforcer.journal import ClusterJournal, JournalError
from enforcer.quota_plan import Change, Pair, same_value

SETTLE_S = 75.0
"""Default: the broker's 60 s of forwarding plus a margin (`kvq.enforcer.alter.settle`)."""
JOURNAL_WRITE_LIMIT_S = 5.0
"""A request whose journal write took longer is not sent: it is sent within this long of being
journaled, lands within this plus the request timeout (5 s) plus the broker's 60 s of forwarding,
inside SETTLE_S."""


class SlowJournalWrite(JournalError):
    """Journaling a request took too long to send it safely; the apply is tried again."""


class UnansweredAlters:
    """What requests without an answer may still set, and until when; kept in the journal."""

    def __init__(
        self, settle_s: float, monotonic: Callable[[], float], journal: ClusterJournal
    ) -> None:
        self.settle_s = settle_s
        self._monotonic = monotonic
        self._journal = journal
        self.deadline: float | None = None
        """Monotonic time after which none of them can land (None: none in doubt)."""
        self._values: dict[Pair, list[float | None]] = {}
        self._load()

    def _load(self) -> None:
        """Take in the requests a previous run sent without getting an answer (JournalError
        when the journal cannot be read). One sent longer than `settle_s` ago still waits for
        one more DescribeClientQuotas."""
        now, unix_now = self._monotonic(), self._journal.unix_now()
        for sent_at, pair, value in self._journal.in_doubt():
            left = min(max(sent_at + self.settle_s - unix_now, 0.0), self.settle_s)
            self.deadline = max(self.deadline or now, now + left)
            if pair is not None:
                self._values.setdefault(pair, []).append(value)

    def sending(self, changes: Iterable[Change]) -> int:
        """Journal `changes` before they are sent; returns the request's number. The values of
        Kafka's copy of the originals are left out: a late one is repaired like any other
        difference of the copy. Raises SlowJournalWrite when the journal write took longer than
        JOURNAL_WRITE_LIMIT_S (the request stays journaled as in doubt, never sent)."""
        values = [((c.entity, c.key), c.value) for c in changes if not c.entity.is_originals_record]
        started = self._monotonic()
        request = self._journal.sending(values)
        took = self._monotonic() - started
        if took > JOURNAL_WRITE_LIMIT_S:
            raise SlowJournalWrite(
                f"journaling an AlterClientQuotas took {took:.1f} s (more than "
                f"{JOURNAL_WRITE_LIMIT_S:g} s): not sending it, another replica may have taken "
                "over meanwhile (trying again)"
            )
        return request

    def answered(self, request: int) -> None:
        """Kafka answered the request (applied or refused it): it cannot land later."""
        self._journal.answered(request)

    def record(self, changes: Iterable[Change]) -> None:
        """`changes` were sent and got no answer (they stay journaled)."""
        self.deadline = self._monotonic() + self.settle_s
        for change in changes:
            self._values.setdefault((change.entity, change.key), []).append(change.value)

    def may_have_set(self, pair: Pair, value: float | None) -> bool:
        return any(same_value(value, v) for v in self._values.get(pair, ()))

    def final(self, described_at: float) -> bool:
        """True when a DescribeClientQuotas made at `described_at` (monotonic) is final: no
        unanswered request could land after it. Forgets them once it is."""
        if self.deadline is not None and described_at >= self.deadline:
            self._journal.forget_unanswered()
            self.deadline = None
            self._values.clear()
        return self.deadline is None

    def due_in(self) -> float | None:
        """Seconds until none can land (None: none in doubt)."""
        if self.deadline is None:
            return None
        return max(0.0, self.deadline - self._monotonic())
