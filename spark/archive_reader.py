"""Read archive files with Spark: one row per line, with file and line number, parsed and checked.

Each file is read whole (`wholetext`, gzip or not) and split into lines, so every bad line is
reported with its exact file and line number. The checks mirror
`kvq.contract.archive_record.from_line` for everything the exporter writes; a line is valid, bad
(with a reason), or blank (skipped).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from kvq.contract.archive_record import FAILURE, SCHEMA_VERSION, SUCCESS
from kvq.model.observation import STAGE_DESCRIBE_CLUSTER, STAGES

CORRUPT = "_corrupt"
LOG_DIR = T.StructType(
    [
        T.StructField("broker_id", T.LongType()),
        T.StructField("path", T.StringType()),
        T.StructField("total_bytes", T.LongType()),
        T.StructField("usable_bytes", T.LongType()),
        T.StructField("error_code", T.LongType()),
    ]
)
RECORD = T.StructType(
    [
        T.StructField("schema", T.LongType()),
        T.StructField("cluster", T.StringType()),
        T.StructField("time", T.DoubleType()),
        T.StructField("outcome", T.StringType()),
        T.StructField("failure_stage", T.StringType()),
        T.StructField("active_brokers", T.ArrayType(T.LongType())),
        T.StructField("log_dirs", T.ArrayType(LOG_DIR)),
        T.StructField(CORRUPT, T.StringType()),
    ]
)


@dataclass(frozen=True)
class ArchiveRows:
    """The archive as one flat table, read once and cached: one row per line, or per (line, log
    dir) of a successful observation. Columns: file, line, cluster, problem (null when valid), time,
    ok, stage, brokers, pos (the log dir's position, null for a line without any), broker_id,
    log_dir, total_bytes, available_bytes, error_code."""

    rows: DataFrame

    @property
    def lines(self) -> DataFrame:
        """One row per non-blank archive line."""
        return self.rows.filter(F.col("pos").isNull() | (F.col("pos") == 0))

    @property
    def bad(self) -> DataFrame:
        return self.lines.filter(F.col("problem").isNotNull())

    def observations(self, cluster: str) -> DataFrame:
        """One small row per valid observation of `cluster` (no log dirs)."""
        return self.lines.filter(F.col("problem").isNull() & (F.col("cluster") == cluster)).select(
            "cluster", "time", "file", "line", "ok", "stage", "brokers"
        )

    def log_dirs(self, cluster: str) -> DataFrame:
        """One row per log dir described by a successful observation of `cluster`."""
        return self.rows.filter(
            F.col("problem").isNull() & (F.col("cluster") == cluster) & F.col("pos").isNotNull()
        ).select(
            "cluster",
            "file",
            "line",
            "broker_id",
            "log_dir",
            "total_bytes",
            "available_bytes",
            "error_code",
        )


def _flat(records: DataFrame) -> DataFrame:
    r = F.col("r")
    valid = F.col("problem").isNull()
    ok = valid & (r.outcome == SUCCESS)
    exploded = records.select(
        "file",
        "line",
        "cluster",
        "problem",
        r.time.alias("time"),
        ok.alias("ok"),
        F.when(valid & ~ok, r.failure_stage).alias("stage"),
        F.when(
            ok | (r.failure_stage != STAGE_DESCRIBE_CLUSTER),
            F.size(F.coalesce(r.active_brokers, F.array().cast("array<bigint>"))),
        ).alias("brokers"),
        F.posexplode_outer(F.when(ok, r.log_dirs)).alias("pos", "d"),
    )
    d = F.col("d")
    return exploded.select(
        "file",
        "line",
        "cluster",
        "problem",
        "time",
        "ok",
        "stage",
        "brokers",
        "pos",
        d.broker_id.alias("broker_id"),
        d.path.alias("log_dir"),
        d.total_bytes.alias("total_bytes"),
        d.usable_bytes.alias("available_bytes"),
        d.error_code.alias("error_code"),
    )


def _problem(r: Column) -> Column:
    """Why a parsed line is not a valid record (null when it is)."""
    stages = ", ".join(STAGES)
    missing_dir_field = F.exists(
        F.coalesce(r.log_dirs, F.array().cast(T.ArrayType(LOG_DIR))),
        lambda d: (
            d.broker_id.isNull()
            | d.path.isNull()
            | d.total_bytes.isNull()
            | d.usable_bytes.isNull()
        ),
    )
    null_broker = F.exists(
        F.coalesce(r.active_brokers, F.array().cast("array<bigint>")), lambda b: b.isNull()
    )
    return (
        F.when(r.isNull() | r[CORRUPT].isNotNull(), F.lit("not JSON, or a field of the wrong type"))
        .when(
            r.schema.isNull() | (r.schema != SCHEMA_VERSION),
            F.concat(
                F.lit(f"schema must be {SCHEMA_VERSION}, got "),
                F.coalesce(r.schema.cast("string"), F.lit("none")),
            ),
        )
        .when(
            r.outcome.isNull() | ~r.outcome.isin(SUCCESS, FAILURE),
            F.lit(f"outcome must be {SUCCESS} or {FAILURE}"),
        )
        .when(r.time.isNull(), F.lit("time is missing"))
        .when(
            (r.outcome == FAILURE) & (r.failure_stage.isNull() | ~r.failure_stage.isin(*STAGES)),
            F.lit(f"a failure record needs a failure_stage ({stages})"),
        )
        .when(missing_dir_field, F.lit("a log_dirs entry lacks broker_id, path or byte counts"))
        .when(null_broker, F.lit("active_brokers holds a null"))
    )


def _plain_path(uri: Column) -> Column:
    """`file:/a%20b+c` -> `/a b+c`: the path as the replay and the user know it."""
    encoded = F.regexp_replace(F.regexp_replace(uri, "^file:(//)?", ""), r"\+", "%2B")
    return F.url_decode(encoded)


def read_archive(spark: SparkSession, files: list[Path]) -> ArchiveRows:
    """Every non-blank line of `files`, parsed, with file (plain path) and line number (from 1)."""
    # The driver listed the files already: no parallel listing job over them again.
    spark.conf.set("spark.sql.sources.parallelPartitionDiscovery.threshold", str(len(files) + 1))
    whole = spark.read.text([f"file://{p}" for p in files], wholetext=True)
    lines = whole.select(
        _plain_path(F.col("_metadata.file_path")).alias("file"),
        F.posexplode(F.split(F.col("value"), "\n")).alias("pos", "text"),
    ).select("file", (F.col("pos") + 1).alias("line"), F.rtrim(F.col("text")).alias("text"))
    lines = lines.filter(F.trim(F.col("text")) != "")
    parsed = lines.select(
        "file",
        "line",
        F.from_json(
            "text", RECORD, {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT}
        ).alias("r"),
    )
    records = parsed.select(
        "file",
        "line",
        "r",
        F.coalesce(F.col("r.cluster"), F.lit("")).alias("cluster"),
        _problem(F.col("r")).alias("problem"),
    )
    return ArchiveRows(_flat(records))
