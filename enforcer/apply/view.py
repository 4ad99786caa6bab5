"""The view an apply acts on: one DescribeClientQuotas answer, Kafka's copy of the originals
split off, that shows no episode the journal knows as finished."""

from __future__ import annotations

from typing import NamedTuple

from enforcer import kafka_originals
from enforcer.apply.cluster_io import ClusterIO
from enforcer.apply.result import ApplyError
from enforcer.journal import Episode
from enforcer.kafka_originals import KafkaOriginals
from enforcer.quota_plan import Snapshot


class View(NamedTuple):
    """One DescribeClientQuotas answer an apply acts on."""

    described_at: float
    """Monotonic time it was asked for."""
    snapshot: Snapshot
    """The quotas (Kafka's copy of the originals left out)."""
    copy: KafkaOriginals


def describe(io: ClusterIO) -> View:
    """One DescribeClientQuotas, now."""
    described_at = io.monotonic()
    snapshot, copy = kafka_originals.split(io.client.describe())
    return View(described_at, snapshot, copy)


def caught_up_view(
    io: ClusterIO, active: Episode | None, dry_run: bool, recent: View | None = None
) -> View:
    """A DescribeClientQuotas answer that shows no episode the journal knows as finished
    (`recent`, a view a check just read, is taken first instead of describing).

    A broker's metadata may lag behind the controller's: its view can still show the copy of
    an episode already restored (whose marker was removed before the journal finished it),
    with that episode's throttled values. That is no throttle whose journal was lost, and
    none of its values may become originals: describe again a few times, then fail the apply
    (retried later). The finished episode's entities are removed again on the way, in case
    it is a removal Kafka lost rather than a lagging view."""
    active_id = active.episode_id if active is not None else None
    finished: frozenset[str] | None = None  # read from the journal only when needed
    shown: list[str] = []
    for attempt in range(io.verify_attempts):
        view = recent if attempt == 0 and recent is not None else describe(io)
        others = set(view.copy.marked) - {active_id}
        if others and finished is None and not dry_run:
            finished = io.journal.finished_ids()
        shown = sorted(others & (finished or frozenset()))
        if not shown:
            return view
        if attempt + 1 < io.verify_attempts:
            io.sleep(io.verify_delay_s)
    io.alter(kafka_originals.removals(e for i in shown for e in view.copy.entities[i]))
    raise ApplyError(
        "the brokers' view of the quotas lags behind: it still shows Kafka's copy of the "
        f"originals of episode(s) {', '.join(shown)}, already restored (removed again in "
        "case the removal was lost); not acting on that view, retrying later"
    )
