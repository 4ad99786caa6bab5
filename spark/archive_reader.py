"""Read archive files with Spark: one row per line, with file and line number, parsed and checked.

Each file is read whole (`wholetext`, gzip or not) and split into lines, so every bad line is
reported with its exact file and line number. The checks mirror
`kvq.contract.archive_record.from_line` for everything the exporter writes; a line is valid, bad
(with a reason), or blank (skipped).
"""

from __future__ import annotations

import functools
import operator
import re
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import Column, DataFrame, Observation, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from kvq.contract.archive_record import FAILURE, SCHEMA_VERSION, SUCCESS
from kvq.model.limits import Limit
from kvq.model.observation import STAGE_DESCRIBE_CLUSTER, STAGES
from kvq.model.retention_forecast import AHEAD_SECONDS
from kvq.model.volume import (
    NO_ERROR,
    UNUSABLE_ERROR,
    UNUSABLE_UNKNOWN_SIZE,
    has_error,
    lacks_size,
)
from spark.hadoop_paths import hadoop_read_path

CORRUPT = "_corrupt"
BROKERS = "brokers"
"""The observed metric of `ArchiveRows.lines`: (cluster, broker ids) of the successes."""
LOG_DIR = T.StructType(
    [
        T.StructField("broker_id", T.LongType()),
        T.StructField("path", T.StringType()),
        T.StructField("total_bytes", T.LongType()),
        T.StructField("usable_bytes", T.LongType()),
        T.StructField("error_code", T.LongType()),
        T.StructField("grown_bytes", T.LongType()),
        T.StructField("retention_freed_bytes", T.MapType(T.StringType(), T.LongType())),
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
    """The parsed archive: one row per non-blank line (file, line, cluster, problem: null when
    valid, and the record `r`), read by the driver's pass (`lines`) and the per-volume one
    (`log_dirs`)."""

    records: DataFrame

    def lines(self, limit: Limit, brokers: Observation) -> DataFrame:
        """One small row per line, for the driver: file, line, cluster, problem, time, ok, stage,
        brokers, and for a success its log dirs counted: `log_dirs`, `observed` (usable),
        `violating` (usable and over `limit`), `unusable_error`, `unusable_unknown_size`.

        As an action reads them, `brokers` observes the brokers the successes describe log dirs
        of (`described_brokers`)."""
        r = F.col("r")
        valid = F.col("problem").isNull()
        ok = valid & (r.outcome == SUCCESS)
        dirs = F.coalesce(r.log_dirs, F.array().cast(T.ArrayType(LOG_DIR)))

        def counted(name: str, test) -> Column:
            return F.when(ok, F.size(F.filter(dirs, test))).otherwise(0).alias(name)

        def reason(d: Column) -> Column:
            return unusable_reason(d.error_code, d.total_bytes, d.usable_bytes)

        def violating(d: Column) -> Column:
            ratio = available_ratio(d.usable_bytes, d.total_bytes)
            return reason(d).isNull() & limit.is_violated(d.usable_bytes, ratio)

        # Each success's broker ids, distinct and sorted: the set of them stays as small as the
        # fleet's changes (a broker added, stopped), its rows' share of the work.
        ids = F.array_sort(F.array_distinct(dirs.broker_id))
        described = F.when(ok & (F.size(dirs) > 0), F.struct(F.col("cluster"), ids.alias("ids")))
        return self.records.observe(brokers, F.collect_set(described).alias(BROKERS)).select(
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
            F.when(ok, F.size(dirs)).otherwise(0).alias("log_dirs"),
            counted("observed", lambda d: reason(d).isNull()),
            counted("violating", violating),
            counted("unusable_error", lambda d: reason(d) == UNUSABLE_ERROR),
            counted("unusable_unknown_size", lambda d: reason(d) == UNUSABLE_UNKNOWN_SIZE),
        )

    def log_dirs(self, successes: DataFrame, broadcast: bool = True) -> DataFrame:
        """One row per log dir described by a success of `successes` (cluster, file, line and
        its facts), with that success's columns and broker_id, log_dir, total_bytes,
        available_bytes, error_code, grown_bytes (null where the line has none) and
        retention_freed (`retention_freed`: null unless the line has all of it). Joined per
        line, before the log dirs are exploded: a join
        of small rows (broadcast unless `broadcast` is False, for millions of polls)."""
        r = F.col("r")
        lines = self.records.filter(F.col("problem").isNull() & (r.outcome == SUCCESS))
        joined = lines.join(
            F.broadcast(successes) if broadcast else successes, ["cluster", "file", "line"]
        )
        d = F.col("d")
        # The line's own columns dropped by name (a list of the success's would be its schema,
        # which a Spark Connect session asks its server for).
        exploded = joined.select("*", F.explode(r.log_dirs).alias("d"))
        return (
            exploded.drop("file", "line", "r", "problem")
            .select(
                "*",
                d.broker_id.alias("broker_id"),
                d.path.alias("log_dir"),
                d.total_bytes.alias("total_bytes"),
                d.usable_bytes.alias("available_bytes"),
                d.error_code.alias("error_code"),
                d.grown_bytes.alias("grown_bytes"),
                retention_freed(d.retention_freed_bytes).alias("retention_freed"),
            )
            .drop("d")
        )


def retention_freed(forecast: Column) -> Column:
    """A log dir's `retention_freed_bytes` as the bytes freed by each of `AHEAD_SECONDS` in
    order (`kvq.contract.archive_record`: null unless it has every one of them)."""
    freed = [forecast[str(ahead)] for ahead in AHEAD_SECONDS]
    complete = functools.reduce(operator.and_, (by_then.isNotNull() for by_then in freed))
    return F.when(complete, F.array(*freed))


def described_brokers(brokers: Observation) -> dict[str, list[int]]:
    """The sorted ids of the brokers whose log dirs the successes of each cluster describe, from
    the observation of `ArchiveRows.lines` (after the action that read them)."""
    found: dict[str, set[int]] = {}
    for success in brokers.get[BROKERS]:
        found.setdefault(success["cluster"], set()).update(success["ids"])
    return {cluster: sorted(ids) for cluster, ids in found.items()}


def available_ratio(available_bytes: Column, total_bytes: Column) -> Column:
    """`Volume.available_ratio` on Columns: available / total, 0.0 for a volume of 0 bytes."""
    return F.when(total_bytes == 0, F.lit(0.0)).otherwise(available_bytes / total_bytes)


def unusable_reason(error_code: Column, total_bytes: Column, available_bytes: Column) -> Column:
    """The model's own rule (`has_error`, `lacks_size`) on Columns; null for a volume."""
    code = F.coalesce(error_code, F.lit(NO_ERROR))
    return F.when(has_error(code), F.lit(UNUSABLE_ERROR)).when(
        lacks_size(total_bytes, available_bytes), F.lit(UNUSABLE_UNKNOWN_SIZE)
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


def java_strings(spark: SparkSession, strings: list[str], separator: str):
    """`strings` as a Scala Seq of the JVM's, sent as one string cut there at `separator` (a
    character none of them holds): PySpark sends a list one element per round trip to the JVM."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    array = jvm.java.util.regex.Pattern.compile(re.escape(separator)).split(separator.join(strings))
    return jvm.scala.collection.immutable.ArraySeq.unsafeWrapArray(array)


def local_json_table(spark: SparkSession, rows: list[str], schema: str) -> DataFrame:
    """JSON objects (one a line, none empty) as a table of `schema` held by the driver's JVM:
    sent in one call, parsed there once while the query is planned (the projection of a local
    table is folded into a local table), read by no task. `createDataFrame` of Python rows
    starts Python workers to convert them (a second on every run), a file takes a job to read."""
    from spark.session import is_remote

    if is_remote(spark):
        return _json_table(_arrow_texts(spark, rows), schema)
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    texts = spark._jsparkSession.createDataset(
        java_strings(spark, rows, "\n"), jvm.org.apache.spark.sql.Encoders.STRING()
    )
    # No rows arrive as one empty text.
    return _json_table(DataFrame(texts.toDF(), spark).where(F.col("value") != ""), schema)


def _json_table(texts: DataFrame, schema: str) -> DataFrame:
    return texts.select(F.from_json("value", schema).alias("row")).select("row.*")


def _arrow_texts(spark: SparkSession, rows: list[str]) -> DataFrame:
    """`rows` as a one-column table sent to a Spark Connect server in Arrow (a local relation of
    the plan): one column of strings converts at once, where Python rows go one by one."""
    import pyarrow

    return spark.createDataFrame(pyarrow.table({"value": pyarrow.array(rows, pyarrow.string())}))


def _whole_texts(spark: SparkSession, paths: list[str]) -> DataFrame:
    """`spark.read.text(paths, wholetext=True)`, the paths sent to the JVM as one string (720
    round trips for a month of hourly files)."""
    from spark.session import is_remote

    if is_remote(spark):  # its reader takes the paths in one message; wholetext as an argument
        return spark.read.text(paths, wholetext=True)  # (an option is overridden by text's own)
    reader = spark.read.option("wholetext", True)
    # NUL: the one character no path holds.
    return reader._df(reader._jreader.text(java_strings(spark, paths, "\x00")))


def read_archive(spark: SparkSession, files: list[Path]) -> ArchiveRows:
    """Every non-blank line of `files`, parsed, with file (plain path) and line number (from 1)."""
    # The driver listed the files already: no parallel listing job over them again.
    spark.conf.set("spark.sql.sources.parallelPartitionDiscovery.threshold", str(len(files) + 1))
    whole = _whole_texts(spark, [hadoop_read_path(p) for p in files])
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
    return ArchiveRows(
        parsed.select(
            "file",
            "line",
            "r",
            F.coalesce(F.col("r.cluster"), F.lit("")).alias("cluster"),
            _problem(F.col("r")).alias("problem"),
        )
    )
