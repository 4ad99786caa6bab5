"""Stale notifications: what the enforcer already heard about each alert's episodes.

Alertmanager can deliver a group's notifications out of order: a POST it gave up on (timeout) may
still be waiting in the enforcer when the retry and the next notification are answered, and each
replica of an HA pair sends on its own. A firing notification handled after the resolution of the
same episode would throttle until kvq.enforcer.alert.expiry; a resolution of an old episode handled
after the next episode's firing would lift a throttle the disk still needs.

The alerts' own timestamps order them (never the enforcer's clock). An alert (one `fingerprint`:
its label set) fires in episodes: a firing alert carries its episode's `startsAt`, a resolved one
also its `endsAt`, and a new episode starts after the previous one ended. So, per (cluster,
fingerprint), table `alert_episode` keeps the latest `startsAt` of a firing and the latest `endsAt`
of a resolution heard, when that resolution was received (the enforcer's clock), and a listed
alert is **stale** when

- firing, its `startsAt` is at or before a resolution heard, and it arrives within
  kvq.enforcer.stale.window of receiving that resolution: its episode is over;
- resolved, and its `endsAt` is before the start of a firing heard: it ended an older episode.

Only starts are compared with ends: Alertmanager may move an episode's `startsAt` earlier while it
fires (it keeps the earliest when merging what HA Prometheus replicas send), so two starts of the
same episode may differ, and a firing is never judged by another firing.

Why the window: Alertmanager resolves an alert itself when Prometheus stops sending it (a partition
longer than the alert's `endsAt`, 4 minutes by default); when Prometheus then resumes the same,
still active, alert, Alertmanager sends it with its old `startsAt`, exactly like a late retry. A
retry comes within seconds (Alertmanager cancels a notification and its retries at the next
group_interval, at least 10 s, plus 15 s per HA peer position); a resumed alert is re-sent every
repeat_interval. So a firing judged stale is ignored only shortly after its resolution arrived,
and the caller may overrule the judgement (Prometheus says the cluster throttles now): ignoring a
genuine firing lets a disk fill, throttling a while too long does not.

A stale alert changes nothing in its group's state. A changed row is written in its own
transaction before the group's state: both writes are idempotent, so a crash between them is made
good by Alertmanager's retry. A row that has not changed for kvq.enforcer.alert.expiry is forgotten
(late deliveries come within minutes), and at most MAX_REMEMBERED rows are kept.

Limitation: a resumed alert whose first notification arrives within the window of the resolution
(a partition that ends just after Alertmanager resolved the alert) is ignored, unless Prometheus
confirms it; it throttles at the latest with Alertmanager's next repeat (repeat_interval). A new
episode (Prometheus resolved it, then it fires again) always has a later `startsAt` and throttles.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

from enforcer.journal import Journal
from enforcer.journal import _stamp as utc_stamp
from enforcer.target_factor import ThrottleAlert

MAX_REMEMBERED = 10_000
"""Rows kept at most (the newest seen): far above the throttle alerts a cluster ever has."""

DEFAULT_WINDOW = timedelta(minutes=2)
"""kvq.enforcer.stale.window's default."""


@dataclass(frozen=True, slots=True)
class Receipt:
    """The moment a notification is judged, and the start of the reorder window before it (UTC
    stamps: fixed width, so they compare as text)."""

    now: str
    window_opened: str

    @classmethod
    def at(cls, now: datetime, window: timedelta) -> Receipt:
        return cls(utc_stamp(now), utc_stamp(now - window))

    def recent(self, received_at: str | None) -> bool:
        """Received within the window. A time after now (the clock was set back) is not: the
        firing it would make stale throttles, the safe side."""
        return received_at is not None and self.window_opened < received_at <= self.now


@dataclass(frozen=True, slots=True)
class Heard:
    """The latest firing start and resolution end heard of for one alert (None: none yet), when
    that resolution was received and when the row last changed (UTC stamps)."""

    started_at: str | None = None
    ended_at: str | None = None
    resolved_at: str | None = field(default=None, compare=False)
    """When the resolution that ended at `ended_at` was first received (None in a row written
    before this was kept: no firing is judged stale by it)."""
    changed_at: str = field(default="", compare=False)

    def is_stale(self, alert: ThrottleAlert, receipt: Receipt) -> bool:
        if alert.firing:
            return (
                self.ended_at is not None
                and utc_stamp(alert.starts_at) <= self.ended_at
                and receipt.recent(self.resolved_at)
            )
        return self.started_at is not None and _end(alert) < self.started_at

    def after(self, alert: ThrottleAlert, receipt: Receipt) -> Heard:
        """What is known once `alert` is heard too (at `receipt`)."""
        if alert.firing:
            return replace(self, started_at=_latest(self.started_at, utc_stamp(alert.starts_at)))
        ended_at = _latest(self.ended_at, _end(alert))
        if ended_at == self.ended_at:
            return self  # a repeat does not move the window: it opened with the first receipt
        return replace(self, ended_at=ended_at, resolved_at=receipt.now)


def _end(alert: ThrottleAlert) -> str:
    """A resolution's end (its start where Alertmanager sent none)."""
    return utc_stamp(alert.ends_at or alert.starts_at)


def _latest(known: str | None, heard: str) -> str:
    return heard if known is None else max(known, heard)


class AlertEpisodes:
    """Table `alert_episode` of the journal, mirrored in memory (this process owns the journal):
    a repeated notification, which changes nothing, costs no journal access. The table is created
    on first use, so the journal's own schema and start-up are unchanged.

    `window` is kvq.enforcer.stale.window; `clock` (UTC) times receipts and changes.
    """

    def __init__(
        self,
        journal: Journal,
        window: timedelta = DEFAULT_WINDOW,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._journal = journal
        self.window = window
        self._clock = clock
        self._heard: dict[tuple[str, str], Heard] | None = None
        self._lock = threading.Lock()
        """Webhooks and the reconcile loop's expiry change the table and its mirror together."""

    def stale_firings(self, alerts: Iterable[ThrottleAlert]) -> set[str]:
        """The clusters of the firing `alerts` that would be judged stale now; records nothing.
        (The caller asks Prometheus about these before `stale`, outside of any lock.)"""
        with self._lock:
            heard = self._loaded()
            receipt = Receipt.at(self._clock(), self.window)
            return {
                alert.cluster
                for alert in alerts
                if alert.firing and heard.get(alert.key, Heard()).is_stale(alert, receipt)
            }

    def stale(
        self, alerts: Iterable[ThrottleAlert], throttling: Collection[str] = ()
    ) -> set[tuple[str, str]]:
        """Record what `alerts` say; return the (cluster, fingerprint) of the stale ones. A firing
        alert of a cluster in `throttling` (Prometheus says it throttles now) is never stale."""
        with self._lock:
            return self._stale(alerts, throttling)

    def _stale(
        self, alerts: Iterable[ThrottleAlert], throttling: Collection[str]
    ) -> set[tuple[str, str]]:
        heard = self._loaded()
        receipt = Receipt.at(self._clock(), self.window)
        changed: dict[tuple[str, str], Heard] = {}
        stale = set()
        for alert in alerts:
            known = changed.get(alert.key) or heard.get(alert.key) or Heard()
            overruled = alert.firing and alert.cluster in throttling
            if known.is_stale(alert, receipt) and not overruled:
                stale.add(alert.key)  # tells nothing new
                continue
            after = known.after(alert, receipt)
            if after != known:
                changed[alert.key] = after
        if changed:
            self._journal.write(
                lambda db: db.executemany(
                    "INSERT OR REPLACE INTO alert_episode (cluster, fingerprint, started_at, "
                    "ended_at, changed_at, resolved_at) VALUES (?,?,?,?,?,?)",
                    [
                        (c, f, h.started_at, h.ended_at, receipt.now, h.resolved_at)
                        for (c, f), h in changed.items()
                    ],
                )
            )
            heard.update({key: replace(h, changed_at=receipt.now) for key, h in changed.items()})
        return stale

    def expire(self, older_than: datetime, keep: int = MAX_REMEMBERED) -> None:
        """Forget alerts whose episodes did not change since `older_than`; keep at most `keep`
        (the most recently changed)."""
        with self._lock:
            self._expire(older_than, keep)

    def _expire(self, older_than: datetime, keep: int) -> None:
        heard = self._loaded()
        cutoff = utc_stamp(older_than)
        if len(heard) <= keep and not any(h.changed_at < cutoff for h in heard.values()):
            return

        def run(db: sqlite3.Connection) -> dict[tuple[str, str], Heard]:
            db.execute("DELETE FROM alert_episode WHERE changed_at < ?", (cutoff,))
            db.execute(
                "DELETE FROM alert_episode WHERE rowid NOT IN "
                "(SELECT rowid FROM alert_episode ORDER BY changed_at DESC LIMIT ?)",
                (keep,),
            )
            return _rows(db)

        self._heard = self._journal.write(run)

    def _loaded(self) -> dict[tuple[str, str], Heard]:
        if self._heard is None:
            self._heard = self._journal.read(_rows)
        return self._heard


def _rows(db: sqlite3.Connection) -> dict[tuple[str, str], Heard]:
    rows = db.execute(
        "SELECT cluster, fingerprint, started_at, ended_at, resolved_at, changed_at "
        "FROM alert_episode"
    ).fetchall()
    return {(c, f): Heard(s, e, r, at) for c, f, s, e, r, at in rows}
