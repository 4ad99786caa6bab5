"""The fail-safe end to end, on real Prometheus and Alertmanager (the demo stack on devcluster).

Alertmanager is stopped; the enforcer misses its heartbeats and its fail-safe stands by, reading
the exporter's /metrics. A volume then crosses its limit: the enforcer throttles on its own,
within its poll (`kvq.enforcer.failsafe.interval`, 5 s). Alertmanager back (same port): the
heartbeat and the throttle alert reach the enforcer again, the fail-safe stands down and the
quotas stay throttled, now by the alert; freeing the volume restores them through the alert.
"""

from __future__ import annotations

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from demo import scenario
from demo.stack import DemoStack
from devkit.processes import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.paced]

AFTER_S = 20
"""kvq.enforcer.failsafe.after here (the default is 30 s): above the heartbeat's pace, which is
its repeat_interval (10 s) rounded up to the group_interval (5 s)."""


def metric(stack: DemoStack, name: str) -> float:
    text = requests.get(stack.enforcer_url + "/metrics", timeout=5).text
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name
    )


def test_alertmanager_down_the_failsafe_throttles_and_stands_down_when_it_is_back(tmp_path):
    extra = f"kvq.enforcer.failsafe.after=PT{AFTER_S}S\n"
    with DemoStack(tmp_path / "stack", extra_properties=extra) as stack:
        beats = "kafka_volume_quota_enforcer_heartbeats_total"
        active = "kafka_volume_quota_enforcer_failsafe_active"
        wait_until(lambda: metric(stack, beats) >= 2, 60, what="heartbeats, repeated")
        # (Prometheus' first evaluation may come after AFTER_S: then the fail-safe stood by once)
        wait_until(lambda: metric(stack, active) == 0, 60, what="no fail-safe while they come")
        before = scenario.set_initial_quotas(stack)

        stack.alertmanager.stop()
        wait_until(lambda: metric(stack, active) == 1, 60, what="the fail-safe standing by")

        def health() -> dict:
            return requests.get(stack.enforcer_url + "/healthz", timeout=5).json()

        # its first read of the exporters may still be under way (/healthz says "reading")
        acting = "acting on factor 1.0 from the exporters' /metrics"
        wait_until(lambda: acting in health()["problems"][0], 30, what="the exporters read")
        assert health()["status"] == "degraded"
        assert "fail-safe: no heartbeat alert for" in health()["problems"][0]

        stack.control.set_log_dir(1, 0, usable_bytes=1_000)
        # the bound: throttled within 30 s of the crossing, with Alertmanager down
        wait_until(lambda: scenario.throttled(stack.quotas(), before), 30, what="throttled")

        stack.start_alertmanager()  # same port: Prometheus sends it the firing alerts again
        wait_until(lambda: metric(stack, active) == 0, 120, what="the fail-safe stood down")
        assert scenario.throttled(stack.quotas(), before), "the throttle alert holds it now"

        stack.control.set_log_dir(1, 0, usable_bytes=None)
        wait_until(lambda: stack.quotas() == before, 90, what="restored by the alert's resolution")
