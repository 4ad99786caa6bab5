"""The backfill job: archive -> the exporter's series on a time grid -> OpenMetrics -> blocks.

Runs locally (`kvq-backfill`, local[*]) or unchanged on a cluster through its command line:

    spark-submit --master spark://host:7077 spark/cli.py --archive DIR --config FILE --output DIR

(the archive and output dirs must then be on storage the driver and executors share; the job has
no Python UDFs, so executors need no project code).
"""

from __future__ import annotations

import contextlib
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kvq.contract.metric_families import backfilled
from kvq.settings.config import Config
from spark.archive_files import archive_files
from spark.evaluation_grid import EvaluationGrid
from spark.openmetrics_text import check_timestamp

MAX_BAD_LINES_SHOWN = 20
ROWS_PER_SHUFFLE_PARTITION = 250_000
"""Log-dir rows per shuffle partition (each one sorts its volumes' rows for the window)."""
BROADCAST_SUCCESSES = 2_000_000
"""Up to this many successful polls the success table is broadcast to the log-dir rows."""


class BackfillError(RuntimeError):
    """A problem the user must fix (bad archive, empty range, promtool refused, ...)."""


@dataclass(frozen=True)
class BackfillRequest:
    archive: Path
    config: Config
    output: Path
    step: int
    start: float | None = None
    end: float | None = None
    scenario: str | None = None
    blocks: bool = False
    master: str | None = None
    prometheus_url: str | None = None
    max_bad_lines: int | None = None
    """None: bad lines are reported, never fatal; N: fail when more than N."""
    clusters: tuple[str, ...] | None = None
    """The clusters to backfill; None: every cluster the archive holds valid observations of."""


@dataclass(frozen=True)
class ClusterOutput:
    cluster: str
    openmetrics: Path
    samples: int
    grid_times: int
    observations: int


@dataclass
class BackfillResult:
    outputs: list[ClusterOutput] = field(default_factory=list)
    bad_lines: int = 0
    blocks: list[Path] = field(default_factory=list)

    @property
    def openmetrics(self) -> Path | None:
        """The OpenMetrics file written (the first one when several clusters were backfilled)."""
        return self.outputs[0].openmetrics if self.outputs else None

    @property
    def samples(self) -> int:
        return sum(o.samples for o in self.outputs)

    @property
    def grid_times(self) -> int:
        return sum(o.grid_times for o in self.outputs)


@dataclass(frozen=True)
class ClusterStats:
    observations: int
    successes: int
    log_dirs: int
    first: float
    last: float
    first_success: float | None


def output_name(cluster: str, scenario: str | None) -> str:
    return f"{cluster}.{scenario}.om" if scenario else f"{cluster}.om"


def _stats(rows) -> tuple[dict[str, ClusterStats], int]:
    """One pass over the cached archive: per-cluster facts of the valid lines, bad line count."""
    from pyspark.sql import functions as F

    is_line = F.col("pos").isNull() | (F.col("pos") == 0)
    found = (
        rows.groupBy("cluster", F.col("problem").isNull().alias("valid"))
        .agg(
            F.sum(is_line.cast("long")).alias("lines"),
            F.sum(F.col("pos").isNotNull().cast("long")).alias("log_dirs"),
            F.sum((is_line & F.col("ok")).cast("long")).alias("successes"),
            F.min("time").alias("first"),
            F.max("time").alias("last"),
            F.min(F.when(F.col("ok"), F.col("time"))).alias("first_success"),
        )
        .collect()
    )
    clusters = {
        r["cluster"]: ClusterStats(
            r["lines"], r["successes"], r["log_dirs"], r["first"], r["last"], r["first_success"]
        )
        for r in found
        if r["valid"]
    }
    return clusters, sum(r["lines"] for r in found if not r["valid"])


def _report_bad_lines(archive, bad: int, request: BackfillRequest, say) -> None:
    if not bad:
        return
    shown = archive.bad.orderBy("file", "line").limit(MAX_BAD_LINES_SHOWN).collect()
    for row in shown:
        say(f"bad line {row['file']}:{row['line']}: {row['problem']}")
    if bad > len(shown):
        say(f"... and {bad - len(shown)} more bad lines")
    if request.max_bad_lines is not None and bad > request.max_bad_lines:
        raise BackfillError(
            f"{bad} bad archive lines, more than --max-bad-lines {request.max_bad_lines}"
        )


def _chosen_clusters(request: BackfillRequest, found: dict[str, ClusterStats]) -> list[str]:
    held = ", ".join(f"{k!r} ({v.observations})" for k, v in sorted(found.items())) or "none"
    if request.clusters is None:
        if not found:
            raise BackfillError("no valid observations in the archive")
        return sorted(found)
    missing = [c for c in request.clusters if c not in found]
    if missing:
        raise BackfillError(
            f"no valid observations of cluster {missing[0]!r} (kvq.cluster.name or "
            f"--cluster-name) in the archive; clusters found: {held}"
        )
    return list(request.clusters)


def _tune_shuffle(spark, log_dir_rows: int) -> None:
    """Shuffle partitions for the input size, unless the user set them (spark-submit --conf)."""
    if spark.sparkContext.getConf().contains("spark.sql.shuffle.partitions"):
        return
    cores = spark.sparkContext.defaultParallelism
    wanted = -(-log_dir_rows // ROWS_PER_SHUFFLE_PARTITION)
    spark.conf.set("spark.sql.shuffle.partitions", str(max(2 * cores, min(wanted, 4000))))


def run(request: BackfillRequest, say: Callable[[str], None]) -> BackfillResult:
    """Run the backfill; raises BackfillError for problems the user must fix."""
    from pyspark import StorageLevel

    from spark.archive_reader import ArchiveRows, read_archive
    from spark.session import spark_session

    result = BackfillResult()
    say("starting Spark" + (f" (master {request.master})" if request.master else ""))
    spark = spark_session(request.master)
    files = archive_files(request.archive)
    say(f"reading {len(files)} archive files under {request.archive}")
    archive = ArchiveRows(read_archive(spark, files).rows.persist(StorageLevel.MEMORY_AND_DISK))
    cached = [archive.rows]
    stages = getattr(say, "stages", None)  # a Progress: Spark stage progress on a terminal
    tracking = stages(spark.sparkContext) if stages else contextlib.nullcontext()
    try:
        with tracking:
            _backfill(spark, archive, request, result, cached, say)
    finally:
        for frame in cached:
            frame.unpersist()
    if request.blocks:
        for output in result.outputs:
            result.blocks += _blocks(output.openmetrics, request.output / "blocks", say)
    return result


def _backfill(
    spark, archive, request: BackfillRequest, result: BackfillResult, cached, say
) -> None:
    """The Spark part of `run`: facts of the archive, then one write job for every cluster."""
    from spark.openmetrics_writer import concatenate, write_parts

    found, result.bad_lines = _stats(archive.rows)
    lines = sum(s.observations for s in found.values()) + result.bad_lines
    clusters = _chosen_clusters(request, found)
    others = {k: v.observations for k, v in found.items() if k not in clusters}
    say(
        f"read {lines} lines: "
        + ", ".join(f"{found[c].observations} observations of cluster {c!r}" for c in clusters)
        + f", {result.bad_lines} bad lines"
        + (f", other clusters skipped: {others}" if others else "")
    )
    _report_bad_lines(archive, result.bad_lines, request, say)
    _tune_shuffle(spark, sum(found[c].log_dirs for c in clusters))
    plans = []
    for index, cluster in enumerate(clusters):
        plan = _cluster_plan(archive, request, cluster, index, found[cluster], cached, say)
        if plan is not None:
            plans.append(plan)
    if not plans:
        return
    request.output.mkdir(parents=True, exist_ok=True)
    work_dir = request.output / ".spark-parts"
    families = list(backfilled(request.config.limit))
    union = plans[0][2]
    for _, _, more in plans[1:]:
        union = union.unionByName(more)
    say("computing and writing the series")
    write_parts(spark, union, len(families) * len(plans) + 8, work_dir)
    for cluster, grid, _ in plans:
        path = request.output / output_name(cluster, request.scenario)
        samples = concatenate(work_dir, clusters.index(cluster), families, path)
        result.outputs.append(
            ClusterOutput(cluster, path, samples, len(grid), found[cluster].observations)
        )
        say(f"wrote {samples} samples at {len(grid)} times to {path}")
    shutil.rmtree(work_dir)


def _cluster_plan(
    archive, request: BackfillRequest, cluster: str, index: int, stats, cached: list, say
):
    """(cluster, grid, lines) for one cluster, or None when Prometheus holds every grid time.

    Appends the DataFrames it caches to `cached` (the caller unpersists them)."""
    from pyspark.sql import functions as F

    from spark.metric_rows import global_lines, volume_lines
    from spark.observation_history import (
        FallbackRules,
        grid_states,
        number_observations,
        success_states,
        success_table,
    )
    from spark.volume_history import described_log_dirs, per_success, volume_runs

    config = request.config
    say(
        f"cluster {cluster!r}: {stats.observations} observations ({stats.successes} successful, "
        f"{stats.log_dirs} log-dir rows) from {stats.first} to {stats.last}"
    )
    grid = _grid(request, cluster, stats.first, stats.last, say)
    if grid is None:
        return None
    check_timestamp(grid.time(grid.first))
    check_timestamp(grid.time(grid.last))
    say(f"cluster {cluster!r}: evaluating {len(grid)} grid times, every {grid.step}s")
    rules = FallbackRules(
        config.validity.total_seconds(),
        config.fallback_factor,
        stats.first,
        checking=config.check_interval.total_seconds() > 0,
        hold=config.violation_hold.total_seconds(),
    )
    # Each of these is read by two or more branches of the one write job: cached, each is
    # computed once (small: one row per poll; the runs: one row per log-dir row).
    numbered = number_observations(archive.observations(cluster)).cache()
    successes = success_table(numbered, rules, grid.step).cache()
    described = described_log_dirs(
        archive.log_dirs(cluster), successes, config.limit, stats.successes <= BROADCAST_SUCCESSES
    ).cache()
    cached.extend((numbered, successes, described))
    runs = volume_runs(described, rules.validity, rules.hold)
    states = success_states(successes, per_success(runs), rules)
    labels = {"cluster": cluster}
    if request.scenario:
        labels["scenario"] = request.scenario
    families = list(backfilled(config.limit))
    check_interval = config.check_interval.total_seconds()
    lines = global_lines(
        grid_states(numbered, states, rules, grid), families, config.limit, check_interval, labels
    ).unionByName(volume_lines(runs, grid, families, labels))
    return cluster, grid, lines.withColumn("cluster_index", F.lit(index))


def _grid(
    request: BackfillRequest, cluster: str, first: float, last: float, say
) -> EvaluationGrid | None:
    from spark.evaluation_grid import EmptyGrid

    try:
        grid = EvaluationGrid.over(first, last, request.step, request.start, request.end)
    except EmptyGrid as exc:
        raise BackfillError(f"cluster {cluster!r}: {exc}") from None
    if request.prometheus_url:
        from spark.prometheus_gaps import PrometheusError, missing_ranges

        labels = {"cluster": cluster, "scenario": request.scenario or ""}
        try:
            ranges = missing_ranges(request.prometheus_url, grid, labels)
        except PrometheusError as exc:
            raise BackfillError(str(exc)) from None
        if not ranges:
            say(f"{request.prometheus_url} already holds every grid time of {cluster!r}")
            return None
        grid = grid.only(ranges)
        say(
            f"backfilling {len(ranges)} gap(s) Prometheus has no data for: "
            + ", ".join(f"{grid.time(a)}..{grid.time(b)}" for a, b in ranges[:10])
        )
    return grid


def _blocks(path: Path, blocks_dir: Path, say) -> list[Path]:
    from spark.promtool_blocks import PromtoolError, create_blocks, how_to_load

    say(f"building TSDB blocks with promtool into {blocks_dir}")
    try:
        blocks = create_blocks(path, blocks_dir)
    except PromtoolError as exc:
        raise BackfillError(str(exc)) from None
    say(f"promtool created {len(blocks)} block(s)")
    print(how_to_load(blocks_dir), file=sys.stdout)
    return blocks
