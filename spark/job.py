"""The backfill job: archive -> the exporter's series on a time grid -> OpenMetrics -> blocks.

Runs locally (`kvq-backfill`, local[*]) or unchanged on a cluster through its command line:

    spark-submit --master spark://host:7077 spark/cli.py --archive DIR --config FILE --output DIR

(the archive and output dirs must then be on storage the driver and executors share; the job has
no Python UDFs, so executors need no project code).
"""

from __future__ import annotations

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


@dataclass
class BackfillResult:
    openmetrics: Path | None = None
    samples: int = 0
    grid_times: int = 0
    observations: int = 0
    bad_lines: int = 0
    blocks: list[Path] = field(default_factory=list)


def output_name(cluster: str, scenario: str | None) -> str:
    return f"{cluster}.{scenario}.om" if scenario else f"{cluster}.om"


def _read(spark, request: BackfillRequest, say: Callable[[str], None]):
    from pyspark.sql import functions as F

    from spark.archive_reader import ArchiveLines, read_archive_lines

    files = archive_files(request.archive)
    say(f"reading {len(files)} archive files under {request.archive}")
    lines = read_archive_lines(spark, files)
    records = lines.records.cache()
    lines = ArchiveLines(records)
    counts = records.groupBy("cluster", F.col("problem").isNull().alias("valid")).count().collect()
    cluster = request.config.cluster_name
    valid = sum(r["count"] for r in counts if r["valid"] and r["cluster"] == cluster)
    bad = sum(r["count"] for r in counts if not r["valid"])
    others = {r["cluster"]: r["count"] for r in counts if r["valid"] and r["cluster"] != cluster}
    say(
        f"read {sum(r['count'] for r in counts)} lines: {valid} observations of cluster "
        f"{cluster!r}, {bad} bad lines" + (f", other clusters skipped: {others}" if others else "")
    )
    if bad:
        shown = lines.bad.orderBy("file", "line").limit(MAX_BAD_LINES_SHOWN).collect()
        for row in shown:
            say(f"bad line {row['file']}:{row['line']}: {row['problem']}")
        if bad > len(shown):
            say(f"... and {bad - len(shown)} more bad lines")
        if request.max_bad_lines is not None and bad > request.max_bad_lines:
            raise BackfillError(
                f"{bad} bad archive lines, more than --max-bad-lines {request.max_bad_lines}"
            )
    if valid == 0:
        held = ", ".join(f"{k!r} ({v})" for k, v in sorted(others.items())) or "none"
        raise BackfillError(
            f"no valid observations of cluster {cluster!r} (kvq.cluster.name) in the archive; "
            f"clusters found: {held}"
        )
    return lines, bad


def run(request: BackfillRequest, say: Callable[[str], None]) -> BackfillResult:
    """Run the backfill; raises BackfillError for problems the user must fix."""
    from pyspark.sql import functions as F

    from spark.factor_history import (
        FallbackRules,
        grid_states,
        number_observations,
        success_states,
        volume_states,
    )
    from spark.metric_rows import sample_rows
    from spark.openmetrics_writer import write_openmetrics
    from spark.session import spark_session
    from spark.volume_history import volume_history

    config = request.config
    result = BackfillResult()
    say("starting Spark" + (f" (master {request.master})" if request.master else ""))
    spark = spark_session(request.master)
    lines, result.bad_lines = _read(spark, request, say)
    numbered = number_observations(lines.observations(config.cluster_name)).cache()
    stats = numbered.agg(
        F.min("time").alias("first"),
        F.max("time").alias("last"),
        F.count("*").alias("n"),
        F.max("sseq").alias("successes"),
        F.min(F.when(F.col("ok"), F.col("time"))).alias("first_success"),
    ).first()
    result.observations = stats["n"]
    say(
        f"{stats['n']} observations ({stats['successes']} successful) from {stats['first']} to "
        f"{stats['last']}"
    )
    grid = _grid(request, stats["first"], stats["last"], say)
    if grid is None:
        return result
    result.grid_times = len(grid)
    check_timestamp(grid.time(grid.first))
    check_timestamp(grid.time(grid.last))
    say(f"evaluating {result.grid_times} grid times, every {grid.step}s")
    rules = FallbackRules(
        config.validity.total_seconds(),
        config.fallback_factor,
        stats["first"],
        checking=config.check_interval.total_seconds() > 0,
    )
    successes = numbered.filter("ok").select("cluster", "sseq", "time", "log_dirs")
    volumes = volume_history(
        successes,
        config.limit,
        rules.validity,
        config.violation_hold.total_seconds(),
        stats["successes"] or 0,
    )
    volumes.merged.persist()  # read twice: per-success counts and the per-volume series
    states = success_states(successes, volumes, rules)
    labels = {"cluster": config.cluster_name}
    if request.scenario:
        labels["scenario"] = request.scenario
    families = list(backfilled(config.limit))
    present = _present_families(families, stats["first_success"], grid)
    samples = sample_rows(
        grid_states(numbered, states, rules, grid),
        volume_states(successes, volumes, grid),
        families,
        config.limit,
        config.check_interval.total_seconds(),
        labels,
    )
    request.output.mkdir(parents=True, exist_ok=True)
    path = request.output / output_name(config.cluster_name, request.scenario)
    say(f"writing OpenMetrics to {path}")
    result.samples = write_openmetrics(
        spark, samples, families, present, path, request.output / (".spark-" + path.name)
    )
    result.openmetrics = path
    say(f"wrote {result.samples} samples to {path}")
    numbered.unpersist()
    volumes.merged.unpersist()
    lines.records.unpersist()
    if request.blocks:
        result.blocks = _blocks(path, request.output / "blocks", say)
    return result


def _present_families(families, first_success: float | None, grid: EvaluationGrid) -> set[int]:
    """Every family has samples, except the last-success timestamp before any success."""
    from kvq.contract.metric_families import NAMESPACE

    no_success = first_success is None or first_success > grid.time(grid.last_emitted())
    last_success = f"{NAMESPACE}_last_successful_poll_timestamp_seconds"
    return {i for i, f in enumerate(families) if not (no_success and f.name == last_success)}


def _grid(request: BackfillRequest, first: float, last: float, say) -> EvaluationGrid | None:
    from spark.evaluation_grid import EmptyGrid

    try:
        grid = EvaluationGrid.over(first, last, request.step, request.start, request.end)
    except EmptyGrid as exc:
        raise BackfillError(str(exc)) from None
    if request.prometheus_url:
        from spark.prometheus_gaps import PrometheusError, missing_ranges

        labels = {"cluster": request.config.cluster_name, "scenario": request.scenario or ""}
        try:
            ranges = missing_ranges(request.prometheus_url, grid, labels)
        except PrometheusError as exc:
            raise BackfillError(str(exc)) from None
        if not ranges:
            say(f"{request.prometheus_url} already holds every grid time: nothing to backfill")
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
