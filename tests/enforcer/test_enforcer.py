"""Alerts to appliers over time: restart recovery, retries, and expiry of alerts no longer sent."""

from __future__ import annotations

import logging
import sqlite3
import threading
from datetime import UTC, datetime, timedelta

import pytest

from devkit.alertmanager import throttle_webhook
from devkit.memory_quotas import InMemoryQuotas
from devkit.processes import wait_until
from enforcer.applier import Applier
from enforcer.apply.result import ApplyError
from enforcer.enforcer import Enforcer, check_delay
from enforcer.journal import Journal
from enforcer.metrics import EnforcerMetrics
from enforcer.quota_plan import QuotaPolicy
from enforcer.webhook_payload import webhook_from_dict
from kvq.kafka.quota_entity import QuotaEntity
from kvq.settings.config import CLUSTER_LABEL_DEFAULT
from tests.clock_support import wall_clock

P = "producer_byte_rate"
ALICE = QuotaEntity.user("alice")


@pytest.fixture
def world(tmp_path):
    clock = wall_clock(2026, 11, 22, 15)
    kafka = InMemoryQuotas({ALICE: {P: 800.0}})
    journals: list[Journal] = []

    def enforcer() -> Enforcer:
        journal = Journal(tmp_path / "j.sqlite3", clock=clock, busy_timeout_s=0.05)
        journals.append(journal)
        metrics = EnforcerMetrics(("c1",), CLUSTER_LABEL_DEFAULT)
        applier = Applier("c1", QuotaPolicy((P,), {}), kafka, journal, metrics)
        return Enforcer({"c1": applier}, journal, metrics, CLUSTER_LABEL_DEFAULT, clock=clock)

    yield clock, kafka, enforcer
    for journal in journals:
        journal.close()


def handle(enforcer: Enforcer, factor: float | None):
    return enforcer.handle(webhook_from_dict(throttle_webhook(cluster="c1", factor=factor)))


def test_target_survives_a_restart_and_reconcile_finishes_the_throttle(world):
    clock, kafka, new_enforcer = world
    first = new_enforcer()
    kafka.down = True
    with pytest.raises(ApplyError):
        handle(first, 0.5)
    kafka.down = False
    second = new_enforcer()
    assert second.target("c1") == 0.5, "the firing alert was journaled before the failure"
    assert second.reconcile() == {}
    assert kafka.values[ALICE][P] == 400.0


def test_reconcile_retries_until_kafka_is_back(world):
    clock, kafka, new_enforcer = world
    enforcer = new_enforcer()
    handle(enforcer, 0.5)
    kafka.down = True
    with pytest.raises(ApplyError):
        handle(enforcer, None)
    assert "c1" in enforcer.reconcile()
    kafka.down = False
    assert enforcer.reconcile() == {}
    assert kafka.values[ALICE][P] == 800.0


def test_alert_not_resent_for_the_expiry_is_forgotten_and_quotas_restored(world, caplog):
    clock, kafka, new_enforcer = world
    enforcer = new_enforcer()
    handle(enforcer, 0.5)
    clock.now += timedelta(hours=6)
    handle(enforcer, 0.5)  # Alertmanager's repeat: refreshes the alert
    clock.now += timedelta(hours=11)
    enforcer.reconcile()
    assert kafka.values[ALICE][P] == 400.0, "re-sent 11 h ago: still firing"
    clock.now += timedelta(hours=2)
    with caplog.at_level(logging.WARNING, logger="kvq.enforcer"):
        enforcer.reconcile()
    assert kafka.values[ALICE][P] == 800.0
    assert "forgetting firing alert" in caplog.text


def test_each_step_a_webhook_applies_is_timed_from_its_alerts_start(world):
    """kafka_volume_quota_enforcer_alert_to_enforce_seconds: from the startsAt of the firing
    alert asking for the factor applied to Kafka's quotas written and verified at it, once per
    alert; a repeat that changes nothing, a new factor of the same alert and the restore (no
    alert asks for it) are not timed."""
    clock, kafka, new_enforcer = world
    enforcer = new_enforcer()

    def step(factor, started_ago):
        starts_at = clock.now - timedelta(seconds=started_ago)
        body = throttle_webhook(cluster="c1", factor=factor, starts_at=starts_at)
        enforcer.handle(webhook_from_dict(body))

    def measured():
        name = "kafka_volume_quota_enforcer_alert_to_enforce_seconds"
        value = enforcer.metrics.registry.get_sample_value
        return value(f"{name}_count", {"cluster": "c1"}), value(f"{name}_sum", {"cluster": "c1"})

    step(0.5, 2.5)
    assert kafka.values[ALICE][P] == 400.0 and measured() == (1.0, 2.5)
    clock.now += timedelta(seconds=5)
    step(0.5, 7.5)  # Alertmanager's repeat of the same alert: Kafka already holds it
    assert measured() == (1.0, 2.5)
    step(0.25, 1.0)
    assert kafka.values[ALICE][P] == 200.0 and measured() == (2.0, 3.5)
    clock.now += timedelta(seconds=1)
    step(0.24, 2.0)  # the same alert (startsAt), its annotation moved: asked for after it started
    assert kafka.values[ALICE][P] == 192.0 and measured() == (2.0, 3.5)
    clock.now += timedelta(seconds=5)
    handle(enforcer, None)
    assert kafka.values[ALICE][P] == 800.0 and measured() == (2.0, 3.5)


def test_ignored_payloads_write_nothing(world):
    clock, kafka, new_enforcer = world
    enforcer = new_enforcer()
    outcome = enforcer.handle(
        webhook_from_dict(throttle_webhook(cluster="someone-else", factor=0.0))
    )
    assert outcome.outcome == "ignored" and outcome.ignored == 1
    assert kafka.calls == []


def _lock_journal(tmp_path) -> sqlite3.Connection:
    """Another process holding the journal's write lock (as `sqlite3 .backup` can, for long)."""
    locker = sqlite3.connect(tmp_path / "j.sqlite3", timeout=0, isolation_level=None)
    locker.execute("BEGIN EXCLUSIVE")
    return locker


def _throttle_answered_503(enforcer: Enforcer, kafka: InMemoryQuotas) -> None:
    kafka.down = True
    with pytest.raises(ApplyError):
        handle(enforcer, 0.5)  # 503 to Alertmanager; the alert is journaled
    kafka.down = False


def test_reconcile_survives_a_locked_journal_reports_it_and_retries_the_503(world, tmp_path):
    clock, kafka, new_enforcer = world
    enforcer = new_enforcer()
    _throttle_answered_503(enforcer, kafka)
    locker = _lock_journal(tmp_path)
    errors = enforcer.reconcile()
    assert "locked" in errors["c1"], errors
    assert enforcer.health()["status"] == "degraded"
    assert "cannot make progress" in enforcer.health()["problems"][0]
    assert enforcer.metrics.reconcile_failures.labels("c1")._value.get() == 1
    locker.execute("ROLLBACK")
    locker.close()
    assert enforcer.reconcile() == {}
    assert kafka.values[ALICE][P] == 400.0, "the throttle that got a 503 is applied"
    assert enforcer.health()["status"] == "ok"


def test_the_reconcile_loop_carries_on_after_errors(world, tmp_path):
    clock, kafka, new_enforcer = world
    enforcer = new_enforcer()
    _throttle_answered_503(enforcer, kafka)
    locker = _lock_journal(tmp_path)
    stop = threading.Event()
    loop = threading.Thread(target=enforcer.reconcile_forever, args=(stop, 0.01), daemon=True)
    loop.start()
    try:
        failures = enforcer.metrics.reconcile_failures.labels("c1")
        wait_until(lambda: failures._value.get() >= 3, what="three failed rounds")
        assert loop.is_alive()
        locker.execute("ROLLBACK")
        wait_until(lambda: kafka.values[ALICE][P] == 400.0, what="the loop applying the throttle")
        wait_until(lambda: enforcer.health()["status"] == "ok", what="healthy again")
    finally:
        stop.set()
        locker.close()
        loop.join(10)
    assert not loop.is_alive()


def test_a_repeated_webhook_reads_each_journal_store_once(world, monkeypatch):
    clock, kafka, new_enforcer = world
    enforcer = new_enforcer()
    repeated = webhook_from_dict(throttle_webhook(cluster="c1", factor=0.5))  # same episode
    enforcer.handle(repeated)
    journal = enforcer.journal
    reads, writes = [], []
    real_read, real_write = journal.read, journal.write
    monkeypatch.setattr(journal, "read", lambda q: reads.append(q) or real_read(q))
    monkeypatch.setattr(journal, "write", lambda s: writes.append(s) or real_write(s))
    enforcer.handle(repeated)
    assert len(writes) == 1, "the group's alerts (read and replaced in one transaction)"
    assert len(reads) == 2, "the cluster's firing alerts, then its episode"


def test_a_throttle_recovered_from_kafka_is_held_until_alertmanager_speaks(world, tmp_path):
    """The journal (and with it the firing alerts) is lost while throttled: the restarted
    enforcer neither restores at once (the disk may still be full) nor forgets the originals."""
    clock, kafka, new_enforcer = world
    first = new_enforcer()
    handle(first, 0.25)
    assert kafka.values[ALICE][P] == 200.0
    first.journal.close()
    for path in tmp_path.glob("j.sqlite3*"):
        path.unlink()
    second = new_enforcer()
    assert second.reconcile() == {}
    assert kafka.values[ALICE][P] == 200.0, "held at the factor Kafka's copy names"
    assert second.target("c1") == 0.25
    assert second.status()["clusters"]["c1"]["held_from_kafka"]
    third = new_enforcer()  # a restart while holding: still held
    assert third.reconcile() == {} and kafka.values[ALICE][P] == 200.0
    handle(third, None)  # Alertmanager: resolved
    assert kafka.values[ALICE][P] == 800.0
    assert third.target("c1") == 1.0
    assert not third.status()["clusters"]["c1"]["held_from_kafka"]


def test_a_restore_interrupted_with_the_journal_lost_finishes_the_restore(world, tmp_path):
    clock, kafka, new_enforcer = world
    first = new_enforcer()
    handle(first, 0.5)
    real_alter = kafka.alter

    def die_after_the_marker(changes, validate_only=False):
        real_alter(changes, validate_only)
        if not validate_only and any(c.entity.is_originals_record for c in changes):
            raise SystemExit("killed")  # right after the marker says "restoring"

    kafka.alter = die_after_the_marker
    with pytest.raises(SystemExit):
        handle(first, None)
    kafka.alter = real_alter
    first.journal.close()
    for path in tmp_path.glob("j.sqlite3*"):
        path.unlink()
    second = new_enforcer()
    assert second.reconcile() == {}
    assert kafka.values == {ALICE: {P: 800.0}}, "restored, the copy removed"


def test_a_resumed_alert_throttles_once_the_stale_window_after_its_resolution_passed(world):
    """Alertmanager resolved the alert itself (Prometheus could not reach it), then got it again
    and sends it with its old startsAt: ignored as a late retry within kvq.enforcer.stale.window
    (PT2M) of the resolution's receipt, applied after it (the repeat at repeat_interval)."""
    clock, kafka, new_enforcer = world
    enforcer = new_enforcer()
    start = datetime(2026, 11, 22, 14, 0, tzinfo=UTC)
    body = throttle_webhook(cluster="c1", factor=None, starts_at=start, ends_at=clock.now)
    enforcer.handle(webhook_from_dict(body))
    resumed = webhook_from_dict(throttle_webhook(cluster="c1", factor=0.5, starts_at=start))
    clock.now += timedelta(minutes=1, seconds=59)
    assert enforcer.handle(resumed).stale == 1, "a retry comes within the window"
    assert kafka.describe()[ALICE] == {P: 800.0}
    clock.now += timedelta(seconds=1)
    assert enforcer.handle(resumed).stale == 0
    assert kafka.describe()[ALICE] == {P: 400.0}
    clock.now += timedelta(minutes=5)
    assert enforcer.handle(resumed).stale == 0, "and each repeat keeps it"
    assert kafka.describe()[ALICE] == {P: 400.0}


def test_a_remembered_firing_start_is_forgotten_after_the_alert_expiry(world):
    """A resolution of an episode older than a firing heard is ignored while that firing is
    remembered; the reconcile loop forgets it after kvq.enforcer.alert.expiry (12 h here)."""
    clock, kafka, new_enforcer = world
    enforcer = new_enforcer()
    old_start = datetime(2026, 11, 22, 14, 0, tzinfo=UTC)
    new_start = old_start + timedelta(minutes=30)
    firing = throttle_webhook(cluster="c1", factor=0.5, starts_at=new_start)
    enforcer.handle(webhook_from_dict(firing))
    old_end = old_start + timedelta(minutes=10)
    old = throttle_webhook(cluster="c1", factor=None, starts_at=old_start, ends_at=old_end)
    assert enforcer.handle(webhook_from_dict(old)).stale == 1
    assert kafka.describe()[ALICE] == {P: 400.0}
    clock.now += timedelta(hours=11)
    enforcer.reconcile()
    assert enforcer.handle(webhook_from_dict(old)).stale == 1
    clock.now += timedelta(hours=1, seconds=1)
    enforcer.reconcile()
    assert enforcer.handle(webhook_from_dict(old)).stale == 0, "forgotten: taken as it comes"


class SlowKafka(InMemoryQuotas):
    """Kafka taking its time: the next call of an armed kind waits until `release` is set."""

    def __init__(self, initial) -> None:
        super().__init__(initial)
        self.armed: str | None = None
        self.waiting = threading.Event()
        self.release = threading.Event()

    def hold_next(self, kind: str) -> None:
        self.armed = kind
        self.waiting.clear()
        self.release.clear()

    def _hold(self, kind: str) -> None:
        if self.armed == kind:
            self.armed = None
            self.waiting.set()
            assert self.release.wait(30), "the test never let Kafka answer"

    def describe(self):
        self._hold("describe")
        return super().describe()

    def alter(self, changes, validate_only=False):
        self._hold("validate" if validate_only else "alter")
        return super().alter(changes, validate_only)


class WatchedApplier(Applier):
    """The real applier; tells when someone asks for its status (a reconcile round begins)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.status_asked = threading.Event()

    def status(self):
        self.status_asked.set()
        return super().status()


@pytest.fixture
def slow_world(tmp_path):
    kafka = SlowKafka({ALICE: {P: 800.0}})
    journal = Journal(tmp_path / "j.sqlite3")
    metrics = EnforcerMetrics(("c1",), CLUSTER_LABEL_DEFAULT)
    applier = WatchedApplier("c1", QuotaPolicy((P,), {}), kafka, journal, metrics)
    enforcer = Enforcer({"c1": applier}, journal, metrics, CLUSTER_LABEL_DEFAULT)
    threads: list[threading.Thread] = []

    def start(target, *args) -> None:
        thread = threading.Thread(target=target, args=args)
        threads.append(thread)
        thread.start()

    enforcer.reconcile()  # the start-up round: Kafka's copy read, nothing throttled
    yield kafka, applier, enforcer, start
    kafka.release.set()
    for thread in threads:
        thread.join(30)
    journal.close()


def test_a_reconcile_round_during_a_webhooks_apply_reuses_it_instead_of_applying_again(
    slow_world,
):
    """Each apply of 20,000 pairs takes seconds: the round waiting for the webhook's apply takes
    its result rather than doing it all again."""
    kafka, applier, enforcer, start = slow_world
    kafka.calls.clear()
    kafka.hold_next("alter")
    start(handle, enforcer, 0.5)
    assert kafka.waiting.wait(30), "the webhook's apply is sending its plan"
    applier.status_asked.clear()
    rounds = enforcer.reconcile_rounds
    start(enforcer.reconcile)
    assert applier.status_asked.wait(30), "the round began and waits for the apply"
    kafka.release.set()
    wait_until(lambda: enforcer.reconcile_rounds > rounds, what="the reconcile round")
    assert kafka.values[ALICE][P] == 400.0
    assert enforcer.reconcile_errors == {}
    assert kafka.calls == ["describe", "validate", "alter", "describe", "describe_configs"], (
        "one apply, not a second one for the reconcile round"
    )


def test_a_webhook_during_a_reconcile_rounds_apply_still_applies_its_own_alerts(slow_world):
    kafka, _applier, enforcer, start = slow_world
    handle(enforcer, 0.5)
    kafka.hold_next("describe")
    start(enforcer.reconcile)  # holds the throttle in place: reads the alerts, then Kafka
    assert kafka.waiting.wait(30), "the round's apply is reading Kafka"
    start(handle, enforcer, 0.25)
    wait_until(lambda: enforcer.target("c1") == 0.25, what="the new alert recorded")
    kafka.release.set()
    wait_until(lambda: kafka.values[ALICE][P] == 200.0, what="the lower factor applied")
    assert enforcer.status()["clusters"]["c1"]["applied_factor"] == 0.25


class CountedApplier(Applier):
    """An applier that counts the checks of its throttle."""

    checks = 0

    def throttle_changed(self) -> bool:
        self.checks += 1
        return super().throttle_changed()


@pytest.fixture
def checked_world(tmp_path):
    """(quotas, enforcer factory taking the throttle check interval); loops stopped after."""
    clock = wall_clock(2026, 11, 22, 15)
    kafka = InMemoryQuotas({ALICE: {P: 800.0}})
    stops: list[tuple[threading.Event, threading.Thread]] = []
    journal = Journal(tmp_path / "j.sqlite3", clock=clock, busy_timeout_s=0.05)
    metrics = EnforcerMetrics(("c1",), CLUSTER_LABEL_DEFAULT)

    def start(check_interval: float, reconcile_interval: float) -> tuple[Enforcer, CountedApplier]:
        applier = CountedApplier("c1", QuotaPolicy((P,), {}), kafka, journal, metrics)
        enforcer = Enforcer(
            {"c1": applier},
            journal,
            metrics,
            CLUSTER_LABEL_DEFAULT,
            clock=clock,
            throttle_check_interval=check_interval,
        )
        handle(enforcer, 0.5)
        stop = threading.Event()
        loop = threading.Thread(
            target=enforcer.reconcile_forever, args=(stop, reconcile_interval), daemon=True
        )
        loop.start()
        stops.append((stop, loop))
        return enforcer, applier

    yield kafka, start
    for stop, loop in stops:
        stop.set()
        loop.join(timeout=10)
    journal.close()


def test_a_reset_between_reconcile_rounds_is_throttled_again_by_the_check(checked_world):
    kafka, start = checked_world
    enforcer, applier = start(check_interval=0.01, reconcile_interval=3600)
    wait_until(lambda: enforcer.reconcile_rounds == 1, what="the round at start")
    kafka.set(ALICE, P, 800.0)  # a reconciler puts the original back
    wait_until(lambda: kafka.values[ALICE][P] == 400.0, what="throttled again")
    assert enforcer.reconcile_rounds == 1, "by a check, not a round"
    assert applier.checks >= 1


def test_no_check_between_rounds_when_turned_off(checked_world):
    kafka, start = checked_world
    enforcer, applier = start(check_interval=0.0, reconcile_interval=0.01)
    wait_until(lambda: enforcer.reconcile_rounds >= 3, what="three reconcile rounds")
    assert applier.checks == 0


def test_nothing_is_checked_without_a_throttle_in_force(checked_world):
    kafka, start = checked_world
    enforcer, applier = start(check_interval=0.01, reconcile_interval=3600)
    handle(enforcer, None)
    calls = len(kafka.calls)
    assert not applier.throttle_changed(), "no throttle applied: nothing to look at"
    assert kafka.calls[calls:] == [], "Kafka was not asked"


def test_a_slow_check_is_spaced_out_to_a_tenth_of_the_time():
    assert check_delay(0.5, 0.01) == 0.5
    assert check_delay(0.5, 0.2) == pytest.approx(1.8)


def test_the_apply_a_check_triggers_acts_on_what_the_check_read(world):
    """One DescribeClientQuotas between a reset and the alter that throttles it again: the
    check's (at 20,000 pairs each one is a long round trip while the reset holds)."""
    clock, kafka, new_enforcer = world
    enforcer = new_enforcer()
    handle(enforcer, 0.5)
    assert enforcer.check_throttles().applied == [], "Kafka holds the throttle: nothing to do"
    kafka.set(ALICE, P, 800.0)  # a reconciler puts the original back
    before = len(kafka.calls)
    assert enforcer.check_throttles().applied == ["c1"]
    assert kafka.calls[before : before + 3] == ["describe", "validate", "alter"]
    assert kafka.values[ALICE][P] == 400.0
