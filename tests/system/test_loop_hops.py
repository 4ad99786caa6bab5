"""demo/hops.py finds every hop of a throttle in the logs and in Prometheus of a real loop.

The whole loop (devcluster, exporter, Prometheus, Alertmanager, enforcer) as the demo runs it; a
log dir is driven below the limit, and once Kafka's quotas are throttled every hop of the side by
side table (`python -m bench.versus`) must be found, none before the crossing.
"""

from __future__ import annotations

import time

import pytest

from demo import hops, scenario
from demo.stack import DemoStack
from devkit.processes import wait_until

pytestmark = pytest.mark.e2e


def test_every_hop_of_a_throttle_is_found(tmp_path):
    with DemoStack(tmp_path / "stack") as stack:
        before = scenario.set_initial_quotas(stack)
        crossed = time.time()
        stack.control.set_log_dir(1, 0, usable_bytes=1_000)
        wait_until(lambda: scenario.throttled(stack.quotas(), before), 30, what="throttled quotas")
        # Kafka shows the quotas before the enforcer logs them (it logs once verified): wait
        # until each hop's line or sample is there rather than read the logs once.
        found: list[tuple[float | None, str]] = []

        def every_hop_found() -> bool:
            found[:] = hops.loop_hops(stack, crossed)
            return all(at is not None for at, _ in found)

        wait_until(every_hop_found, 30, what="every hop of the throttle in the logs and Prometheus")
    assert [hop for at, hop in found if at is None] == []
    assert all(at >= crossed - 1.0 for at, _ in found)


def test_log_times_of_kvq_and_alertmanager_lines():
    kvq = 'ts=2026-11-25T04:51:01.453Z level=info logger=kvq.exporter msg="poll ok: factor 0.0"'
    alertmanager = (
        "ts=2026-11-25T04:51:02.460Z caller=dispatch.go:515 level=debug component=dispatcher "
        'msg=flushing alerts=[KafkaVolumeQuotaThrottle[d8ea24e][active]]'
    )
    assert hops.log_time(kvq) == pytest.approx(1795582261.453)
    assert hops.log_time(alertmanager) - hops.log_time(kvq) == pytest.approx(1.007)
    assert hops.log_time("no time here") is None
