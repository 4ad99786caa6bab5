"""Late references: an episode begun without observed rates asks for them again.

With observed-rate references an episode scales each entity's highest rate before it started.
When the first apply of an episode finds none (Prometheus did not answer that once, or did not
have the brokers' rate series yet) the episode scales the originals or bases, which are often
far above what the entities write: a factor binds nothing until it nears 0, and the volume
fills towards its limit as if graceful slowdown were off. So while no pair of an active episode
has a reference, the rates are asked again as of the episode's start (what that first ask would
have found, never a rate the throttle held), at most every `RETRY_SECONDS`; once found they are
journaled with the episode and every later factor scales them. Only the process that began the
episode asks: an episode recovered from Kafka's copy of the originals, or one a restarted
enforcer takes over, keeps what it has."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from enforcer.journal import PairRecord
from enforcer.observed_rates import ObservedRates
from enforcer.quota_plan import Pair, QuotaPolicy

RETRY_SECONDS = 10.0
"""How often an episode without references asks for them again: every few of graceful
slowdown's steps (a poll, 5 s at the recommended interval), three instant queries each."""


@dataclass
class LateReferences:
    """One cluster's asks for the references its active episode began without."""

    observed_rates: ObservedRates
    monotonic: Callable[[], float] = time.monotonic
    retry_seconds: float = RETRY_SECONDS
    _asked: tuple[str | None, float] | None = field(default=None, init=False)
    """(episode id, when) of the last ask (None: a new episode's first, `asked_first`)."""
    _found: tuple[str, dict[Pair, float]] | None = field(default=None, init=False)
    """(episode id, references) found and not journaled yet: a check's plan (which writes
    nothing) may find them before the apply that journals them."""

    def asked_first(self) -> None:
        """A new episode's first apply asked for its references (the next ask waits)."""
        self._asked = (None, self.monotonic())

    def found(
        self,
        cluster: str,
        policy: QuotaPolicy,
        records: Mapping[Pair, PairRecord],
        episode_id: str,
        started_at: str,
    ) -> dict[Pair, float]:
        """The references of the active episode `episode_id` (started at `started_at`, a
        journal stamp), begun by this process without any, if they are found now; {} otherwise
        (they have some, it was not begun here, or the last ask is under `retry_seconds` old)."""
        if any(record.reference is not None for record in records.values()):
            self._found = None
            return {}
        if self._found is not None and self._found[0] == episode_id:
            return self._found[1]
        # Only an episode this process began by asking (`asked_first`): one recovered from
        # Kafka's copy of the originals began throttled, and the rates before its start may be
        # the ones the throttle held.
        if self._asked is None or self._asked[0] not in (None, episode_id):
            return {}
        now = self.monotonic()
        if now - self._asked[1] < self.retry_seconds:
            return {}
        self._asked = (episode_id, now)
        originals = {pair: record.original for pair, record in records.items()}
        started = datetime.fromisoformat(started_at)
        references = self.observed_rates.as_of(cluster, policy, originals, started)
        if references:
            self._found = (episode_id, references)
        return references
