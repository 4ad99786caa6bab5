"""The fail-safe: heartbeats per cluster, the factor read while they are missing, the stand-down."""

from __future__ import annotations

import pytest

from devkit.alertmanager import throttle_webhook
from devkit.fake_exporter import FakeExporter
from devkit.memory_quotas import InMemoryQuotas
from devkit.processes import server_port
from enforcer.applier import Applier
from enforcer.enforcer import Enforcer
from enforcer.failsafe import STAND_DOWN_AFTERS, ExporterFactor, FailSafe
from enforcer.journal import Journal
from enforcer.metrics import EnforcerMetrics
from enforcer.quota_plan import QuotaPolicy
from enforcer.webhook_payload import webhook_from_dict
from kvq.contract.cluster_identity import ClusterIdentity
from kvq.kafka.quota_entity import QuotaEntity
from kvq.settings.config import CLUSTER_LABEL_DEFAULT
from tests.clock_support import SettableClock, wall_clock

P = "producer_byte_rate"
ALICE = QuotaEntity.user("alice")
C1 = ClusterIdentity("c1", CLUSTER_LABEL_DEFAULT)
HEARTBEAT = "KafkaVolumeQuotaHeartbeat"
AFTER, INTERVAL = 30.0, 5.0
STAND_DOWN_S = STAND_DOWN_AFTERS * AFTER


class Source:
    """A factor source whose answer the test sets (None: it cannot say)."""

    name = "the test's source"

    def __init__(self) -> None:
        self.factor: float | None = 1.0
        self.asked = 0

    def current(self, cluster: ClusterIdentity) -> float | None:
        self.asked += 1
        return self.factor


@pytest.fixture
def world(tmp_path):
    """(monotonic clock, source, quotas, enforcer factory); a restart is a new factory call."""
    wall = wall_clock(2026, 11, 29, 6)
    clock = SettableClock(1000.0)
    source = Source()
    kafka = InMemoryQuotas({ALICE: {P: 800.0}})
    journals: list[Journal] = []

    def start() -> Enforcer:
        journal = Journal(tmp_path / "j.sqlite3", clock=wall)
        journals.append(journal)
        metrics = EnforcerMetrics(("c1",), CLUSTER_LABEL_DEFAULT)
        applier = Applier("c1", QuotaPolicy((P,), {}), kafka, journal, metrics)
        failsafe = FailSafe([C1], journal.alerts, metrics, AFTER, INTERVAL, [source], clock)
        return Enforcer(
            {"c1": applier},
            journal,
            metrics,
            CLUSTER_LABEL_DEFAULT,
            clock=wall,
            failsafe=failsafe,
            heartbeat_name=HEARTBEAT,
        )

    yield clock, source, kafka, start
    for journal in journals:
        journal.close()


def heartbeat(enforcer: Enforcer):
    body = throttle_webhook(cluster="c1", factor=0.0)
    body["groupKey"] = '{}:{alertname="KafkaVolumeQuotaHeartbeat"}'
    for alert in [body, *body["alerts"]]:
        alert.setdefault("labels", {})["alertname"] = HEARTBEAT
    body["commonLabels"]["alertname"] = HEARTBEAT
    return enforcer.handle(webhook_from_dict(body))


def heartbeats_for(enforcer: Enforcer, clock: SettableClock[float], seconds: float) -> None:
    """`seconds` pass with a heartbeat every 10 s (as Alertmanager repeats it), the fail-safe
    stepping along."""
    end = clock.now + seconds
    while clock.now < end:
        heartbeat(enforcer)
        clock.now = min(clock.now + 10, end)
        enforcer.step_failsafe()


def silent_past_after(
    enforcer: Enforcer, clock: SettableClock[float], source: Source, factor: float | None
) -> None:
    """No heartbeat for longer than `after`, the source saying `factor`: the fail-safe steps in."""
    source.factor = factor
    clock.now += AFTER + 1
    enforcer.step_failsafe()


def test_a_heartbeat_is_heard_and_changes_nothing_else(world):
    clock, source, kafka, start = world
    enforcer = start()
    outcome = heartbeat(enforcer)
    assert outcome.outcome == "heartbeat" and outcome.results == {}
    assert kafka.calls == [], "Kafka was not asked"
    assert enforcer.target("c1") == 1.0


def test_no_heartbeat_for_the_time_given_reads_the_factor_and_throttles(world):
    clock, source, kafka, start = world
    enforcer = start()
    source.factor = 0.5
    enforcer.step_failsafe()
    assert source.asked == 0, "heard at start: nothing to do within `after`"
    clock.now += AFTER + 1
    enforcer.step_failsafe()
    assert kafka.values[ALICE][P] == 400.0
    assert enforcer.health()["status"] == "degraded"
    assert (
        "fail-safe: no heartbeat alert for 31 s; acting on factor 0.5"
        in (enforcer.health()["problems"][0])
    )
    source.factor = 0.0
    clock.now += INTERVAL - 1
    enforcer.step_failsafe()
    assert kafka.values[ALICE][P] == 400.0, "read again only every interval"
    clock.now += 1
    enforcer.step_failsafe()
    assert kafka.values[ALICE][P] == 1.0, "a lower factor read: applied (floor 1 B/s here)"


def test_heartbeats_back_stand_down_after_a_while_and_the_alerts_decide_again(world):
    clock, source, kafka, start = world
    enforcer = start()
    silent_past_after(enforcer, clock, source, 0.5)
    assert kafka.values[ALICE][P] == 400.0
    heartbeats_for(enforcer, clock, STAND_DOWN_S - 1)
    assert kafka.values[ALICE][P] == 400.0, "held while a throttle alert may still come"
    heartbeats_for(enforcer, clock, 1)
    assert kafka.values[ALICE][P] == 800.0, "no throttle alert fires: restored"
    assert enforcer.health()["status"] == "ok"


def test_a_throttle_alert_arriving_while_standing_down_keeps_the_throttle(world):
    clock, source, kafka, start = world
    enforcer = start()
    silent_past_after(enforcer, clock, source, 0.5)
    heartbeat(enforcer)
    enforcer.handle(webhook_from_dict(throttle_webhook(cluster="c1", factor=0.5)))
    heartbeats_for(enforcer, clock, STAND_DOWN_S)
    assert kafka.values[ALICE][P] == 400.0, "the alert holds it now"


def test_a_restart_during_the_silence_keeps_the_fail_safes_throttle(world):
    clock, source, kafka, start = world
    first = start()
    silent_past_after(first, clock, source, 0.5)
    second = start()
    assert second.target("c1") == 0.5, "journaled like an alert"
    assert second.reconcile() == {}
    assert kafka.values[ALICE][P] == 400.0


def test_no_source_answering_keeps_what_is_applied_and_says_so(world):
    clock, source, kafka, start = world
    enforcer = start()
    silent_past_after(enforcer, clock, source, None)
    assert kafka.values[ALICE][P] == 800.0
    assert "no source answers with the throttle factor" in enforcer.health()["problems"][0]


def test_while_the_first_read_is_under_way_health_says_it_is_reading(world):
    clock, source, kafka, start = world
    enforcer = start()
    seen: list[str] = []

    class Slow(Source):
        def current(self, cluster: ClusterIdentity) -> float | None:
            seen.extend(enforcer.health()["problems"])  # /healthz asked mid-read
            return 0.5

    enforcer.failsafe.sources = [Slow()]
    silent_past_after(enforcer, clock, source, 0.5)
    assert seen == [
        "cluster c1: fail-safe: no heartbeat alert for 31 s; reading the throttle "
        "factor from the test's source"
    ]
    assert "acting on factor 0.5 from the test's source" in enforcer.health()["problems"][0]


def test_the_exporters_lowest_factor_of_the_cluster_is_read():
    with FakeExporter(cluster="c1") as one, FakeExporter(cluster="c1") as two:
        one.set_available(1, "/data/a", 10**9)
        two.set_available(1, "/data/a", 10)  # below the limit: factor 0
        urls = {"c1": [f"http://{one.target}/metrics", f"http://{two.target}/metrics"]}
        assert ExporterFactor(urls).current(C1) == 0.0
        assert ExporterFactor({"c1": [f"http://{one.target}/metrics"]}).current(C1) == 1.0
        other = ClusterIdentity("c2", CLUSTER_LABEL_DEFAULT)
        assert ExporterFactor({"c2": urls["c1"]}).current(other) is None, "no series of c2"


def test_an_exporter_that_does_not_answer_is_skipped():
    with FakeExporter(cluster="c1") as one:
        one.set_available(1, "/data/a", 10)
        urls = {"c1": [f"http://127.0.0.1:{server_port()}/metrics", f"http://{one.target}/metrics"]}
        assert ExporterFactor(urls, timeout_s=2).current(C1) == 0.0
