"""A throttle whose resolution never came (a replaced Alertmanager): the factor read again, the
throttle lifted once it is 1, kept while it is below 1 or unknown."""

from __future__ import annotations

from datetime import timedelta

import pytest

from devkit.alertmanager import throttle_webhook
from devkit.memory_quotas import InMemoryQuotas
from enforcer.applier import Applier
from enforcer.enforcer import Enforcer
from enforcer.failsafe import FINGERPRINT, group_key
from enforcer.journal import Journal
from enforcer.lost_resolutions import LostResolutions
from enforcer.metrics import EnforcerMetrics
from enforcer.originals_recovery import RECOVERED_GROUP
from enforcer.quota_plan import QuotaPolicy
from enforcer.webhook_payload import webhook_from_dict
from kvq.contract.cluster_identity import ClusterIdentity
from kvq.kafka.quota_entity import QuotaEntity
from kvq.settings.config import CLUSTER_LABEL_DEFAULT
from tests.clock_support import SettableClock, wall_clock
from tests.enforcer.test_failsafe import Source

P = "producer_byte_rate"
ALICE = QuotaEntity.user("alice")
C1 = ClusterIdentity("c1", CLUSTER_LABEL_DEFAULT)
AFTER = timedelta(seconds=30)


@pytest.fixture
def world(tmp_path):
    """(wall clock, monotonic clock, source, quotas, enforcer)."""
    wall = wall_clock(2026, 12, 1, 6)
    clock = SettableClock(1000.0)
    source = Source()
    kafka = InMemoryQuotas({ALICE: {P: 800.0}})
    journal = Journal(tmp_path / "j.sqlite3", clock=wall)
    metrics = EnforcerMetrics(("c1",), CLUSTER_LABEL_DEFAULT)
    applier = Applier("c1", QuotaPolicy((P,), {}), kafka, journal, metrics)
    lost = LostResolutions([C1], journal.alerts, [source], AFTER, metrics, clock)
    enforcer = Enforcer(
        {"c1": applier}, journal, metrics, CLUSTER_LABEL_DEFAULT, clock=wall, lost_resolutions=lost
    )
    yield wall, clock, source, kafka, enforcer
    journal.close()


def throttle(enforcer: Enforcer, factor: float = 0.5, fingerprint: str = "a1") -> None:
    body = throttle_webhook(cluster="c1", factor=factor)
    body["alerts"][0]["fingerprint"] = fingerprint
    enforcer.handle(webhook_from_dict(body))


def later(wall: SettableClock, clock: SettableClock, seconds: float) -> None:
    wall.now += timedelta(seconds=seconds)
    clock.now += seconds


def test_a_throttle_whose_resolution_never_came_is_lifted_once_the_factor_reads_1(world):
    wall, clock, source, kafka, enforcer = world
    throttle(enforcer)
    assert kafka.values[ALICE][P] == 400.0
    later(wall, clock, AFTER.total_seconds() - 1)
    enforcer.step_lost_resolutions()
    assert source.asked == 0, "a resolution may still be on its way: not asked yet"
    later(wall, clock, 2)
    enforcer.step_lost_resolutions()
    assert source.asked == 1
    assert kafka.values[ALICE][P] == 800.0, "restored"
    assert enforcer.target("c1") == 1.0
    counted = enforcer.metrics.registry.get_sample_value(
        "kafka_volume_quota_enforcer_lost_resolutions_total", {"cluster": "c1"}
    )
    assert counted == 1.0


def test_a_factor_below_1_or_no_answer_keeps_the_throttle_and_is_asked_again_after_a_while(
    world,
):
    wall, clock, source, kafka, enforcer = world
    throttle(enforcer)
    later(wall, clock, 31)
    source.factor = 0.5
    enforcer.step_lost_resolutions()
    enforcer.step_lost_resolutions()
    assert (source.asked, kafka.values[ALICE][P]) == (1, 400.0), "kept; asked once"
    source.factor = None
    later(wall, clock, AFTER.total_seconds())
    enforcer.step_lost_resolutions()
    assert (source.asked, kafka.values[ALICE][P]) == (2, 400.0), "no answer: kept"
    source.factor = 1.0
    later(wall, clock, AFTER.total_seconds())
    enforcer.step_lost_resolutions()
    assert kafka.values[ALICE][P] == 800.0


@pytest.mark.parametrize("every", [None, timedelta(seconds=1)], ids=["lost", "quick read"])
def test_an_alert_sent_while_the_factor_is_read_keeps_its_throttle(world, every):
    wall, clock, source, kafka, enforcer = world
    enforcer.lost_resolutions.every = every
    throttle(enforcer, 0.5, "a1")
    later(wall, clock, 31)

    class NewEpisodeMeanwhile(Source):
        def current(self, cluster: ClusterIdentity) -> float | None:
            wall.now += timedelta(seconds=1)
            throttle(enforcer, 0.25, "a2")  # the webhook of a new step, as the read waits
            return 1.0  # what Prometheus saw a moment before

    enforcer.lost_resolutions.sources = [NewEpisodeMeanwhile()]
    enforcer.step_lost_resolutions()
    assert kafka.values[ALICE][P] == 200.0, "the old step forgotten, the new one holds"
    assert enforcer.target("c1") == 0.25


def test_the_fail_safes_own_factor_is_left_to_the_fail_safe(world):
    wall, clock, source, kafka, enforcer = world
    enforcer.alerts.replace_group(group_key("c1"), {("c1", FINGERPRINT): 0.5})
    later(wall, clock, 3600)
    enforcer.step_lost_resolutions()
    assert source.asked == 0
    assert enforcer.target("c1") == 0.5


def test_a_throttle_recovered_from_kafka_after_a_lost_journal_is_lifted_alike(world):
    """Held at its marker's factor until Alertmanager speaks, or until the factor reads 1."""
    wall, clock, source, kafka, enforcer = world
    enforcer.alerts.replace_group(RECOVERED_GROUP + "c1", {("c1", "journal-lost"): 0.5})
    later(wall, clock, 31)
    enforcer.step_lost_resolutions()
    assert enforcer.target("c1") == 1.0


EVERY = timedelta(seconds=1)


@pytest.fixture
def quick(world):
    """`world` with the factor also read every second while an alert is held
    (kvq.enforcer.restore.check.interval=PT1S)."""
    wall, clock, source, kafka, enforcer = world
    enforcer.lost_resolutions.every = EVERY
    return world


def test_the_factor_read_1_restores_before_the_resolution_comes(quick, caplog):
    """The exporter published 1: the rule's next evaluation, its keep_firing_for and
    Alertmanager's group_interval would bring the resolution a second or two later."""
    wall, clock, source, kafka, enforcer = quick
    source.factor = 0.5
    throttle(enforcer)
    later(wall, clock, 1)
    enforcer.step_lost_resolutions()
    assert (source.asked, kafka.values[ALICE][P]) == (1, 400.0), "below 1: kept"
    source.factor = 1.0
    later(wall, clock, 0.5)
    enforcer.step_lost_resolutions()
    assert source.asked == 1, "not asked again within the interval"
    later(wall, clock, 0.5)
    with caplog.at_level("INFO", logger="kvq.enforcer"):
        enforcer.step_lost_resolutions()
    assert kafka.values[ALICE][P] == 800.0, "restored"
    assert "restoring before the alert's resolution comes" in caplog.text
    counted = enforcer.metrics.registry.get_sample_value(
        "kafka_volume_quota_enforcer_lost_resolutions_total", {"cluster": "c1"}
    )
    assert counted == 0.0, "not a lost resolution"
    enforcer.handle(webhook_from_dict(throttle_webhook(cluster="c1", factor=None)))
    assert kafka.values[ALICE][P] == 800.0, "the resolution finds nothing held"


def test_without_an_answer_the_next_read_waits_the_lost_resolution_interval(quick):
    """Prometheus down: the loop is not held up by a read every second."""
    wall, clock, source, kafka, enforcer = quick
    source.factor = None
    throttle(enforcer)
    later(wall, clock, 1)
    enforcer.step_lost_resolutions()
    later(wall, clock, AFTER.total_seconds() - 1)
    enforcer.step_lost_resolutions()
    assert source.asked == 1
    source.factor = 1.0
    later(wall, clock, 1)
    enforcer.step_lost_resolutions()
    assert (source.asked, kafka.values[ALICE][P]) == (2, 800.0)


def test_a_factor_back_below_1_before_the_resolution_throttles_again(quick, caplog):
    """Back below 1 within the rule's keep_firing_for, the same alert keeps firing and
    Alertmanager, seeing nothing change, does not notify it again: the held alert's factor
    stands again at the next read."""
    wall, clock, source, kafka, enforcer = quick
    throttle(enforcer)
    later(wall, clock, 1)
    enforcer.step_lost_resolutions()
    assert kafka.values[ALICE][P] == 800.0, "restored early"
    source.factor = 0.5
    later(wall, clock, 1)
    with caplog.at_level("WARNING", logger="kvq.enforcer"):
        enforcer.step_lost_resolutions()
    assert kafka.values[ALICE][P] == 400.0, "throttled again, with no notification"
    assert "throttling again" in caplog.text


def test_a_resolution_that_never_comes_after_the_early_restore_is_forgotten_as_lost(quick):
    wall, clock, source, kafka, enforcer = quick
    throttle(enforcer)
    later(wall, clock, 1)
    enforcer.step_lost_resolutions()
    assert enforcer.alerts.firing_factors("c1") == [0.5], "held until its resolution"
    for _ in range(int(AFTER.total_seconds())):
        later(wall, clock, 1)
        enforcer.step_lost_resolutions()
    assert enforcer.alerts.firing_factors("c1") == []
    assert kafka.values[ALICE][P] == 800.0
    counted = enforcer.metrics.registry.get_sample_value(
        "kafka_volume_quota_enforcer_lost_resolutions_total", {"cluster": "c1"}
    )
    assert counted == 1.0
