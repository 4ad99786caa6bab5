"""Out-of-order notifications (issue 24, item 2), end to end: the real `kvq-enforcer` process and
HTTP server against a devcluster over TCP.

Alertmanager can deliver a notification late (a POST it gave up on still queued in the enforcer,
an HA replica sending on its own). A firing that the same episode's resolution already ended once
throttled until kvq.enforcer.alert.expiry (PT12H); it must change nothing, even after a restart,
while a genuinely new episode of the same alert still throttles.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from devkit.alertmanager import fresh_time, throttle_webhook
from tests.enforcer.test_integration import CLUSTER, Enforcer, P, key, quotas, seed

pytestmark = pytest.mark.integration


@pytest.fixture
def dc(devcluster):
    return devcluster(brokers=1, log_dirs_per_broker=1)


@pytest.fixture
def enforcer(tmp_path, dc):
    e = Enforcer(tmp_path, dc)
    try:
        yield e.start()
    finally:
        e.stop()


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
