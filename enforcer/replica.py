"""Replica: an enforcer whose state lives in Kafka (kvq.enforcer.state.store=kafka), one of several.

Every replica serves HTTP and takes webhooks: it checks a webhook as the acting one would, appends
it to the inbox (inbox.py) and answers once Kafka has it. Only the replica the election picks
(acting_role.py) acts: when it is picked it takes over every cluster's state (kafka_state.py:
fencing whoever acted before, reading the state back), builds an `Enforcer` on it and runs its
reconcile loop; it handles the inbox in order. When it is no longer picked, or a write of its is
refused because another replica took over, it releases the state first (so an apply in progress
stops at its next journal write, before its next AlterClientQuotas), then stops the loop and drops
the Enforcer. A replica picked again takes over again: its working copy is read back from Kafka,
never trusted.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from enforcer.acting_role import ActingRole
from enforcer.apply.result import ApplyError
from enforcer.enforcer import Enforcer
from enforcer.inbox import Inbox
from enforcer.journal import Journal, NotActing
from enforcer.kafka_state import KafkaState
from enforcer.metrics import EnforcerMetrics
from enforcer.webhook_payload import PayloadError, parse_webhook

log = logging.getLogger("kvq.enforcer")

RoleFactory = Callable[[Callable[[bool], bool], Callable[[str, bytes], None]], ActingRole]
"""Makes the election membership, given what to call when acting changes and per inbox entry."""


class Acting:
    """The Enforcer of the replica while it acts, and its reconcile loop."""

    def __init__(self, enforcer: Enforcer) -> None:
        self.enforcer = enforcer
        self.stop = threading.Event()
        self.loop = threading.Thread(
            target=enforcer.reconcile_forever,
            args=(self.stop, enforcer.reconcile_interval),
            name="kvq-reconcile",
            daemon=True,
        )
        self.loop.start()

    def end(self) -> None:
        """Stop the loop (after its step in progress) and close the clusters' clients; the
        journal stays open (the next Enforcer works on it)."""
        self.stop.set()
        self.loop.join()
        for applier in self.enforcer.appliers.values():
            applier.close()


class Replica:
    """One enforcer replica with its state in Kafka."""

    def __init__(
        self,
        clusters: tuple[str, ...],
        journal: Journal,
        state: KafkaState,
        inbox: Inbox,
        build: Callable[[], Enforcer],
        metrics: EnforcerMetrics,
        role_of: RoleFactory,
    ) -> None:
        """`build()`: a new Enforcer on `journal` (called each time this replica starts acting).
        The inbox is in the first of `clusters`."""
        self.clusters = clusters
        self.journal = journal
        self.state = state
        self.inbox = inbox
        self.metrics = metrics
        self._build = build
        self._lock = threading.Lock()
        self._acting: Acting | None = None
        self.metrics.set_acting(False)
        self.role = role_of(self._on_acting, self._on_inbox)
        state.on_lost = self.role.lost

    # ---- what the HTTP views use -----------------------------------------------------------

    def take(self, body: bytes) -> tuple[str, dict[str, Any]]:
        """Check a webhook's body and append it to the inbox: ("queued", the answer). Raises
        PayloadError (nothing appended) or inbox.InboxError (Kafka did not take it)."""
        parse_webhook(body)
        return "queued", {"queued": self.inbox.append(body)}

    @property
    def enforcer(self) -> Enforcer | None:
        """The Enforcer while this replica acts, else None."""
        acting = self._acting
        return None if acting is None else acting.enforcer

    def status(self) -> dict[str, Any]:
        enforcer = self.enforcer
        if enforcer is None:
            return {"acting": False, "clusters": {}}
        return {"acting": True, **enforcer.status()}

    def health(self) -> dict[str, Any]:
        """The acting replica's health is its Enforcer's; a standby is ok unless it cannot
        take part in the election (then nothing would take over from the acting one)."""
        enforcer = self.enforcer
        if enforcer is not None:
            return {**enforcer.health(), "acting": True}
        error = self.role.error
        return {"status": "degraded" if error else "ok", "acting": False, "election": error}

    # ---- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        self.role.start()

    def leave(self) -> None:
        """Leave the election (another replica takes over at once) and stop acting; webhooks
        are still queued for whoever acts. First on a shutdown, so that a replica going away
        is never the one elected while it drains its requests."""
        self.role.stop()
        self._on_acting(False)

    def close(self) -> None:
        """Leave the election, stop acting, close."""
        self.leave()
        self.inbox.close()
        self.state.close()
        self.journal.close()

    # ---- what the election calls (on its own thread) ---------------------------------------

    def _on_acting(self, acting: bool) -> bool:
        with self._lock:
            return self._start_acting() if acting else self._stop_acting()

    def _start_acting(self) -> bool:
        if self._acting is not None:
            return True
        try:
            rows = sum(self.state.take_over(self.journal, c) for c in self.clusters)
            enforcer = self._build()
        except Exception as exc:  # noqa: BLE001 - retried by the election
            self.state.release()
            log.warning("cannot start acting (retrying): %s", exc)
            return False
        self._acting = Acting(enforcer)
        self.metrics.set_acting(True)
        log.info(
            "acting on %s as member %s of group %s (state of %d rows read from Kafka)",
            ", ".join(self.clusters),
            self.role.member_id,
            self.role.group_id,
            rows,
        )
        return True

    def _stop_acting(self) -> bool:
        acting, self._acting = self._acting, None
        self.state.release()  # first: an apply in progress stops at its next journal write
        if acting is not None:
            self.metrics.set_acting(False)  # before the wait: a step may wait for Kafka
            acting.end()
            log.info("standing by: another replica acts on %s", ", ".join(self.clusters))
        return False

    def _on_inbox(self, key: str, body: bytes) -> None:
        enforcer = self.enforcer
        if enforcer is None:
            raise NotActing("not acting (yet)")
        outcome = "handled"
        try:
            enforcer.handle(parse_webhook(body))
        except PayloadError as exc:  # checked when accepted: only a later version's body
            outcome = "dropped"
            log.warning("dropped inbox entry %s: %s", key, exc)
        except ApplyError as exc:  # the alerts are recorded: the reconcile loop retries
            outcome = "recorded"
            log.warning("inbox entry %s: recorded, not applied yet: %s", key, exc)
        self.state.forget(self.clusters[0], [key])  # NotActing: the fence told the role
        self.metrics.inbox_entries.labels(outcome).inc()
