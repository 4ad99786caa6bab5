"""Write sample rows as ONE OpenMetrics file promtool accepts, sorted by Spark, not by the driver.

Rows are partitioned by family (a family never spans two part files) and sorted within each part
by (family, header/sample, series labels, time); the driver concatenates the part files and
appends `# EOF`. So families are never interleaved, each series is contiguous and in time order
(promtool silently drops out-of-order samples), and timestamps are whole seconds (promtool reads
milliseconds as seconds). No global sort: no sampling pass over the whole computation.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from kvq.contract.metric_families import MetricFamily
from spark.openmetrics_text import EOF_LINE, MAX_EXACT_INTEGER, header_lines

HEADER = T.StructType(
    [
        T.StructField("family", T.IntegerType()),
        T.StructField("part", T.IntegerType()),
        T.StructField("text", T.StringType()),
    ]
)


def _value_text(value):
    whole = (value == F.floor(value)) & (F.abs(value) < F.lit(float(MAX_EXACT_INTEGER)))
    return F.when(whole, value.cast("long").cast("string")).otherwise(value.cast("string"))


def write_openmetrics(
    spark: SparkSession,
    samples: DataFrame,
    catalog: list[MetricFamily],
    present: set[int],
    path: Path,
    work_dir: Path,
) -> int:
    """Write `samples` (family, name, labels, t, value) to `path`; returns the sample count.

    `present`: the catalog indexes of the families that have samples (their headers are written).
    """
    header_rows = []
    for index, family in enumerate(catalog):
        type_line, help_line = header_lines(family).splitlines()
        header_rows += [(index, 0, type_line), (index, 1, help_line)]
    headers = (
        spark.createDataFrame(header_rows, HEADER)
        .filter(F.col("family").isin(sorted(present)))
        .select(
            "family", "part", F.lit("").alias("labels"), F.lit(0).cast("long").alias("t"), "text"
        )
    )
    lines = samples.select(
        F.col("family").cast("int").alias("family"),
        F.lit(2).alias("part"),
        "labels",
        F.col("t").cast("long").alias("t"),
        F.concat(
            "name",
            "labels",
            F.lit(" "),
            _value_text(F.col("value")),
            F.lit(" "),
            F.col("t").cast("long").cast("string"),
        ).alias("text"),
    )
    ordered = (
        lines.unionByName(headers)
        .repartition(max(1, len(present)), "family")
        .sortWithinPartitions("family", "part", "labels", "t")
        .select("text")
    )
    if work_dir.exists():
        shutil.rmtree(work_dir)
    ordered.write.text(str(work_dir))
    count = 0
    with open(path, "w", encoding="utf-8") as out:
        for part in sorted(work_dir.glob("part-*")):
            with open(part, encoding="utf-8") as stream:
                for line in stream:
                    if not line.startswith("#"):
                        count += 1
                    out.write(line)
        out.write(EOF_LINE)
    shutil.rmtree(work_dir)
    return count
