"""The slowdown scenario's other data (broker 0's disk holds more than Kafka's logs) is on the
volume before the stack's exporter starts: its first poll reads it, and graceful slowdown does not
take data that was already there for a fill rate. Written while the exporter ran, it read as a
load step (a check 2 s after the first poll found 9.5 MB more: 4.7 MB/s with 15.7 MB to the
limit), and the factor fell to 0.90 on the empty cluster, an episode before the load (on real
Kafka, as `python -m bench.slowdown --partition-sizes --retention-forecast` runs it)."""

from __future__ import annotations

import pytest

from demo import slowdown
from demo.graceful import policy_properties, stack_options
from demo.producers import make_stack
from devkit.processes import wait_until
from devkit.python_replay import read_archive
from kvq.model.observation import Observation

pytestmark = pytest.mark.e2e

POLICY = "graceful-slowdown"
POLLS = 5


def broker_0_usable(observation: Observation) -> int:
    (usable,) = [d.usable_bytes for d in observation.log_dirs if d.broker_id == 0]
    return usable


def test_the_other_data_is_read_by_the_first_poll_and_slows_nobody(tmp_path):
    setup = slowdown.SETUP
    graceful = policy_properties(
        POLICY, partition_sizes=True, retention_forecast=True, loop=setup.loop
    )
    work = tmp_path / POLICY
    with make_stack(
        work, setup, graceful, validity=slowdown.VALIDITY, **stack_options(POLICY)
    ) as stack:

        def polls() -> list[Observation]:
            observations = read_archive(work / "archive", "demo").observations
            return observations if len(observations) >= POLLS else []

        first = wait_until(polls, 60, what=f"{POLLS} polls")[0]
        assert broker_0_usable(first) <= setup.capacity - setup.other_data
        factor = 'kafka_volume_quota_throttle_factor{cluster="demo"}'
        wait_until(
            lambda: stack.prometheus.query(f"count_over_time({factor}[5m]) >= {POLLS}"),
            60,
            what=f"{POLLS} scrapes of the factor",
        )
        (lowest,) = stack.prometheus.query(f"min_over_time({factor}[5m])")
        assert float(lowest["value"][1]) == 1.0, "slowed before any load"
