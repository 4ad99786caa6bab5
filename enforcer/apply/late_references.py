"""Late references: an episode begun without observed rates asks for them again.

With observed-rate references an episode scales each entity's highest rate before it started.
When the first apply of an episode finds none (Prometheus did not answer that once, or did not
have the brokers' rate series yet) the episode scales the originals or bases, which are often
far above what the entities write: a factor binds nothing until it nears 0, and the volume
fills towards its limit as if graceful slowdown were off. So while no pair of an active episode
has a reference, the rates are asked again as of the episode's start (what that first ask would
have found, never a rate the throttle held), at most every `RETRY_SECONDS`; once found they are
journaled with the episode and every later factor scales them."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from enforcer.journal import PairRecord
from enforcer.observed_rates import ObservedRates
from enforcer.quota_plan import Pair, QuotaPolicy

log = logging.getLogger("kvq.enforcer")

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
        journal stamp) if none of its pairs has one and they are found now; {} otherwise."""
        if any(record.reference is not None for record in records.values()):
            self._found = None
            return {}
        if self._found is not None and self._found[0] == episode_id:
            return self._found[1]
        now = self.monotonic()
        asked_at = self._asked[1] if self._asked and self._asked[0] in (None, episode_id) else None
        if asked_at is not None and now - asked_at < self.retry_seconds:
            return {}
        self._asked = (episode_id, now)
        originals = {pair: record.original for pair, record in records.items()}
        started = datetime.fromisoformat(started_at)
        references = self.observed_rates.as_of(cluster, policy, originals, started)
        if references:
            self._found = (episode_id, references)
        return references
