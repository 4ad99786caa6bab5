"""Out-of-order notifications (issue 24, item 2), end to end: the real `kvq-enforcer` process and
HTTP server against a devcluster over TCP.

Alertmanager can deliver a notification late (a POST it gave up on still queued in the enforcer,
an HA replica sending on its own). A firing that the same episode's resolution already ended once
throttled until kvq.enforcer.alert.expiry (PT12H); it must change nothing, even after a restart,
while a genuinely new episode of the same alert still throttles.

But a firing with an old startsAt is also what Alertmanager sends when Prometheus resumes an alert
that Alertmanager resolved itself (Prometheus could not reach it for longer than the alert's
endsAt): it must throttle once kvq.enforcer.stale.window has passed since the resolution arrived,
and at once when Prometheus (kvq.enforcer.prometheus.url, a real one here) says it fires.
"""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
import yaml

from devkit.alertmanager import fresh_time, throttle_webhook
from devkit.processes import wait_until
from devkit.prometheus import run_prometheus
from tests.enforcer.test_integration import CLUSTER, Enforcer, P, key, quotas, seed

pytestmark = pytest.mark.integration


def notification(factor: float | None, starts_at, ends_at=None) -> dict:
    """One throttle alert of the same fingerprint and group each time, with explicit times."""
    return throttle_webhook(cluster=CLUSTER, factor=factor, starts_at=starts_at, ends_at=ends_at)


def test_a_firing_delivered_after_its_resolution_leaves_the_quotas_alone(dc, enforcer):
    seed(dc, {"user": "alice"}, producer_byte_rate=800.0)
    before = quotas(dc)
    e = enforcer
    t1 = fresh_time()
    t2 = t1 + timedelta(seconds=30)
    resolved = notification(None, starts_at=t1, ends_at=t2)
    stale_firing = notification(0.5, starts_at=t1)

    status, body = e.post(resolved)
    assert status == 200, body
    status, body = e.post(stale_firing)
    assert status == 200, body
    assert quotas(dc) == before, "the episode the firing belongs to is over"
    assert body["stale_alerts"] == 1
    assert e.status()["firing_alerts"] == 0 and e.status()["target_factor"] == 1.0
    assert "ignored 1 alert(s) of episodes already resolved" in e.process.log_text()

    e.stop()
    e.start()  # what was heard survives a restart, as the firing alerts do
    status, body = e.post(stale_firing)
    assert quotas(dc) == before
    assert status == 200 and body["stale_alerts"] == 1, body

    t3 = t2 + timedelta(seconds=60)
    status, body = e.post(notification(0.5, starts_at=t3))
    assert status == 200 and body["stale_alerts"] == 0, body
    assert quotas(dc)[key(user="alice")] == {P: 400.0}, "a new episode throttles"

    status, body = e.post(resolved)
    assert quotas(dc)[key(user="alice")] == {P: 400.0}, "the new episode still fires"
    assert status == 200 and body["stale_alerts"] == 1, "it ends the older episode"

    status, body = e.post(notification(None, starts_at=t3, ends_at=t3 + timedelta(seconds=5)))
    assert status == 200 and body["stale_alerts"] == 0, body
    assert quotas(dc) == before


def test_a_retried_firing_after_throttle_and_restore_does_not_throttle_again(dc, enforcer):
    seed(dc, {"user": "alice"}, producer_byte_rate=800.0)
    before = quotas(dc)
    e = enforcer
    t1 = fresh_time()
    firing = notification(0.5, starts_at=t1)
    assert e.post(firing)[0] == 200
    assert quotas(dc)[key(user="alice")] == {P: 400.0}
    resolved = notification(None, starts_at=t1, ends_at=t1 + timedelta(minutes=3))
    assert e.post(resolved)[0] == 200
    assert quotas(dc) == before

    status, body = e.post(firing)  # Alertmanager's earlier attempt, handled late
    assert quotas(dc) == before
    assert status == 200 and body["stale_alerts"] == 1, body
    assert e.status()["applied_factor"] == 1.0


def test_an_alert_alertmanager_resumes_after_resolving_it_throttles_after_the_window(tmp_path, dc):
    """Prometheus -> Alertmanager partitioned past the alert's endsAt: Alertmanager resolves the
    alert, then, Prometheus sending it again, fires it with its old startsAt. Its repeats came
    every repeat_interval and each was ignored as stale for 12 hours while the disk filled."""
    seed(dc, {"user": "alice"}, producer_byte_rate=800.0)
    before = quotas(dc)
    window = 1.0
    e = Enforcer(tmp_path, dc, extra={"kvq.enforcer.stale.window": f"PT{window:g}S"})
    try:
        e.start()
        t1 = fresh_time()
        resumed = notification(0.5, starts_at=t1)
        assert e.post(resumed)[0] == 200
        assert quotas(dc)[key(user="alice")] == {P: 400.0}
        status, body = e.post(notification(None, starts_at=t1, ends_at=t1 + timedelta(minutes=4)))
        assert status == 200 and quotas(dc) == before, body
        resolution_answered = time.monotonic()

        wait_until(lambda: time.monotonic() > resolution_answered + window, timeout=5 * window)
        status, body = e.post(resumed)
        assert status == 200 and body["stale_alerts"] == 0, body
        assert quotas(dc)[key(user="alice")] == {P: 400.0}, "the resumed alert throttles"
        status, body = e.post(resumed)  # Alertmanager's repeat
        assert status == 200 and body["stale_alerts"] == 0, body
        assert quotas(dc)[key(user="alice")] == {P: 400.0}

        resolved = notification(None, starts_at=t1, ends_at=t1 + timedelta(minutes=9))
        assert e.post(resolved)[0] == 200, "Prometheus resolves it in the end"
        assert quotas(dc) == before
    finally:
        e.stop()


def throttle_alert_rule(path, cluster: str) -> None:
    """A rule file in which KafkaVolumeQuotaThrottle fires for `cluster` (as the shipped rule
    would while that cluster's disk is full)."""
    rule = {
        "alert": "KafkaVolumeQuotaThrottle",
        "expr": "vector(0.5)",
        "labels": {"cluster": cluster},
        "annotations": {"throttle_factor": "{{ $value }}"},
    }
    path.write_text(yaml.safe_dump({"groups": [{"name": "throttle", "rules": [rule]}]}))


def test_a_stale_judged_firing_throttles_when_prometheus_says_the_alert_fires(tmp_path, dc):
    """Within the window a resumed alert looks like a late retry: Prometheus tells them apart."""
    seed(dc, {"user": "alice"}, producer_byte_rate=800.0)
    before = quotas(dc)
    rules = tmp_path / "rules.yml"
    throttle_alert_rule(rules, cluster="another-cluster")
    with run_prometheus(tmp_path / "prometheus", targets={}, rule_files=[rules]) as prom:
        prom.wait_for(lambda: prom.firing("KafkaVolumeQuotaThrottle"), what="the rule firing")
        e = Enforcer(tmp_path, dc, extra={"kvq.enforcer.prometheus.url": prom.url})
        try:
            e.start()
            t1 = fresh_time()
            late = notification(0.5, starts_at=t1)
            assert e.post(notification(None, starts_at=t1, ends_at=t1))[0] == 200
            status, body = e.post(late)
            assert status == 200 and body["stale_alerts"] == 1, "Prometheus: it does not fire"
            assert quotas(dc) == before
            assert "cannot confirm with Prometheus" not in e.process.log_text()

            throttle_alert_rule(rules, cluster=CLUSTER)
            prom.reload()
            prom.wait_for(lambda: prom.firing("KafkaVolumeQuotaThrottle", cluster=CLUSTER))
            status, body = e.post(late)
            assert status == 200 and body["stale_alerts"] == 0, body
            assert quotas(dc)[key(user="alice")] == {P: 400.0}, "Prometheus: it fires"
            assert "Prometheus says the throttle is on" in e.process.log_text()
        finally:
            e.stop()
