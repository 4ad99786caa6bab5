"""The backfill job: archive -> the exporter's series on a time grid -> OpenMetrics -> blocks.

Runs locally (`kvq-backfill`, local[*]) or unchanged on a cluster through its command line:

    spark-submit --master spark://host:7077 spark/cli.py --archive DIR --config FILE --output DIR

(the archive and output dirs must then be on storage the driver and executors share; the job has
no Python UDFs, so executors need no project code).
"""

from __future__ import annotations

import contextlib
import functools
import json
import re
import shutil
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote

from kvq.contract.metric_families import backfilled
from kvq.settings.config import Config
from kvq.settings.redaction import mask_url_credentials
from spark.archive_files import ArchiveError, BadLine, archive_files, damaged_files, one_line
from spark.class_archive import ClassArchive
from spark.evaluation_grid import EvaluationGrid
from spark.global_series import global_lines, timestamp_suffixes
from spark.hadoop_paths import hadoop_read_path
from spark.lz4_parts import CorruptPart, part_files, text_lines
from spark.openmetrics_text import check_timestamp
from spark.openmetrics_writer import concatenate
from spark.poll_history import (
    FallbackRules,
    GridState,
    PollHistory,
    PollLine,
    VolumeDeltas,
    impossible_time,
)
from spark.promtool_blocks import usable_cores
from spark.series_sources import EVENTS, GLOBAL
from spark.shard_blocks import BLOCK_RANGE

MAX_BAD_LINES_SHOWN = 20
ROWS_PER_SHUFFLE_PARTITION = 600_000
"""Log-dir rows per partition of the per-broker shuffle (each sorts its brokers' rows). Each of
its tasks has a fixed cost beside its rows: it writes a part file per family, and Hadoop without
its native library sets each file's and folder's permissions by starting a `chmod` process (about
35 per task). Fewer, larger tasks pay it less often (`python -m bench.backfill --sizes 10m`,
docs/results/backfill-sizes-10m.md)."""
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
    """Write TSDB blocks (OUTPUT/blocks), built by the executors, instead of OpenMetrics files."""
    block_range: int = BLOCK_RANGE
    """Seconds each block spans at most (promtool's ranges: 2h x 3^n)."""
    master: str | None = None
    remote: str | None = None
    """The `sc://` URL of a Spark Connect server to run on, instead of a driver of this process."""
    prometheus_url: str | None = None
    max_bad_lines: int | None = None
    """None: bad lines are reported, never fatal; N: fail when more than N."""
    clusters: tuple[str, ...] | None = None
    """The clusters to backfill; None: every cluster the archive holds valid observations of."""
    classes: ClassArchive | None = None
    """A new local Spark JVM starts from this class archive (or writes it); None: no archive."""


@dataclass(frozen=True)
class ClusterOutput:
    cluster: str
    openmetrics: Path
    """The OpenMetrics file, or with --blocks the blocks folder."""
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


@dataclass
class ClusterLines:
    """The valid lines of one cluster (for the driver) and what they say about it."""

    polls: list[PollLine] = field(default_factory=list)
    successes: int = 0
    log_dirs: int = 0
    first: float = float("inf")
    last: float = float("-inf")
    brokers: list[int] = field(default_factory=list)
    """The ids of the brokers its successes describe log dirs of, sorted."""

    def add(self, row) -> None:
        self.polls.append(
            PollLine(
                row["time"],
                row["file"],
                row["line"],
                row["ok"],
                row["stage"],
                row["brokers"],
                row["observed"],
                row["violating"],
                row["unusable_error"],
                row["unusable_unknown_size"],
            )
        )
        self.successes += row["ok"]
        self.log_dirs += row["log_dirs"]
        self.first = min(self.first, row["time"])
        self.last = max(self.last, row["time"])

    @property
    def observations(self) -> int:
        return len(self.polls)


def _read_lines(rows) -> tuple[dict[str, ClusterLines], list[BadLine]]:
    found: dict[str, ClusterLines] = {}
    bad: list[BadLine] = []
    for values in rows:
        # A plain dict per row: a Row looks each name up in its list of names (43k rows a month).
        row = dict(zip(values.__fields__, values, strict=True))
        if row["problem"] is not None:
            bad.append(BadLine(row["file"], row["line"], row["problem"]))
        else:
            found.setdefault(row["cluster"], ClusterLines()).add(row)
    return found, bad


def output_name(cluster: str, scenario: str | None) -> str:
    return f"{cluster}.{scenario}.om" if scenario else f"{cluster}.om"


def _report_bad_lines(bad: list[BadLine], request: BackfillRequest, say) -> None:
    shown = sorted(bad, key=lambda b: (b.file, b.line))[:MAX_BAD_LINES_SHOWN]
    for line in shown:
        say(f"bad line {line.file}:{line.line}: {line.reason}")
    if len(bad) > len(shown):
        say(f"... and {len(bad) - len(shown)} more bad lines")
    if request.max_bad_lines is not None and len(bad) > request.max_bad_lines:
        raise BackfillError(
            f"{len(bad)} bad archive lines, more than --max-bad-lines {request.max_bad_lines}"
        )


def _chosen_clusters(request: BackfillRequest, found: dict[str, ClusterLines]) -> list[str]:
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


def _partitions(spark, log_dir_rows: int) -> int:
    """Partitions of the per-broker shuffle for the input size, unless the user set them."""
    from spark.session import default_parallelism, user_setting

    chosen = user_setting(spark, "spark.sql.shuffle.partitions")
    if chosen is not None:
        return int(chosen)
    cores = default_parallelism(spark)
    wanted = -(-log_dir_rows // ROWS_PER_SHUFFLE_PARTITION)
    return max(8 * cores, min(wanted, 4000))


def _broker_ranges(spark, plans: list[_Plan], found: dict[str, ClusterLines]):
    """The partitions of the per-broker shuffle (`spark.volume_history.BrokerRanges`) over the
    brokers of every plan's cluster."""
    from spark.volume_history import BrokerRanges

    keys = [(index, b) for index, plan in enumerate(plans) for b in found[plan.cluster].brokers]
    rows = sum(found[p.cluster].log_dirs for p in plans)
    return BrokerRanges.even(keys, _partitions(spark, rows))


PARTS = ".spark-parts"
SUCCESSES = ".spark-successes"
BLOCKS = "blocks"
PENDING_BLOCKS = ".blocks.tmp"
OLD_BLOCKS = ".blocks.old"
STAGING = ".blocks-staging"


def work_folders(output: Path) -> tuple[Path, ...]:
    """The folders a run writes under `output` and removes before it ends."""
    return (
        output / PARTS,
        output / SUCCESSES,
        output / PENDING_BLOCKS,
        output / OLD_BLOCKS,
        output / STAGING,
    )


def run(request: BackfillRequest, say: Callable[[str], None]) -> BackfillResult:
    """Run the backfill; raises BackfillError for problems the user must fix.

    However it ends (an error, SIGINT or SIGTERM: `kvq.interrupts`), it leaves no work folder
    and no partial file in the output; interrupted, it stops the JVM it started first, so that no
    Spark task writes into the work folders while they are removed (or after)."""
    from spark.session import stop_local_jvm, stop_remote_work
    from spark.shard_blocks import stop_writers

    try:
        return _run(request, say)
    except KeyboardInterrupt:
        if request.remote is not None:
            stop_remote_work()
            stop_writers(request.output / STAGING)  # before the work folders are removed
        else:
            stop_local_jvm()
        raise
    finally:
        for folder in work_folders(request.output):
            shutil.rmtree(folder, ignore_errors=True)


def _run(request: BackfillRequest, say: Callable[[str], None]) -> BackfillResult:
    """`run`, but for the clean-up."""
    from pyspark import StorageLevel

    from spark.archive_reader import ArchiveRows, read_archive
    from spark.session import ConnectError, is_remote, shown_remote, spark_session

    result = BackfillResult()
    try:
        files = archive_files(request.archive)
    except ArchiveError as exc:
        raise BackfillError(str(exc)) from None
    if request.remote is not None:
        say(f"connecting to the Spark Connect server {shown_remote(request.remote)}")
    else:
        say("starting Spark" + (f" (master {request.master})" if request.master else ""))
    try:
        spark = spark_session(
            request.master,
            classes=request.classes,
            remote=request.remote,
            input_bytes=lambda: _stored_bytes(files),
        )
    except ConnectError as exc:
        raise BackfillError(str(exc)) from None
    # Read twice (the lines to the driver, the log dirs to the per-volume work): parsed once, by
    # the tasks (each .gz inflated where it is read), cached as parsed (reading the cache back is
    # several times cheaper than parsing again).
    records = read_archive(spark, files).records.persist(StorageLevel.MEMORY_AND_DISK)
    say(f"reading {len(files)} archive files under {request.archive}")
    archive = ArchiveRows(records)
    # A Progress: Spark's stage progress on a terminal (of the JVM here: a Connect server's
    # stages are its own).
    stages = None if is_remote(spark) else getattr(say, "stages", None)
    try:
        progress = stages(spark.sparkContext) if stages else contextlib.nullcontext()
        with progress, stage_fusion(spark, request.config):
            _backfill(spark, archive, request, result, say)
    except CorruptPart as exc:
        raise BackfillError(f"{exc}; the part files are rewritten by running again") from None
    except Exception as exc:  # a Spark job failed: when reading an archive file, name it
        unreadable = _unreadable_archive_file(exc)
        if unreadable is None:
            raise
        raise _damaged_archive_files(files) or unreadable from None
    finally:
        # Not while an interrupt unwinds: the call it interrupted left this thread's connection
        # to the JVM mid-answer (a call now would wait for the job, then read its answer).
        if not isinstance(sys.exc_info()[1], KeyboardInterrupt):
            archive.records.unpersist()
    return result


FUSED_FIELDS_SETTING = "spark.sql.codegen.maxFields"


@contextlib.contextmanager
def stage_fusion(spark, config: Config) -> Iterator[None]:
    """While the job runs, Spark fuses no operator wider than the policy allows into a stage's
    generated method (`spark.volume_history.fused_fields`), unless the user set that
    (spark-submit's --conf, a Connect server's settings); put back afterwards, for the session's
    next runs (a test's, a Connect server's)."""
    from spark.session import user_setting
    from spark.volume_history import fused_fields

    fields = fused_fields(config.policy)
    if fields is None or user_setting(spark, FUSED_FIELDS_SETTING) is not None:
        yield
        return
    spark.conf.set(FUSED_FIELDS_SETTING, str(fields))
    try:
        yield
    finally:
        # Not while an interrupt unwinds (as `_run`'s unpersist): the JVM is mid-answer.
        if not isinstance(sys.exc_info()[1], KeyboardInterrupt):
            spark.conf.unset(FUSED_FIELDS_SETTING)


def _stored_bytes(files: list[Path]) -> int:
    """The archive files' size as stored (what `spark.session.local_java_options` goes by)."""
    total = 0
    for path in files:
        with contextlib.suppress(OSError):  # gone since it was listed: its read will say so
            total += path.stat().st_size
    return total


READ_FAILURE = re.compile(r"Encountered error while reading file (\S+?)\.?\s")
"""Spark's error for a task that failed to read an input file, naming the file."""
JAVA_CAUSE = re.compile(r"Caused by: ([\w.$]+)(?:: (.*))?")
"""A `Caused by:` line of a Java stack trace: (exception class, message or "")."""


def _unreadable_archive_file(error: Exception) -> BackfillError | None:
    """A Spark read task's failure (a file changed after the driver's checks, or executors that
    see other permissions) as one line naming the file and the cause; None for other errors."""
    text = str(error)
    failed = READ_FAILURE.search(text)
    if failed is None:
        return None
    path = unquote(re.sub("^file:(//)?", "", failed.group(1)))
    causes = JAVA_CAUSE.findall(text, failed.end())
    reason = "see Spark's log"
    if causes:  # the last is the root cause (Hadoop's, under Spark's wrappers)
        exception, message = causes[-1]
        exception = exception.rsplit(".", 1)[-1]
        reason = f"{message} ({exception})" if message else exception
    return BackfillError(f"archive file {path} cannot be read: {reason}")


def _damaged_archive_files(files: list[Path]) -> BackfillError | None:
    """After a read task failed: every damaged .gz file of the archive named in one line, or
    None. Only then are the .gz files inflated on the driver: the tasks inflate them as they
    read them, and Hadoop's codec fails a task on any damage (truncated, not gzip, bytes after
    the last member, zero padding) naming only the first file, deep in a Java stack trace."""
    problems = damaged_files(files, usable_cores())
    if not problems:
        return None
    return BackfillError(
        one_line(
            "damaged archive file",
            problems,
            "restore each from a copy or move it out of the archive directory",
        )
    )


def _check_poll_times(cluster: str, lines: ClusterLines, now: float) -> None:
    """Refuse poll times no exporter can have written (`impossible_time`), naming the lines."""
    found = [
        (poll, why) for poll in lines.polls if (why := impossible_time(poll.time, now)) is not None
    ]
    if not found:
        return
    poll, why = min(found, key=lambda item: (item[0].file, item[0].line))
    others = len(found) - 1
    more = f"; and {others} more line{'s' * (others > 1)} of cluster {cluster!r}" if others else ""
    raise BackfillError(
        f"{poll.file}:{poll.line}: poll time {poll.time!r} {why}{more}; fix or remove the line "
        "(the exporter archives seconds since the epoch, from its clock)"
    )


@dataclass(frozen=True)
class _Plan:
    cluster: str
    grid: EvaluationGrid
    history: PollHistory


def _backfill(spark, archive, request: BackfillRequest, result: BackfillResult, say) -> None:
    """The Spark part of `run`: the lines to the driver, then one write job for every cluster."""
    from pyspark.sql import Observation

    from spark.archive_reader import described_brokers

    config = request.config
    brokers = Observation("brokers")
    found, bad = _read_lines(archive.lines(config.limit, brokers).collect())
    for cluster, ids in described_brokers(brokers).items():
        found[cluster].brokers = ids
    result.bad_lines = len(bad)
    clusters = _chosen_clusters(request, found)
    others = {k: v.observations for k, v in found.items() if k not in clusters}
    say(
        f"read {sum(v.observations for v in found.values()) + len(bad)} lines: "
        + ", ".join(f"{found[c].observations} observations of cluster {c!r}" for c in clusters)
        + f", {len(bad)} bad lines"
        + (f", other clusters skipped: {others}" if others else "")
    )
    _report_bad_lines(bad, request, say)
    plans: list[_Plan] = []
    now = time.time()
    for cluster in clusters:
        lines = found[cluster]
        _check_poll_times(cluster, lines, now)
        say(
            f"cluster {cluster!r}: {lines.observations} observations ({lines.successes} "
            f"successful, {lines.log_dirs} log-dir rows) from {lines.first} to {lines.last}"
        )
        grid = _grid(request, cluster, lines, say)
        if grid is None:
            continue
        check_timestamp(grid.time(grid.first))
        check_timestamp(grid.time(grid.last))
        say(f"cluster {cluster!r}: evaluating {len(grid)} grid times, every {grid.step}s")
        rules = FallbackRules(
            config.validity.total_seconds(),
            config.fallback_factor,
            lines.first,
            checking=config.check_interval.total_seconds() > 0,
            hold=config.violation_hold.total_seconds(),
        )
        plans.append(_Plan(cluster, grid, PollHistory(lines.polls, rules, grid.step)))
    if not plans:
        return
    request.output.mkdir(parents=True, exist_ok=True)
    work_dir = request.output / PARTS
    catalog = list(backfilled(config.limit, config.policy.gauges))
    if request.blocks:
        _backfill_blocks(spark, archive, request, result, plans, catalog, found, say)
        return
    say("computing and writing the series")
    spark_samples = _write_volume_parts(spark, archive, request, plans, catalog, work_dir, found)
    check_interval = config.check_interval.total_seconds()
    for index, plan in enumerate(plans):
        folder = work_dir / f"cluster_index={index}"
        labels = {config.cluster_label: plan.cluster}
        if request.scenario:
            labels["scenario"] = request.scenario
        states = list(plan.history.grid_states(plan.grid, read_events(folder / f"family={EVENTS}")))
        stamps = timestamp_suffixes(states)

        def driver_lines(family, states=states, labels=labels, stamps=stamps):
            if family.short not in GLOBAL:
                return None
            return global_lines(family, states, config.limit, check_interval, labels, stamps)

        path = request.output / output_name(plan.cluster, request.scenario)
        say(f"writing {path}")
        try:
            samples = spark_samples[index] + concatenate(
                work_dir, index, catalog, path, driver_lines
            )
        except OSError as exc:  # a full or failing disk: Python's own writes and reads
            raise BackfillError(f"cannot write {path}: {exc.strerror or exc}") from None
        result.outputs.append(
            ClusterOutput(
                plan.cluster, path, samples, len(plan.grid), found[plan.cluster].observations
            )
        )
        say(f"wrote {samples} samples at {len(plan.grid)} times to {path}")


def _write_volume_parts(spark, archive, request, plans, catalog, work_dir, found) -> list[int]:
    """The one Spark job over the log-dir rows: per-volume series and run events, as part files;
    returns the sample lines written per cluster (by `plans` index)."""
    from spark.metric_rows import counting_samples
    from spark.openmetrics_writer import write_parts

    lines, counted = counting_samples(
        _volume_lines(spark, archive, request, plans, catalog, found), len(plans)
    )
    try:
        write_parts(spark, lines, len(catalog) * len(plans) + 8, work_dir)
    except Exception as exc:  # Spark's, with the JVM's stack trace in its text
        cause = io_cause(str(exc))
        if cause is None or READ_FAILURE.search(str(exc)):  # an archive file's, not the parts'
            raise
        raise BackfillError(f"cannot write the part files in {work_dir}: {cause}") from None
    return [counted.get[str(index)] for index in range(len(plans))]


def _volume_lines(spark, archive, request, plans, catalog, found, shards=None):
    """The per-volume lines and the runs' events of every plan's cluster (a DataFrame:
    `spark.metric_rows.volume_lines`, cut into `shards` when given)."""
    from spark.metric_rows import volume_lines
    from spark.session import checkpointing
    from spark.volume_history import described_log_dirs, volume_runs

    config = request.config
    count = sum(found[p.cluster].successes for p in plans)
    successes = _successes_table(spark, plans, count, request.output / SUCCESSES)
    validity = config.validity.total_seconds()
    hold = config.violation_hold.total_seconds()
    described = described_log_dirs(
        archive.log_dirs(successes, broadcast=count <= BROADCAST_SUCCESSES),
        config.policy,
        _broker_ranges(spark, plans, found),
        hold_matters=hold > validity,
        offline_matters=hold > 0 and any(_has_unusable_log_dirs(plan) for plan in plans),
        cut=checkpointing(spark),
    )
    runs = volume_runs(described, validity, hold, config.policy.gauges)
    grids = [p.grid for p in plans]
    return volume_lines(runs, grids, catalog, request.scenario, config.cluster_label, shards)


def _successes_table(spark, plans: list[_Plan], count: int, folder: Path):
    """The successes of every plan (`SUCCESS_SCHEMA`, `count` of them) as a table: a local
    table of the driver's JVM (`spark.archive_reader.local_json_table`: no job reads it) when it
    is broadcast; beyond that (millions of polls), a JSON file in `folder` the tasks read."""
    from spark.archive_reader import local_json_table

    rows = success_lines(plans)
    if count <= BROADCAST_SUCCESSES:
        return local_json_table(spark, list(rows), SUCCESS_SCHEMA)
    # Under a name that is not hidden (Spark would skip it).
    table = folder / "successes.json"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with open(table, "w", encoding="utf-8") as out:
            out.writelines(f"{row}\n" for row in rows)
    except OSError as exc:
        raise BackfillError(f"cannot write {table}: {exc.strerror or exc}") from None
    return spark.read.json(hadoop_read_path(table), schema=SUCCESS_SCHEMA)


def success_lines(plans: list[_Plan]) -> Iterator[str]:
    """The rows of the successes table (`SUCCESS_SCHEMA`) as JSON objects: each success's
    fields, its cluster and plan index. Formatted here rather than by `json.dumps` of a dict a
    row, which costs several times as much: a row per poll, while no stage runs."""
    quoted = functools.cache(json.dumps)  # the cluster's name and the archive files' paths: few
    for index, plan in enumerate(plans):
        head = f'{{"cluster":{quoted(plan.cluster)},"cluster_index":{index},'
        for s in plan.history.successes():
            yield (
                f'{head}"sseq":{s.sseq},"file":{quoted(s.file)},"line":{s.line},"k":{s.k},'
                f'"expiry_sseq":{_json_int(s.expiry_sseq)},"expiry_k":{_json_int(s.expiry_k)},'
                f'"hold_sseq":{_json_int(s.hold_sseq)},"hold_k":{_json_int(s.hold_k)},'
                f'"time":{float(s.time)!r}}}'
            )


def _json_int(value: int | None) -> str:
    return "null" if value is None else str(value)


def _has_unusable_log_dirs(plan: _Plan) -> bool:
    """Whether a success of the plan's cluster described a log dir without sizes (one that may
    have gone offline while violating: `spark.volume_history` then also finds each log dir's next
    description with sizes and when it is seen again)."""
    return any(p.unusable_error or p.unusable_unknown_size for p in plan.history.lines)


def io_cause(java_trace: str) -> str | None:
    """The innermost I/O error of a Java stack trace (a full disk: "No space left on device")."""
    found = [
        message.strip()
        for exception, message in JAVA_CAUSE.findall(java_trace)
        if exception == "java.io.IOException" and message.strip()
    ]
    return found[-1] if found else None


SUCCESS_SCHEMA = (
    "cluster string, file string, line long, cluster_index int, sseq long, k long, "
    "expiry_sseq long, expiry_k long, hold_sseq long, hold_k long, time double"
)


def read_events(folder: Path) -> dict[int, VolumeDeltas]:
    """The runs' event lines (`spark.volume_history.events`) of the part files in `folder`,
    summed per success."""
    return summed_events(line for part in part_files(folder) for line in text_lines(part))


def summed_events(lines: Iterable[str]) -> dict[int, VolumeDeltas]:
    """Event lines (`spark.volume_history.events`) summed per success."""
    deltas: dict[int, VolumeDeltas] = {}
    for line in lines:
        *counts, factor = line.split()
        sseq, cached, cached_violating, held, hold_expired, evicted, throttling = map(int, counts)
        change = VolumeDeltas(
            cached,
            cached_violating,
            held,
            hold_expired,
            evicted,
            {float(factor): throttling} if throttling else {},
        )
        deltas[sseq] = deltas.get(sseq, VolumeDeltas()) + change
    return deltas


def _grid(
    request: BackfillRequest, cluster: str, lines: ClusterLines, say
) -> EvaluationGrid | None:
    from spark.evaluation_grid import EmptyGrid, GridTooLarge, utc_text

    try:
        grid = EvaluationGrid.over(
            lines.first, lines.last, request.step, request.start, request.end
        )
    except EmptyGrid as exc:
        raise BackfillError(f"cluster {cluster!r}: {exc}") from None
    except GridTooLarge as exc:
        first = min(lines.polls, key=lambda p: (p.time, p.file, p.line))
        last = max(lines.polls, key=lambda p: (p.time, p.file, p.line))
        raise BackfillError(
            f"cluster {cluster!r}: {exc}; its first observation is {utc_text(first.time)} "
            f"({first.file}:{first.line}), its last {utc_text(last.time)} "
            f"({last.file}:{last.line}); narrow the range with --start/--end or take a larger "
            "--step"
        ) from None
    if request.prometheus_url:
        from spark.prometheus_gaps import PrometheusError, missing_ranges

        labels = {request.config.cluster_label: cluster, "scenario": request.scenario or ""}
        try:
            ranges = missing_ranges(request.prometheus_url, grid, labels)
        except PrometheusError as exc:
            raise BackfillError(str(exc)) from None
        if not ranges:
            shown = mask_url_credentials(request.prometheus_url)
            say(f"{shown} already holds every grid time of {cluster!r}")
            return None
        grid = grid.only(ranges)
        say(
            f"backfilling {len(ranges)} gap(s) Prometheus has no data for: "
            + ", ".join(f"{grid.time(a)}..{grid.time(b)}" for a, b in ranges[:10])
        )
    return grid


def _backfill_blocks(spark, archive, request, result, plans, catalog, found, say) -> None:
    """`--blocks`: every task writes the blocks of its shards (`spark.shard_blocks`), then the
    driver the cluster-wide series' (of its grid states, through the same script, in a process
    per core of its own over whole block ranges: `write_shards_here_in_parallel`), and moves the
    finished block folders into OUTPUT/blocks, replacing a previous run's."""
    from spark.promtool_blocks import PromtoolError, block_writer, how_to_load
    from spark.session import default_parallelism
    from spark.shard_blocks import (
        ShardError,
        ShardOutput,
        ShardPlan,
        pipe_shards,
        states_by_block,
        write_shards_here_in_parallel,
    )

    span = request.block_range
    try:
        writer = block_writer()  # here, for a clear error; executors run theirs
    except PromtoolError as exc:
        raise BackfillError(str(exc)) from None
    staging = request.output / STAGING
    shutil.rmtree(staging, ignore_errors=True)
    blocks = [(p.grid.time(p.grid.first) // span, p.grid.time(p.grid.last) // span) for p in plans]
    ranges = sum(last - first + 1 for first, last in blocks)
    rows = sum(found[p.cluster].log_dirs for p in plans)
    shards = ShardPlan.sized(rows, blocks, default_parallelism(spark), span)
    say(
        f"computing the series and writing their blocks: {ranges} block range(s) of "
        f"{shards.hours}h x {shards.parts} part(s) of the volumes, {Path(writer).name} in each task"
    )
    output = ShardOutput()
    try:
        lines = _volume_lines(spark, archive, request, plans, catalog, found, shards)
        output.add(pipe_shards(spark, lines, staging / "volumes", shards.hours, writer))
        events: dict[int, list[str]] = {}
        for path in output.events:
            with open(path, encoding="utf-8") as stream:
                for line in stream:
                    owner, _, event = line.partition(" ")
                    events.setdefault(int(owner), []).append(event)
        say(f"writing the cluster-wide series' blocks ({len(plans)} cluster(s))")

        pieces: list[tuple[int, int, list[GridState]]] = []  # (cluster index, block range, ...)
        for index, plan in enumerate(plans):
            deltas = summed_events(events.get(index, []))
            states = list(plan.history.grid_states(plan.grid, deltas))
            pieces.extend((index, block, part) for block, part in states_by_block(states, span))
        here = staging / "cluster-wide"
        output.add(
            write_shards_here_in_parallel(
                pieces,
                _cluster_wide(request, plans, catalog),
                here,
                shards.hours,
                writer,
                usable_cores(),
            )
        )
    except ShardError as exc:
        raise BackfillError(f"cannot build the blocks in {staging}: {exc}") from None
    except OSError as exc:  # the driver's own writes into the staging folder
        reason = exc.strerror or exc
        raise BackfillError(f"cannot build the blocks in {staging}: {reason}") from None
    samples = [output.samples(index) for index in range(len(plans))]
    replaced = (request.output / BLOCKS).exists()
    blocks_dir = _move_blocks([path for _, path in output.blocks], request.output)
    for index, plan in enumerate(plans):
        result.outputs.append(
            ClusterOutput(
                plan.cluster,
                blocks_dir,
                samples[index],
                len(plan.grid),
                found[plan.cluster].observations,
            )
        )
    result.blocks = sorted(blocks_dir / path.name for _, path in output.blocks)
    say(
        f"{len(result.blocks)} block(s) in {blocks_dir}"
        + ("; the previous run's blocks there are replaced" if replaced else "")
    )
    print(how_to_load(blocks_dir), file=sys.stdout)


def _cluster_wide(request: BackfillRequest, plans: list[_Plan], catalog):
    """`lines(cluster_index, states, line_prefix)`: the sample lines of the cluster-wide
    families for some grid states of the cluster of `plans[cluster_index]`."""
    config = request.config
    check_interval = config.check_interval.total_seconds()

    def lines(cluster_index: int, states, line_prefix: str) -> Iterator[str]:
        labels = {config.cluster_label: plans[cluster_index].cluster}
        if request.scenario:
            labels["scenario"] = request.scenario
        stamps = timestamp_suffixes(states)
        for family in catalog:
            if family.short in GLOBAL:
                yield from global_lines(
                    family, states, config.limit, check_interval, labels, stamps, line_prefix
                )

    return lines


def _move_blocks(blocks: list[Path], output: Path) -> Path:
    """The finished block folders moved (renamed) into a folder of their own, then swapped in
    for OUTPUT/blocks: a previous run's blocks over the same times would both be loaded. A run
    stopped before the swap leaves OUTPUT/blocks as it was, and no block is ever partial there."""
    blocks_dir, pending, old = output / BLOCKS, output / PENDING_BLOCKS, output / OLD_BLOCKS
    shutil.rmtree(pending, ignore_errors=True)
    pending.mkdir(parents=True)
    for block in blocks:
        block.rename(pending / block.name)
    if blocks_dir.exists():
        shutil.rmtree(old, ignore_errors=True)
        blocks_dir.rename(old)
    pending.rename(blocks_dir)
    shutil.rmtree(old, ignore_errors=True)
    return blocks_dir
