"""Applying factors to one cluster: journal-first, validate, alter, verify, exact restore."""

import logging
import math
import re
import sqlite3

import pytest

from devkit.memory_quotas import InMemoryQuotas
from enforcer.applier import Applier
from enforcer.apply.result import ApplyError
from enforcer.journal import Journal
from enforcer.kafka_originals import split
from enforcer.metrics import EnforcerMetrics
from enforcer.quota_client import QuotaClientError, agreed
from enforcer.quota_plan import UNLIMITED, QuotaPolicy
from enforcer.unanswered_alters import JOURNAL_WRITE_LIMIT_S
from kvq.kafka.quota_entity import ORIGINALS_USER, QuotaEntity
from kvq.settings.config import CLUSTER_LABEL_DEFAULT
from tests.enforcer.applier_support import apply_step

P = "producer_byte_rate"
C = "controller_mutation_rate"
DEFAULT = QuotaEntity.default_user()
ALICE = QuotaEntity.user("alice")
ALICE_APP = QuotaEntity.of({"user": "alice", "client-id": "app"})
ADMIN = QuotaEntity.user("admin")


@pytest.fixture
def kafka():
    return InMemoryQuotas({ALICE: {P: 800.0}, ALICE_APP: {P: 301.0, "consumer_byte_rate": 9.0}})


@pytest.fixture
def journal(tmp_path):
    j = Journal(tmp_path / "journal.sqlite3")
    yield j
    j.close()


def make(kafka, journal, dry_run=False, excluded=()):
    policy = QuotaPolicy((P,), {P: 1000}, frozenset(excluded))
    metrics = EnforcerMetrics(("c1",), CLUSTER_LABEL_DEFAULT)
    return Applier("c1", policy, kafka, journal, metrics, dry_run=dry_run, sleep=lambda _s: None)


def test_throttle_then_restore_is_byte_exact(kafka, journal):
    before = kafka.describe()
    applier = make(kafka, journal)
    apply_step(applier, 0.5)
    assert kafka.values[ALICE][P] == 400.0
    assert kafka.values[ALICE_APP][P] == 150.0
    assert kafka.values[DEFAULT][P] == 500.0
    apply_step(applier, 1.0)
    assert kafka.describe() == before, "originals back, the default user's key removed again"


def test_validate_only_goes_first_then_alter_then_verify(kafka, journal):
    apply_step(make(kafka, journal), 0.5)
    start, apply = kafka.calls[:2], kafka.calls[2:]
    assert start == ["describe_configs", "describe"], (
        "the brokers' quota window and Kafka's copy of the originals are read once after start"
    )
    assert apply == ["describe", "validate", "alter", "describe", "describe_configs"], (
        "validated, then the copy of the originals and the plan in one request"
    )


def test_repeats_and_lower_factors_never_compound(kafka, journal):
    applier = make(kafka, journal)
    for _ in range(5):
        apply_step(applier, 0.5)
    assert kafka.values[ALICE][P] == 400.0
    apply_step(applier, 0.25)
    assert kafka.values[ALICE][P] == 200.0
    assert kafka.calls.count("alter") == 2, "two plans, each with the copy or its new factor"


def test_nothing_throttled_and_factor_one_asks_kafka_once_for_its_copy_then_never(kafka, journal):
    applier = make(kafka, journal)
    assert apply_step(applier, 1.0).idle
    assert kafka.calls == ["describe_configs", "describe"], (
        "the brokers' quota window read, and a lost journal noticed from Kafka's copy"
    )
    assert apply_step(applier, 1.0).idle
    assert kafka.calls == ["describe_configs", "describe"]


def test_kafka_down_raises_apply_error_and_changes_nothing(kafka, journal):
    kafka.down = True
    with pytest.raises(ApplyError, match="cannot reach Kafka"):
        apply_step(make(kafka, journal), 0.0)
    kafka.down = False
    assert kafka.values[ALICE][P] == 800.0


def test_operator_change_while_throttled_is_kept_and_reported(kafka, journal):
    applier = make(kafka, journal)
    apply_step(applier, 0.5)
    kafka.set(ALICE, P, 12345.0)
    result = apply_step(applier, 0.5)
    assert result.drift == {(ALICE, P): 12345.0}
    apply_step(applier, 1.0)
    assert kafka.values[ALICE][P] == 12345.0, "the operator's value is kept"
    assert kafka.values[ALICE_APP][P] == 301.0


def test_entity_created_during_a_throttle_is_throttled_and_restored(kafka, journal):
    applier = make(kafka, journal)
    apply_step(applier, 0.5)
    bob = QuotaEntity.user("bob")
    kafka.set(bob, P, 100.0)
    apply_step(applier, 0.5)
    assert kafka.values[bob][P] == 50.0
    apply_step(applier, 1.0)
    assert kafka.values[bob][P] == 100.0


def test_excluded_principal_is_exempt_while_throttled_and_override_removed_after(kafka, journal):
    applier = make(kafka, journal, excluded={"admin"})
    apply_step(applier, 0.0)
    assert kafka.values[ADMIN][P] == UNLIMITED
    apply_step(applier, 1.0)
    assert ADMIN not in kafka.values


def test_dry_run_validates_but_changes_and_journals_nothing(kafka, journal):
    result = apply_step(make(kafka, journal, dry_run=True), 0.0)
    assert result.dry_run and len(result.changes) == 3
    assert kafka.calls == [
        "describe_configs",
        "describe",
        "describe",
        "validate",
        "describe_configs",
    ], (
        "the quota window and Kafka's copy of the originals read once after start, then the plan "
        "validated only"
    )
    assert kafka.values[ALICE][P] == 800.0
    assert journal.episodes.episode("c1") is None


def test_a_large_dry_run_logs_one_summary_line_and_each_value_at_debug(journal, caplog):
    """Like an apply: a line per dry run at info, not one per value it would change."""
    kafka = InMemoryQuotas({QuotaEntity.user(f"u{i}"): {P: 10_000.0 + i} for i in range(2_000)})
    applier = make(kafka, journal, dry_run=True)
    with caplog.at_level(logging.INFO, logger="kvq.enforcer"):
        apply_step(applier, 0.5)
    info = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert len(info) == 1, info[:3]
    assert re.fullmatch(
        r"cluster c1: factor 0.5 validated \(dry run\): 2001 value\(s\) would change in "
        r"[0-9.]+ s",
        info[0],
    ), info[0]
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="kvq.enforcer"):
        apply_step(applier, 0.25)
    debug = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    assert "cluster c1: dry run, would set user=u7 producer_byte_rate = 2501" in debug


def test_a_restart_resumes_from_the_journal_not_from_kafka(kafka, journal, tmp_path):
    apply_step(make(kafka, journal), 0.5)
    journal.close()
    reopened = Journal(tmp_path / "journal.sqlite3")
    apply_step(make(kafka, reopened), 1.0)
    assert kafka.values[ALICE][P] == 800.0 and DEFAULT not in kafka.values


def test_crash_between_journal_and_alter_is_not_mistaken_for_drift(kafka, journal):
    applier = make(kafka, journal)
    original_alter = kafka.alter

    def crash_after_real_alter(changes, validate_only=False):
        original_alter(changes, validate_only)
        if not validate_only:
            raise ConnectionError("enforcer died here")

    kafka.alter = crash_after_real_alter
    with pytest.raises(ConnectionError):
        apply_step(applier, 0.5)
    kafka.alter = original_alter
    result = apply_step(applier, 0.5)
    assert result.drift == {}
    apply_step(applier, 1.0)
    assert kafka.values[ALICE][P] == 800.0


def test_partial_failure_is_reported_and_retry_converges(kafka, journal):
    applier = make(kafka, journal)
    original_alter = kafka.alter

    def lose_the_default(changes, validate_only=False):
        kept = [c for c in changes if validate_only or c.entity != DEFAULT]
        original_alter(kept, validate_only)

    kafka.alter = lose_the_default
    with pytest.raises(ApplyError, match="differ from the plan.*<default>"):
        apply_step(applier, 0.5)
    assert kafka.values[ALICE][P] == 400.0, "the rest applied"
    kafka.alter = original_alter
    apply_step(applier, 0.5)
    assert kafka.values[ALICE][P] == 400.0 and kafka.values[DEFAULT][P] == 500.0


class LaggingBroker(InMemoryQuotas):
    """Two brokers: the second answers from the values of `lag` alters ago (its copy of the
    metadata log behind the controller's), for its next `lagging` describes."""

    def __init__(self, initial, lag: int = 1) -> None:
        super().__init__(initial)
        self.history = [self.describe()]
        self.lag, self.lagging = lag, 0

    def alter(self, changes, validate_only=False):
        super().alter(changes, validate_only)
        if not validate_only:
            self.history.append(self.describe())

    def describe_agreed(self):
        behind = self.history[max(0, len(self.history) - 1 - self.lag)]
        if self.lagging <= 0:
            behind = self.describe()
        self.lagging -= 1
        return agreed([self.describe(), behind])


def test_applied_means_every_broker_shows_the_values(journal):
    """A broker that still shows the values before the alter (Kafka 4.0 listed removed entities
    for up to a second) keeps the apply from being reported applied: verified again, and a
    failure once the attempts are used up (the journal keeps what every broker shows)."""
    kafka = LaggingBroker({ALICE: {P: 800.0}})
    applier = make(kafka, journal)
    kafka.lagging = 3  # caught up on the 4th of the 5 verify attempts
    assert apply_step(applier, 0.5).factor == 0.5
    assert applier.status().applied_factor == 0.5
    kafka.lagging = 99
    with pytest.raises(ApplyError, match="differ from the plan"):
        apply_step(applier, 1.0)
    assert applier.status().applied_factor == 0.5, "not restored until every broker shows it"
    kafka.lagging = 0
    apply_step(applier, 1.0)
    assert kafka.describe() == {ALICE: {P: 800.0}}
    assert applier.status().applied_factor == 1.0


def test_entity_kafka_rejects_is_reported_while_the_rest_still_throttles(kafka, journal):
    applier = make(kafka, journal)
    kafka.refused = {ALICE_APP}
    with pytest.raises(ApplyError, match="rejected part of the plan.*user=alice,client-id=app"):
        apply_step(applier, 0.5)
    assert kafka.values[ALICE][P] == 400.0 and kafka.values[DEFAULT][P] == 500.0
    assert kafka.values[ALICE_APP][P] == 301.0
    kafka.refused = set()
    apply_step(applier, 0.5)
    assert kafka.values[ALICE_APP][P] == 150.0
    apply_step(applier, 1.0)
    assert kafka.values[ALICE_APP][P] == 301.0 and DEFAULT not in kafka.values


def test_verification_waits_for_a_broker_that_learns_the_change_late(kafka, journal):
    applier = make(kafka, journal)
    real_describe = kafka.describe
    stale = {"left": 2}

    def lagging_describe():
        current = real_describe()
        if kafka.calls.count("alter") and stale["left"]:
            stale["left"] -= 1
            current[ALICE] = {P: 800.0}
        return current

    kafka.describe = lagging_describe
    apply_step(applier, 0.5)
    assert stale["left"] == 0 and kafka.values[ALICE][P] == 400.0


def test_nan_and_two_to_the_63_in_kafka_plan_and_restore_without_effect(journal, caplog):
    """NaN (stored before Kafka 4.4, which refuses non-finite values) means no effective limit;
    2^63 is kafka-configs' "unlimited" for the long keys. Planning must not crash on either (it
    raised on NaN). The restore writes NaN back as UNLIMITED, which brokers enforce alike, says so
    and counts it; 2^63 comes back exactly."""
    bob = QuotaEntity.user("bob")
    kafka = InMemoryQuotas({ALICE: {P: math.nan}, bob: {P: 2.0**63}})
    applier = make(kafka, journal)
    apply_step(applier, 0.5)
    assert math.isnan(kafka.values[ALICE][P]), "unlimited x 0.5 is still unlimited: untouched"
    assert kafka.values[bob][P] == 2.0**62
    apply_step(applier, 0.0)
    assert kafka.values[ALICE][P] == 1.0 and kafka.values[bob][P] == 1.0
    assert apply_step(applier, 0.0).changes == (), "no endless re-plan"
    with caplog.at_level(logging.WARNING, logger="kvq.enforcer"):
        apply_step(applier, 1.0)
    assert kafka.values[ALICE][P] == UNLIMITED and kafka.values[bob][P] == 2.0**63
    assert apply_step(applier, 1.0).idle
    [warning] = [r.getMessage() for r in caplog.records if "refuses" in r.getMessage()]
    assert (
        "written as 9223372036854774784" in warning
        and "user=alice producer_byte_rate (was nan)" in warning
    )
    assert 'kafka_volume_quota_enforcer_no_limit_stand_ins_total{cluster="c1"} 1.0' in (
        applier.metrics.render().decode()
    )


def test_lost_journal_takes_the_originals_from_kafkas_copy_and_never_compounds(kafka, tmp_path):
    first = Journal(tmp_path / "first.sqlite3")
    apply_step(make(kafka, first), 0.5)
    first.close()
    (tmp_path / "first.sqlite3").unlink()
    fresh = Journal(tmp_path / "fresh.sqlite3")
    applier = make(kafka, fresh)
    apply_step(applier, 0.25)
    assert kafka.values[ALICE][P] == 200.0, "from 800, not from the throttled 400"
    assert applier.metrics.originals_recovered.labels("c1")._value.get() == 3
    apply_step(applier, 1.0)
    assert kafka.describe() == {
        ALICE: {P: 800.0},
        ALICE_APP: {P: 301.0, "consumer_byte_rate": 9.0},
    }, "originals back, the copy removed"
    fresh.close()


def test_resolve_with_a_lost_journal_asks_kafka_and_restores(kafka, tmp_path):
    first = Journal(tmp_path / "first.sqlite3")
    apply_step(make(kafka, first), 0.5)
    first.close()
    fresh = Journal(tmp_path / "fresh.sqlite3")
    result = apply_step(make(kafka, fresh), 1.0)
    assert not result.idle and kafka.values[ALICE][P] == 800.0 and DEFAULT not in kafka.values
    fresh.close()


def _copy_of(kafka) -> dict:
    return {e: v for e, v in kafka.values.items() if e.is_originals_record}


def test_a_finished_episodes_copy_still_in_kafka_is_removed_again_never_recovered(kafka, journal):
    """A removal Kafka lost (or a broker lagging behind it): the finished episode's copy is a
    leftover. Nothing is planned from that view; the copy is removed again, then the next
    throttle starts from what Kafka holds, the operator's new value included."""
    applier = make(kafka, journal)
    apply_step(applier, 0.5)
    finished_copy = _copy_of(kafka)
    apply_step(applier, 1.0)
    assert _copy_of(kafka) == {}
    kafka.values.update(finished_copy)  # the removal lost
    kafka.set(ALICE, P, 2000.0)  # an operator, between the episodes
    with pytest.raises(ApplyError, match="still shows Kafka's copy of the originals of episode"):
        apply_step(applier, 0.5)
    assert _copy_of(kafka) == {} and kafka.values[ALICE][P] == 2000.0, "removed, nothing planned"
    apply_step(applier, 0.5)
    assert kafka.values[ALICE][P] == 1000.0, "from the operator's value"
    assert applier.metrics.originals_recovered.labels("c1")._value.get() == 0
    apply_step(applier, 1.0)
    assert kafka.values[ALICE][P] == 2000.0


def test_a_journal_rolled_back_to_after_an_episode_still_recovers_the_next_one(kafka, tmp_path):
    """The copy put back knows episode A as finished but not B, which throttles now: B's marker
    is recovered from Kafka as for any journal that lost it."""
    path = tmp_path / "journal.sqlite3"
    first = Journal(path)
    applier = make(kafka, first)
    apply_step(applier, 0.5)
    apply_step(applier, 1.0)
    source, backup = sqlite3.connect(path), sqlite3.connect(tmp_path / "after-a.sqlite3")
    source.backup(backup)
    source.close()
    backup.close()
    kafka.set(ALICE, P, 2000.0)
    apply_step(applier, 0.5)
    first.close()
    for stale in tmp_path.glob("journal.sqlite3*"):
        stale.unlink()
    (tmp_path / "after-a.sqlite3").rename(path)
    rolled_back = Journal(path)
    applier = make(kafka, rolled_back)
    apply_step(applier, 0.25)
    assert kafka.values[ALICE][P] == 500.0, "from B's original 2000, not from 1000"
    assert applier.metrics.originals_recovered.labels("c1")._value.get() > 0
    apply_step(applier, 1.0)
    assert kafka.values[ALICE][P] == 2000.0 and _copy_of(kafka) == {}
    rolled_back.close()


def test_unreadable_copy_refuses_to_act(kafka, journal):
    kafka.set(QuotaEntity.of({"user": ORIGINALS_USER, "client-id": "junk"}), C, 1.0)
    applier = make(kafka, journal)
    with pytest.raises(ApplyError, match="originals unknown"):
        apply_step(applier, 1.0)
    assert applier.originals_unknown and applier.needs_reconcile
    assert applier.metrics.originals_unknown.labels("c1")._value.get() == 1
    assert kafka.values[ALICE][P] == 800.0


def test_a_reconciler_putting_the_original_back_is_throttled_again_and_counted(kafka, journal):
    applier = make(kafka, journal)
    apply_step(applier, 0.5)
    kafka.set(ALICE, P, 800.0)  # e.g. Strimzi's User Operator re-applying the KafkaUser quota
    result = apply_step(applier, 0.5)
    assert result.reverted == 1 and result.drift == {}
    assert kafka.values[ALICE][P] == 400.0, "throttled again"
    assert applier.metrics.reverted.labels("c1")._value.get() == 1
    kafka.set(ALICE, P, 5000.0)  # a genuinely new value: the operator's, reported as drift
    assert apply_step(applier, 0.5).drift == {(ALICE, P): 5000.0}
    assert applier.metrics.drift_changes.labels("c1")._value.get() == 1
    apply_step(applier, 1.0)
    assert kafka.values[ALICE][P] == 5000.0


class ReconcilerBetweenWriteAndCheck(InMemoryQuotas):
    """A reconciler (Strimzi's User Operator) that puts alice's original back right after each
    of the first `resets` throttling writes, before the enforcer describes."""

    def __init__(self, initial, resets: int) -> None:
        super().__init__(initial)
        self.resets = resets

    def alter(self, changes, validate_only=False):
        super().alter(changes, validate_only)
        if not validate_only and self.resets and any(c.entity == ALICE for c in changes):
            self.resets -= 1
            self.set(ALICE, P, 800.0)


def test_a_reset_between_the_write_and_its_check_is_written_again_not_a_failure(journal):
    """Answering Alertmanager 503 (and logging Kafka as unavailable) because an operator was
    quicker than the check would be wrong: the value is written again."""
    kafka = ReconcilerBetweenWriteAndCheck({ALICE: {P: 800.0}}, resets=2)
    applier = make(kafka, journal)
    assert apply_step(applier, 0.5).factor == 0.5
    assert kafka.values[ALICE][P] == 400.0 and kafka.resets == 0
    apply_step(applier, 1.0)
    assert kafka.describe() == {ALICE: {P: 800.0}}


def test_a_new_value_set_between_the_write_and_its_check_is_not_overwritten(journal):
    """Only a reset to the original is written again: someone's new value fails the check
    (retried, then kept as drift by the next plan)."""
    kafka = InMemoryQuotas({ALICE: {P: 800.0}})
    real_alter = kafka.alter

    def alter_then_an_operator_sets_5000(changes, validate_only=False):
        real_alter(changes, validate_only)
        if not validate_only and any(c.entity == ALICE for c in changes):
            kafka.set(ALICE, P, 5000.0)

    kafka.alter = alter_then_an_operator_sets_5000
    applier = make(kafka, journal)
    with pytest.raises(ApplyError, match="differ from the plan"):
        apply_step(applier, 0.5)
    assert kafka.values[ALICE][P] == 5000.0
    assert kafka.calls.count("alter") == 1, "written once, never again over the new value"


def test_a_quota_callback_on_the_brokers_refuses_to_report_applied(kafka, journal):
    kafka.callbacks = {0: "io.strimzi.kafka.quotas.StaticQuotaCallback"}
    applier = make(kafka, journal)
    with pytest.raises(ApplyError, match="client.quota.callback.class=io.strimzi"):
        apply_step(applier, 0.5)
    assert applier.quota_callback and applier.needs_reconcile
    assert applier.metrics.quota_callback.labels("c1")._value.get() == 1
    kafka.callbacks = {}
    apply_step(applier, 0.5)
    assert applier.quota_callback is None
    assert applier.metrics.quota_callback.labels("c1")._value.get() == 0


def test_an_unanswered_alter_landing_late_is_ours_and_the_restore_waits_it_out(kafka, journal):
    before = kafka.describe()
    now = [0.0]
    policy = QuotaPolicy((P,), {P: 1000}, frozenset())
    applier = Applier(
        "c1",
        policy,
        kafka,
        journal,
        EnforcerMetrics(("c1",), CLUSTER_LABEL_DEFAULT),
        monotonic=lambda: now[0],
        sleep=lambda _s: None,
        settle_s=10.0,
    )
    apply_step(applier, 0.5)
    real_alter, unanswered = kafka.alter, []

    def answer_lost(changes, validate_only=False):
        if validate_only:
            return real_alter(changes, True)
        unanswered.append(list(changes))
        raise QuotaClientError("AlterClientQuotasRequest timed out")

    kafka.alter = answer_lost
    with pytest.raises(ApplyError):
        apply_step(applier, 0.25)
    kafka.alter = real_alter
    result = apply_step(applier, 1.0)
    assert result.settling and split(kafka.describe())[0] == before
    assert journal.episodes.episode("c1").active, "not restored while a request is in doubt"
    real_alter(unanswered[0])  # Kafka applies the throttle after all
    now[0] = 5.0
    result = apply_step(applier, 1.0)
    assert result.drift == {}, "the late values are ours, not an operator's"
    assert result.settling and split(kafka.describe())[0] == before
    now[0] = 11.0
    result = apply_step(applier, 1.0)
    assert not result.settling and not journal.episodes.episode("c1").active
    assert kafka.describe() == before


def _serve_next_describe(kafka, view):
    """The next DescribeClientQuotas is answered from `view`, as by a broker whose metadata lags
    (the ones after it by the up-to-date controller state)."""
    real = type(kafka).describe

    def lagging():
        kafka.describe = lambda: real(kafka)
        real(kafka)  # counted like the real call
        return {entity: dict(values) for entity, values in view.items()}

    kafka.describe = lagging


def test_an_older_value_of_ours_a_lagging_broker_shows_is_written_again_never_drift(kafka, journal):
    before = kafka.describe()
    applier = make(kafka, journal)
    apply_step(applier, 0.5)
    at_half = kafka.describe()
    apply_step(applier, 0.25)
    _serve_next_describe(kafka, at_half)
    result = apply_step(applier, 0.25)
    assert result.drift == {} and result.reverted == 0
    assert [c.value for c in result.changes if c.entity == ALICE] == [200.0], "written again"
    _serve_next_describe(kafka, at_half)
    result = apply_step(applier, 1.0)
    assert result.drift == {}
    assert kafka.describe() == before, "every original back, nothing left at 0.5x"
    assert applier.metrics.drift_changes.labels("c1")._value.get() == 0


def test_a_view_from_before_the_throttle_is_no_reconciler_but_a_reset_after_it_is(kafka, journal):
    before = kafka.describe()
    applier = make(kafka, journal)
    apply_step(applier, 0.5)
    _serve_next_describe(kafka, before)  # no copy of the originals yet: from before the throttle
    result = apply_step(applier, 0.5)
    assert result.reverted == 0 and result.drift == {}
    assert kafka.values[ALICE][P] == 400.0, "throttled again all the same"
    assert applier.metrics.reverted.labels("c1")._value.get() == 0
    kafka.set(ALICE, P, 800.0)  # a reconciler: the copy shows the view is after the throttle
    assert apply_step(applier, 0.5).reverted == 1
    assert applier.metrics.reverted.labels("c1")._value.get() == 1


def test_a_throttle_journaled_before_episodes_had_ids_gets_its_copy_and_restores(kafka, tmp_path):
    """A journal written before the copy of the originals in Kafka existed holds an active
    episode without an id: the enforcer names it, copies its originals into Kafka, throttles
    further and restores every original exactly."""
    before = kafka.describe()
    path = tmp_path / "journal.sqlite3"
    old = sqlite3.connect(path)
    old.executescript(
        """
        CREATE TABLE episode (cluster TEXT PRIMARY KEY, state TEXT NOT NULL,
            started_at TEXT NOT NULL, updated_at TEXT NOT NULL, target REAL, applied REAL);
        CREATE TABLE pair (cluster TEXT NOT NULL, entity TEXT NOT NULL, key TEXT NOT NULL,
            original REAL, applied REAL, applied_known INTEGER NOT NULL DEFAULT 0, pending REAL,
            pending_known INTEGER NOT NULL DEFAULT 0, drift REAL,
            drifted INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (cluster, entity, key));
        """
    )
    old.execute("INSERT INTO episode VALUES ('c1', 'active', 't0', 't0', 0.5, 0.5)")
    old.execute(
        "INSERT INTO pair VALUES ('c1', ?, ?, 800.0, 400.0, 1, NULL, 0, NULL, 0)",
        (ALICE.to_json(), P),
    )
    old.commit()
    old.close()
    kafka.set(ALICE, P, 400.0)  # what that version had throttled
    journal = Journal(path)
    try:
        applier = make(kafka, journal)
        apply_step(applier, 0.25)
        assert kafka.values[ALICE][P] == 200.0, "scaled from the original, not from 400"
        episode_id = journal.episodes.episode("c1").episode_id
        assert episode_id and split(kafka.describe())[1].current() == episode_id
        apply_step(applier, 1.0)
        assert kafka.describe() == before, "every original back, the copy removed"
    finally:
        journal.close()


def test_a_large_throttle_logs_one_summary_line_per_apply_and_each_value_at_debug(journal, caplog):
    """A log pipeline gets a line per apply, not one per changed value (20,000 on a large
    cluster); the values are still there at debug."""
    users = 2_000
    kafka = InMemoryQuotas({QuotaEntity.user(f"u{i}"): {P: 10_000.0 + i} for i in range(users)})
    applier = make(kafka, journal)
    with caplog.at_level(logging.INFO, logger="kvq.enforcer"):
        apply_step(applier, 0.5)
        apply_step(applier, 1.0)
    info = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert len(info) == 2, info
    for line, factor in zip(info, (0.5, 1.0), strict=True):
        assert re.fullmatch(
            rf"cluster c1: factor {factor} applied: 2001 value\(s\) changed in [0-9.]+ s", line
        ), line
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="kvq.enforcer"):
        apply_step(applier, 0.25)
    debug = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    assert "cluster c1: factor 0.25: set user=u7 producer_byte_rate = 2501" in debug


def test_values_reset_by_a_reconciler_are_summed_up_in_one_warning(journal, caplog):
    users = 200
    entities = [QuotaEntity.user(f"u{i}") for i in range(users)]
    kafka = InMemoryQuotas({e: {P: 10_000.0} for e in entities})
    applier = make(kafka, journal)
    apply_step(applier, 0.5)
    for entity in entities:
        kafka.set(entity, P, 10_000.0)  # Strimzi's User Operator re-applying every KafkaUser
    with caplog.at_level(logging.WARNING, logger="kvq.enforcer"):
        apply_step(applier, 0.5)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith("cluster c1: 200 value(s) were reset to their original")
    assert warnings[0].count(" producer_byte_rate") == 5, "names the first few"
    assert warnings[0].endswith(" producer_byte_rate and 195 more")
    assert kafka.values[entities[-1]][P] == 5000.0, "throttled again"


class SlowSink:
    """Where the journal's rows go (as to the state in Kafka), each write taking `seconds` on
    the applier's clock while `slow`: a commit held up by a network partition and answered only
    when the network came back, when another replica may have taken over."""

    def __init__(self, seconds: float) -> None:
        self.now = 0.0
        self.seconds = seconds
        self.slow = True

    def monotonic(self) -> float:
        return self.now

    def publish(self, records_by_cluster) -> None:
        if self.slow:
            self.now += self.seconds


def test_a_request_whose_journal_write_took_too_long_is_not_sent_and_the_apply_tried_again(
    kafka, tmp_path
):
    sink = SlowSink(JOURNAL_WRITE_LIMIT_S + 1)
    journal = Journal(tmp_path / "journal.sqlite3", sink=sink)
    policy = QuotaPolicy((P,), {P: 1000}, frozenset())
    metrics = EnforcerMetrics(("c1",), CLUSTER_LABEL_DEFAULT)
    applier = Applier(
        "c1", policy, kafka, journal, metrics, monotonic=sink.monotonic, sleep=lambda _s: None
    )
    try:
        with pytest.raises(ApplyError, match=r"journaling an AlterClientQuotas took 6\.0 s"):
            apply_step(applier, 0.5)
        assert "alter" not in kafka.calls and kafka.values[ALICE][P] == 800.0
        sink.slow = False
        apply_step(applier, 0.5)
        assert kafka.values[ALICE][P] == 400.0
    finally:
        journal.close()
