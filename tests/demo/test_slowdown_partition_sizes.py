"""`make demo SCENARIO=slowdown KAFKA=apache --partition-sizes`: graceful-slowdown's run reads the
partitions' sizes (kvq.throttle.slowdown.partition.sizes=true), the 0/1 policy's is unchanged."""

from __future__ import annotations

import pytest

from demo.graceful import policy_properties
from demo.slowdown import parse
from kvq.settings.config import SLOWDOWN_PARTITION_SIZES, SLOWDOWN_RETENTION_FORECAST


def test_the_flag_reads_the_partitions_sizes_in_graceful_slowdowns_run_only():
    args = parse(["--partition-sizes", "--load-step", "10", "--step-at", "10"])
    graceful = policy_properties("graceful-slowdown", None, args.partition_sizes)
    assert f"{SLOWDOWN_PARTITION_SIZES}=true\n" in graceful
    assert SLOWDOWN_PARTITION_SIZES not in policy_properties("stop-on-violation", None, True)
    assert SLOWDOWN_PARTITION_SIZES not in policy_properties("graceful-slowdown")
    assert not parse([]).partition_sizes


def test_the_forecast_flag_reads_kafkas_retention_forecast_with_the_sizes(capsys):
    args = parse(["--partition-sizes", "--retention-forecast", "--principals", "40"])
    graceful = policy_properties(
        "graceful-slowdown", None, args.partition_sizes, retention_forecast=args.retention_forecast
    )
    assert f"{SLOWDOWN_RETENTION_FORECAST}=true\n" in graceful
    assert SLOWDOWN_RETENTION_FORECAST not in policy_properties("graceful-slowdown", None, True)
    with pytest.raises(SystemExit):
        parse(["--retention-forecast"])
    assert "--retention-forecast: the forecast is read with --partition-sizes only" in (
        capsys.readouterr().err
    )
