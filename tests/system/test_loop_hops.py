"""demo/hops.py finds every hop of a throttle in the logs and in Prometheus of a real loop.

The whole loop (devcluster, exporter, Prometheus, Alertmanager, enforcer) as the demo runs it; a
log dir is driven below the limit, and once Kafka's quotas are throttled every hop of the side by
side table (`python -m bench.versus`) must be found, none before the crossing. Its counterpart for
the Strimzi plugin, the check that saw a crossing, is found in a real broker's server.log.
"""

from __future__ import annotations

import time
import uuid

import pytest

from demo import hops, scenario
from demo.stack import DemoStack
from devkit.kafka_cluster import KafkaCluster, strimzi_quota_callback
from devkit.processes import wait_until
from enforcer.quota_client import KafkaQuotaClient
from enforcer.quota_plan import Change
from kvq.kafka.quota_entity import QuotaEntity

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
        "msg=flushing alerts=[KafkaVolumeQuotaThrottle[d8ea24e][active]]"
    )
    assert hops.log_time(kvq) == pytest.approx(1795582261.453)
    assert hops.log_time(alertmanager) - hops.log_time(kvq) == pytest.approx(1.007)
    assert hops.log_time("no time here") is None


def test_the_strimzi_plugins_check_that_saw_a_crossing_is_found(tmp_path, kafka_dist):
    """Plugin 0.3.1 on Kafka 4.1 with a limit above what the volume holds (violated from its first
    check on): the broker's first `Throttle Factor changed` line is the moment its check saw it."""
    capacity = 32 << 20
    plugin = strimzi_quota_callback(
        {
            "storage.per.volume.limit.min.available.bytes": str(capacity + 1),
            # what the side by side runs (at 1 s, 0.3.1's describe times out: it waits that long)
            "storage.check-interval": "5",
        }
    )
    started = time.time()
    with KafkaCluster(
        tmp_path, nodes=1, log_dir_bytes=capacity, dist=kafka_dist, broker_properties=plugin
    ) as kafka:
        checks = wait_until(lambda: hops.plugin_hops(kafka, started)[0][0], 120, what="its check")
        assert isinstance(checks, float) and started <= checks <= time.time()
        assert hops.plugin_hops(kafka, started) == [
            (checks, "the first broker checked and saw it (plugin)"),
            (checks, "every broker checked and saw it (plugin)"),
        ]
        assert hops.plugin_hops(kafka, time.time() + 5)[0][0] is None  # no change after it


def test_each_broker_applying_a_quota_is_found(shared_kafka):
    """Every broker of a real cluster logs the produce quota it applies (from the metadata log):
    the moment it enforces the enforcer's throttle."""
    entity = QuotaEntity.of([("client-id", f"hops-{uuid.uuid4().hex[:8]}")])
    client = KafkaQuotaClient(shared_kafka.admin_properties)
    started = time.time()
    try:
        client.alter([Change(entity, "producer_byte_rate", 8192.0)])
        every = wait_until(
            lambda: hops.broker_quota_hops(shared_kafka, started)[1][0], 60, what="every broker"
        )
        first = hops.broker_quota_hops(shared_kafka, started)[0][0]
        assert isinstance(first, float) and started - 1 <= first <= every <= time.time()
    finally:
        client.alter([Change(entity, "producer_byte_rate", None)])
        client.close()


def test_log_times_of_kafka_server_log_lines():
    line = "[2026-11-25 04:51:01,453] INFO Throttle Factor changed from 1.0 to 0.0 (io.strimzi...)"
    assert hops.log4j_time(line) == pytest.approx(
        time.mktime((2026, 11, 25, 4, 51, 1, 0, 0, -1)) + 0.453
    )
    assert hops.log4j_time("Throttle Factor changed, no time") is None
