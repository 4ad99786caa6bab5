"""End to end: devcluster, exporter, Prometheus, Alertmanager and the enforcer, all real processes.

The demo's scenario with every step asserted, plus restarts of Alertmanager and of the enforcer
while throttled, duplicate notifications that must not change Kafka again, and Prometheus' alerts
not reaching Alertmanager for a while.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator

import pytest
import requests
import yaml
from prometheus_client.parser import text_string_to_metric_families

from demo import scenario
from demo.stack import DemoStack
from devkit.processes import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.paced]


@pytest.fixture
def stack(tmp_path):
    with DemoStack(tmp_path / "stack") as running:
        yield running


def webhooks_received(stack: DemoStack) -> float:
    """Webhooks the enforcer answered with throttle alerts in them (the heartbeat's, every few
    seconds, not counted)."""
    text = requests.get(stack.enforcer_url + "/metrics", timeout=5).text
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        if family.name == "kafka_volume_quota_enforcer_webhooks"
        for sample in family.samples
        if sample.name.endswith("_total") and sample.labels["outcome"] != "heartbeat"
    )


def alter_calls(stack: DemoStack) -> int:
    return stack.control.requests()["total"].get("AlterClientQuotas", 0)


def throttle(stack: DemoStack) -> dict:
    """Set quotas, fill a log dir below the limit, wait until Kafka's quotas are throttled."""
    before = scenario.set_initial_quotas(stack)
    stack.control.set_log_dir(1, 0, usable_bytes=1_000)
    wait_until(lambda: scenario.throttled(stack.quotas(), before), 30, what="throttled quotas")
    return before


def free_and_wait_for_restore(stack: DemoStack, before: dict) -> None:
    stack.control.set_log_dir(1, 0, usable_bytes=None)
    # Usually a few seconds; on a loaded machine an AlterClientQuotas may time out unanswered, and
    # then the enforcer re-verifies after kvq.enforcer.alter.settle (PT75S) in case it lands late.
    wait_until(lambda: stack.quotas() == before, 90, what="quotas restored exactly")


def test_full_volume_throttles_every_quota_and_freeing_it_restores_them_exactly(stack):
    timeline = scenario.Timeline()
    outcome = scenario.run(stack, timeline, log=lambda _: None)
    labels = [label for _, label in timeline.events]
    assert labels == [
        scenario.CROSSED,
        scenario.SEEN,
        scenario.FIRED,
        scenario.APPLIED,
        scenario.FREED,
        scenario.RECOVERED,
        scenario.RESOLVED,
        scenario.RESTORED,
    ]
    assert outcome.restored == outcome.before  # byte for byte, nothing left behind
    throttled = outcome.throttled
    for entity, value in scenario.INITIAL_QUOTAS.items():
        assert outcome.before[entity]["producer_byte_rate"] == value
        assert throttled[entity]["producer_byte_rate"] == 8192.0  # factor 0: the byte-rate floor
    assert throttled[(("user", None),)]["producer_byte_rate"] == 8192.0  # the default user too
    replicator = throttled[(("user", "replicator"),)]["producer_byte_rate"]
    assert replicator >= stack.produce  # the excluded principal stays unthrottled
    assert (("user", None),) not in outcome.restored and (("user", "replicator"),) not in (
        outcome.restored
    )
    assert outcome.detect_to_enforce_seconds > 0
    alert = stack.prometheus.alerts()
    assert not [a for a in alert if a["labels"]["alertname"] == scenario.ALERT]


def test_alertmanager_restart_and_duplicate_notifications_change_nothing(stack):
    before = throttle(stack)
    # Kafka is throttled while the webhook that did it is still being answered (the enforcer
    # verifies and checks the brokers' quota callback first): count it before waiting for more.
    received = wait_until(
        lambda: webhooks_received(stack), 30, what="the throttling webhook answered"
    )
    changes = alter_calls(stack)
    stack.alertmanager.stop()
    # A replaced Alertmanager (same port, its notification log lost) gets the firing alert again
    # from Prometheus and notifies the enforcer again: a duplicate that must change nothing.
    stack.start_alertmanager(fresh_storage=True)
    wait_until(lambda: webhooks_received(stack) > received, 30, what="a repeated notification")
    assert alter_calls(stack) == changes
    assert scenario.throttled(stack.quotas(), before)
    free_and_wait_for_restore(stack, before)


def test_space_freed_while_alertmanager_is_replaced_restores_without_its_resolution(stack):
    """A replaced Alertmanager (its notification log lost) that first hears of the throttle
    alert resolved never notifies the resolution: the enforcer finds the factor back at 1 where
    its fail-safe reads it (here the exporter) and restores, kvq.enforcer.resolution.check.after
    (30 s) after the alert was last sent, not kvq.enforcer.alert.expiry (12 h) later."""
    before = throttle(stack)
    wait_until(lambda: webhooks_received(stack), 30, what="the throttling webhook answered")
    stack.alertmanager.stop()
    stack.control.set_log_dir(1, 0, usable_bytes=None)
    wait_until(lambda: not scenario.firing(stack), 30, what="the alert resolved in Prometheus")
    stack.start_alertmanager(fresh_storage=True)
    wait_until(lambda: stack.quotas() == before, 90, what="quotas restored exactly")
    assert webhooks_received(stack) == 1, "restored with no notification from Alertmanager"


def test_enforcer_killed_while_throttled_restores_everything_after_restart(stack):
    before = throttle(stack)
    stack.processes["enforcer"].signal(signal.SIGKILL)
    stack.processes["enforcer"].proc.wait(10)
    stack.stop_enforcer()
    stack.start_enforcer()  # same port and journal
    free_and_wait_for_restore(stack, before)
    assert alter_calls(stack) > 0


@contextlib.contextmanager
def alerts_not_reaching_alertmanager(stack: DemoStack) -> Iterator[None]:
    """Prometheus keeps evaluating but sends its alerts nowhere (its `alerting` section removed)
    until the block ends, as in a network partition between the two."""
    config = stack.prometheus.config_path
    text = config.read_text()
    without_alerting = yaml.safe_load(text)
    del without_alerting["alerting"]
    config.write_text(yaml.safe_dump(without_alerting, sort_keys=False))
    stack.prometheus.reload()
    try:
        yield
    finally:
        config.write_text(text)
        stack.prometheus.reload()


def alertmanager_starts_at(stack: DemoStack) -> str:
    """When Alertmanager says the throttle alert started (the heartbeat is there too)."""
    alerts = requests.get(stack.alertmanager.url + "/api/v2/alerts", timeout=5).json()
    (alert,) = [a for a in alerts if a["labels"]["alertname"] == scenario.ALERT]
    return alert["startsAt"]


def test_an_alert_alertmanager_resolved_in_a_partition_throttles_when_it_comes_back(tmp_path):
    """Alertmanager resolves the alert Prometheus no longer sends (its endsAt, 4 s in the demo,
    passes), the enforcer restores; when Prometheus reaches it again, Alertmanager fires the
    still active alert with its old startsAt, which the enforcer once ignored as a stale retry
    for kvq.enforcer.alert.expiry (12 h) while the disk stayed full."""
    stale_window = "kvq.enforcer.stale.window=PT0.5S\n"  # the resumed alert comes later
    with DemoStack(tmp_path / "stack", extra_properties=stale_window) as stack:
        before = throttle(stack)
        started = alertmanager_starts_at(stack)
        with alerts_not_reaching_alertmanager(stack):
            wait_until(lambda: stack.quotas() == before, 60, what="the resolved alert restoring")
        wait_until(lambda: scenario.throttled(stack.quotas(), before), 30, what="throttled again")
        assert alertmanager_starts_at(stack) == started, "the alert came back with its old start"
        free_and_wait_for_restore(stack, before)
