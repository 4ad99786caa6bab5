"""Alerts to appliers over time: restart recovery, retries, and expiry of alerts no longer sent."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import pytest

from devkit.alertmanager import throttle_webhook
from devkit.memory_quotas import InMemoryQuotas
from enforcer.applier import Applier, ApplyError
from enforcer.journal import Journal
from enforcer.metrics import EnforcerMetrics
from enforcer.quota_entity import QuotaEntity
from enforcer.quota_plan import QuotaPolicy
from enforcer.service import Enforcer
from enforcer.webhook_payload import webhook_from_dict

P = "producer_byte_rate"
ALICE = QuotaEntity.user("alice")


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 11, 22, 15, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def world(tmp_path):
    clock = Clock()
    kafka = InMemoryQuotas({ALICE: {P: 800.0}})
    journals: list[Journal] = []

    def enforcer() -> Enforcer:
        journal = Journal(tmp_path / "j.sqlite3", clock=clock)
        journals.append(journal)
        metrics = EnforcerMetrics(("c1",))
        applier = Applier("c1", QuotaPolicy((P,), {}), kafka, journal, metrics)
        return Enforcer({"c1": applier}, journal, metrics, clock=clock)

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


def test_ignored_payloads_write_nothing(world):
    clock, kafka, new_enforcer = world
    enforcer = new_enforcer()
    outcome = enforcer.handle(
        webhook_from_dict(throttle_webhook(cluster="someone-else", factor=0.0))
    )
    assert outcome.outcome == "ignored" and outcome.ignored == 1
    assert kafka.calls == []
