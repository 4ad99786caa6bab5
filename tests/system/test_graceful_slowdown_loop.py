"""graceful-slowdown end to end: devcluster, the exporter, Prometheus with the rules,
Alertmanager with the example route and the enforcer, all real processes. A log dir that fills
too fast for the horizon slows producers down in steps, each step reaches Kafka's quotas within
seconds (not at Alertmanager's repeat_interval), and freeing space restores them exactly."""

from __future__ import annotations

import time

import pytest

from demo import scenario
from demo.stack import DemoStack
from devkit.processes import wait_until
from enforcer.quota_plan import BYTE_RATE_FLOOR

pytestmark = [pytest.mark.e2e, pytest.mark.paced]

ALICE = (("user", "alice"),)
MB = 1_000_000


def test_a_filling_volume_slows_producers_in_steps_that_reach_kafka_and_freeing_it_restores(
    tmp_path,
):
    # The volume fills by its pinned usable bytes, not by its partitions: the paced steps on the
    # net fill rate, as with the partitions' sizes not read (with them, the factor is a level
    # that may fall far in one poll: tests/kvq/model/test_slowdown_study.py).
    graceful = (
        "kvq.throttle.policy=graceful-slowdown\nkvq.throttle.slowdown.horizon=PT2M\n"
        "kvq.throttle.slowdown.partition.sizes=false\n"
    )
    with DemoStack(tmp_path / "stack", extra_properties=graceful) as stack:
        before = scenario.set_initial_quotas(stack)
        original = before[ALICE][scenario.KEY]
        seen: dict[float, float] = {}  # alice's quota -> when Kafka first held it
        # 2 MB/s with 90 MB above the 10 MB limit: 45 s to go, well within the 120 s horizon
        # and longer than the 30 s within which the factor would fall at once
        usable, started = 100 * MB, time.monotonic()
        while len([q for q in seen if BYTE_RATE_FLOOR < q < original]) < 4:
            assert time.monotonic() - started < 60, f"quotas seen: {sorted(seen)}"
            stack.control.set_log_dir(1, 0, usable_bytes=usable)
            usable -= 2 * MB
            assert usable > 10 * MB, f"reached the limit; quotas seen: {sorted(seen)}"
            quota = stack.quotas().get(ALICE, {}).get(scenario.KEY)
            if quota is not None:
                seen.setdefault(quota, time.monotonic() - started)
            time.sleep(1)
        steps = sorted((q for q in seen if q < original), reverse=True)
        # four steps within one repeat_interval: each reached the enforcer as a new alert
        times = [seen[q] for q in steps]
        assert max(times) - min(times) < stack.loop.repeat_interval, seen
        # small steps, never a jump towards the floor (a quota close to the rate it meets): the
        # policy lowers the factor by at most 5% a second, and a notification may carry the
        # steps of a few polls
        for higher, lower in zip([original, *steps], steps, strict=False):
            assert lower >= higher / 1.5, (higher, lower)
        # space freed, far more than the horizon needs at the rate it filled at (the volume
        # grown to 1 GB): producers go at once, the original quotas come back exactly. Freed
        # to its 100 MB only, 90 MB above the limit, less than the 120 s horizon at its peak of
        # 2 MB/s, the factor would stay at most 0.95 until space is freed again.
        stack.control.set_log_dir(1, 0, usable_bytes=None, capacity_bytes=1_000_000_000)
        wait_until(lambda: stack.quotas() == before, 60, what="quotas restored exactly")
