"""Which throttle alerts are stale (issue 24, item 2): judged by the alerts' own times, remembered
in the journal, bounded in age and size. The webhook bodies are Alertmanager's captured ones."""

from __future__ import annotations

import contextlib
import sqlite3
from datetime import UTC, datetime, timedelta

import pytest

from devkit.alertmanager import rfc3339, throttle_webhook
from enforcer.alert_episodes import AlertEpisodes
from enforcer.journal import Journal
from enforcer.journal import _stamp as utc_stamp
from enforcer.target_factor import ThrottleAlert, extract
from enforcer.webhook_payload import PayloadError, webhook_from_dict
from kvq.settings.config import CLUSTER_LABEL_DEFAULT
from tests.clock_support import SettableClock, wall_clock

T1 = datetime(2026, 11, 22, 15, 0, tzinfo=UTC)
T2 = T1 + timedelta(minutes=20)
T3 = T2 + timedelta(minutes=5)
NAME = "KafkaVolumeQuotaThrottle"


@pytest.fixture
def clock() -> SettableClock[datetime]:
    return wall_clock(2026, 11, 25, 9)


@pytest.fixture
def journal(tmp_path, clock):
    opened = Journal(tmp_path / "j.sqlite3", clock=clock)
    yield opened
    opened.close()


def alerts(factor: float | None, starts_at: datetime, ends_at: datetime | None = None, **more):
    body = throttle_webhook(cluster="c1", factor=factor, starts_at=starts_at, ends_at=ends_at)
    for alert in body["alerts"]:
        alert.update(more)
    return extract(webhook_from_dict(body), NAME, ["c1"], CLUSTER_LABEL_DEFAULT).throttle


def firing(starts_at: datetime, **more) -> tuple[ThrottleAlert, ...]:
    return alerts(0.5, starts_at, **more)


def resolved(starts_at: datetime, ends_at: datetime) -> tuple[ThrottleAlert, ...]:
    return alerts(None, starts_at, ends_at)


def test_a_firing_of_an_episode_already_resolved_is_stale_a_new_episode_is_not(journal, clock):
    heard = AlertEpisodes(journal, clock=clock)
    assert heard.stale(resolved(T1, T2)) == set()
    (alert,) = firing(T1)
    assert heard.stale([alert]) == {alert.key}
    assert heard.stale(firing(T2)) == {alert.key}, "started when the episode ended: the same"
    assert heard.stale(firing(T3)) == set(), "a new episode"


def test_a_resolution_of_an_older_episode_is_stale_once_the_next_one_fired(journal, clock):
    heard = AlertEpisodes(journal, clock=clock)
    assert heard.stale(firing(T3)) == set()
    (alert,) = resolved(T1, T2)
    assert heard.stale([alert]) == {alert.key}
    assert heard.stale(resolved(T3, T3 + timedelta(minutes=1))) == set(), "ends the new one"


def test_an_episode_whose_start_moves_earlier_is_still_the_same_episode(journal, clock):
    """Alertmanager keeps the earliest startsAt when merging what HA Prometheus replicas send:
    later notifications of one episode may carry an earlier start than the first one."""
    heard = AlertEpisodes(journal, clock=clock)
    assert heard.stale(firing(T1 + timedelta(seconds=15))) == set()
    assert heard.stale(firing(T1)) == set()
    assert heard.stale(resolved(T1, T2)) == set()


def test_a_firing_with_a_future_ends_at_is_judged_by_its_start(journal, clock):
    """Some Alertmanager versions send a firing alert's endsAt as a time in the future."""
    heard = AlertEpisodes(journal, clock=clock)
    later = rfc3339(T3 + timedelta(hours=1))
    assert heard.stale(resolved(T1, T2)) == set()
    (alert,) = firing(T1, endsAt=later)
    assert alert.firing and heard.stale([alert]) == {alert.key}
    assert heard.stale(firing(T3, endsAt=later)) == set()


def test_a_firing_is_stale_only_within_the_window_after_its_resolution_arrived(journal, clock):
    """Alertmanager resolves an alert Prometheus stopped sending and, when Prometheus resumes
    it, sends it with its old startsAt: after kvq.enforcer.stale.window that is no late retry."""
    heard = AlertEpisodes(journal, window=timedelta(minutes=2), clock=clock)
    (resolution,) = resolved(T1, T2)
    assert heard.stale([resolution]) == set()
    clock.now += timedelta(minutes=1, seconds=59)
    (alert,) = firing(T1)
    assert heard.stale([alert]) == {alert.key}, "a retry"
    assert heard.stale([resolution]) == set()  # heard again: the window still counts from before
    clock.now += timedelta(seconds=1)
    assert heard.stale([alert]) == set(), "a resumed alert"
    assert heard.stale([alert]) == set(), "and its repeats"


def test_a_later_resolution_opens_a_new_window(journal, clock):
    heard = AlertEpisodes(journal, window=timedelta(minutes=2), clock=clock)
    heard.stale(resolved(T1, T2))
    clock.now += timedelta(minutes=10)
    heard.stale(resolved(T1, T3))  # the resumed alert resolved again, by Prometheus this time
    clock.now += timedelta(seconds=30)
    (alert,) = firing(T1)
    assert heard.stale([alert]) == {alert.key}


def test_a_resolution_received_later_than_now_does_not_make_a_firing_stale(journal, clock):
    """The clock was set back: ignoring firings until it catches up could let a disk fill."""
    heard = AlertEpisodes(journal, clock=clock)
    heard.stale(resolved(T1, T2))
    clock.now -= timedelta(seconds=1)
    assert heard.stale(firing(T1)) == set()


def test_a_cluster_prometheus_says_is_throttling_has_no_stale_firings(journal, clock):
    heard = AlertEpisodes(journal, clock=clock)
    heard.stale(resolved(T1, T2))
    (alert,) = firing(T1)
    assert heard.stale_firings([alert]) == {"c1"}
    assert heard.stale([alert], throttling={"c2"}) == {alert.key}
    assert heard.stale([alert], throttling={"c1"}) == set()
    (resolution,) = resolved(T1, T2)
    heard.stale(firing(T3))
    assert heard.stale([resolution], throttling={"c1"}) == {resolution.key}, "firings only"


def test_stale_firings_records_nothing(journal, clock):
    heard = AlertEpisodes(journal, clock=clock)
    assert heard.stale_firings(resolved(T1, T2)) == set()
    assert heard.stale_firings(firing(T3)) == set()
    assert heard.stale(resolved(T1, T2)) == set(), "no firing was recorded"
    assert heard.stale_firings(firing(T1)) == {"c1"}
    assert heard.stale(resolved(T1, T2 + timedelta(seconds=1))) == set()


def test_a_table_written_before_receipts_were_kept_gets_the_column(tmp_path, clock):
    """Such a row's resolution has no receipt time: no firing is judged stale by it."""
    path = tmp_path / "old.sqlite3"
    with contextlib.closing(sqlite3.connect(path)) as db, db:  # a journal of an earlier version
        db.execute(
            "CREATE TABLE alert_episode (cluster TEXT NOT NULL, fingerprint TEXT NOT NULL, "
            "started_at TEXT, ended_at TEXT, changed_at TEXT NOT NULL, "
            "PRIMARY KEY (cluster, fingerprint))"
        )
        db.execute(
            "INSERT INTO alert_episode VALUES ('c1', 'old', NULL, ?, ?)",
            (utc_stamp(T2), utc_stamp(clock.now)),
        )
    journal = Journal(path)
    heard = AlertEpisodes(journal, clock=clock)
    assert heard.stale([ThrottleAlert("c1", "old", 0.5, T1)]) == set()
    (resolution,) = resolved(T1, T2)
    heard.stale([resolution])
    (alert,) = firing(T1)
    assert AlertEpisodes(journal, clock=clock).stale([alert]) == {alert.key}
    journal.close()


def test_a_repeated_notification_writes_nothing(journal, clock, monkeypatch):
    heard = AlertEpisodes(journal, clock=clock)
    heard.stale(firing(T1))
    writes = []
    real_write = journal.write
    monkeypatch.setattr(journal, "write", lambda s: writes.append(s) or real_write(s))
    assert heard.stale(firing(T1)) == set()
    assert writes == []


def test_what_was_heard_survives_a_restart(tmp_path, journal, clock):
    AlertEpisodes(journal, clock=clock).stale(resolved(T1, T2))
    journal.close()
    reopened = Journal(tmp_path / "j.sqlite3", clock=clock)
    try:
        (alert,) = firing(T1)
        assert AlertEpisodes(reopened, clock=clock).stale([alert]) == {alert.key}
    finally:
        reopened.close()


def test_an_alert_unchanged_for_the_expiry_is_forgotten(journal, clock):
    heard = AlertEpisodes(journal, clock=clock)
    heard.stale(firing(T3))
    heard.expire(clock.now - timedelta(hours=12))
    assert heard.stale(resolved(T1, T2)) != set(), "still remembered"
    clock.now += timedelta(hours=12, seconds=1)
    heard.expire(clock.now - timedelta(hours=12))
    assert AlertEpisodes(journal, clock=clock).stale(resolved(T1, T2)) == set(), "in the journal"
    assert heard.stale(resolved(T1, T2)) == set(), "forgotten: a resolution is taken as it comes"


def test_at_most_keep_alerts_are_remembered_the_most_recently_changed(journal, clock):
    heard = AlertEpisodes(journal, clock=clock)
    fingerprints = [f"f{i}" for i in range(5)]
    for fingerprint in fingerprints:
        clock.now += timedelta(seconds=1)
        (alert,) = resolved(T1, T2)
        heard.stale([ThrottleAlert("c1", fingerprint, None, alert.starts_at, alert.ends_at)])
    heard.expire(clock.now - timedelta(hours=12), keep=2)
    for source in (heard, AlertEpisodes(journal, clock=clock)):
        stale = source.stale([ThrottleAlert("c1", f, 0.5, T1) for f in fingerprints])
        assert stale == {("c1", "f3"), ("c1", "f4")}


@pytest.mark.parametrize("key", ["startsAt", "endsAt"])
@pytest.mark.parametrize(
    "text", ["2026-11-22T15:00:00", "9999-12-31T23:59:59-14:00", "0001-01-01T00:00:00+14:00"]
)
def test_a_time_without_an_offset_or_a_utc_equivalent_is_refused_naming_the_field(key, text):
    body = throttle_webhook(cluster="c1", factor=None)
    body["alerts"][0][key] = text
    with pytest.raises(PayloadError, match=rf"\$\.alerts\[0\]\.{key} must be .* offset"):
        webhook_from_dict(body)
