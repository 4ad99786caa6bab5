"""The OpenMetrics text rules promtool depends on, shared by both writers (Python and Spark)."""

from __future__ import annotations

import subprocess

import pytest

from kvq.contract.metric_families import backfilled
from kvq.model.limits import MinAvailableRatio
from spark.openmetrics_text import (
    Sample,
    TimestampError,
    check_timestamp,
    escape_label_value,
    format_value,
    label_text,
    read_openmetrics,
    write_openmetrics,
)

NS = "kafka_volume_quota_"


def test_millisecond_timestamps_are_refused():
    assert check_timestamp(1_763_596_800) == 1_763_596_800
    with pytest.raises(TimestampError, match="millisecond"):
        check_timestamp(1_763_596_800_000)
    with pytest.raises(TimestampError):
        check_timestamp(1_763_596_800.5)


def test_label_values_are_escaped_and_sorted():
    text = label_text({"log_dir": 'a\\b"c\nd', "broker_id": "1"})
    assert text == '{broker_id="1",log_dir="a\\\\b\\"c\\nd"}'


def test_values_round_trip():
    assert format_value(3.0) == "3" and format_value(0.5) == "0.5"
    assert float(format_value(0.1 + 0.2)) == 0.1 + 0.2


def test_out_of_order_input_is_written_in_order_and_promtool_accepts_it(tmp_path):
    families = backfilled(MinAvailableRatio(0.05))
    labels = (("cluster", "kafka"),)
    samples = [
        Sample(NS + "limit_violated_total", labels, 1_763_596_920, 2.0),
        Sample(NS + "throttle_factor", labels, 1_763_596_920, 0.0),
        Sample(NS + "limit_violated_total", labels, 1_763_596_860, 1.0),
        Sample(NS + "throttle_factor", labels, 1_763_596_860, 1.0),
    ]
    path = tmp_path / "x.om"
    assert write_openmetrics(path, families, samples) == 4
    text = path.read_text()
    assert text.endswith("# EOF\n")
    assert text.count("# TYPE kafka_volume_quota_limit_violated counter") == 1
    assert text.index("throttle_factor{") < text.index("limit_violated_total{")
    assert read_openmetrics(path)[(NS + "limit_violated_total", '{cluster="kafka"}')] == {
        1_763_596_860: 1.0,
        1_763_596_920: 2.0,
    }
    result = subprocess.run(
        ["promtool", "tsdb", "create-blocks-from", "openmetrics", str(path), str(tmp_path / "b")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr


def test_spark_escapes_label_values_as_the_python_writer(spark):
    from pyspark.sql import functions as F

    from spark.metric_rows import _escaped

    values = ["/var/lib/kafka", "a b+c", "x\\y", 'q"uote', "new\nline", '\\"\n\\\\']
    frame = spark.createDataFrame([(v,) for v in values], "v string")
    got = [row[0] for row in frame.select(_escaped(F.col("v"))).collect()]
    assert got == [escape_label_value(v) for v in values]
