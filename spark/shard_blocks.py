"""`--blocks`: every executor task writes the TSDB blocks of its own shards, where it computed them.

A shard is (cluster, block range, part): the runs of one part of a cluster's volumes (a hash of
broker and log dir) cut at promtool's block ranges, `[b * span, (b + 1) * span)` in seconds since
the epoch. The runs (one row per description, not per sample) are shuffled by shard and sorted
in each task by (shard, time), then exploded into sample lines there, so a shard's lines reach
the task's promtool one shard after the other, each series in time order (promtool drops a
series' out-of-order samples without a word; series may interleave, a block keeps no family
metadata).

The lines leave the JVM through Spark's `pipe`: `SHARD_SCRIPT` (POSIX sh and a block writer; no
Python and none of this project's code on the executors) writes each shard's block into the
task's own staging folder and answers with the finished block folders, and the file of the runs'
event lines (the driver sums them into the cluster-wide state). Where the executor has
`kvq-tsdb-blocks` (this project's Go writer built on the Prometheus TSDB's own block writer) it
reads the task's lines as they come and writes each shard's block as the next shard begins: no
shard's text is stored. Else awk puts each shard's lines into a file and `promtool tsdb
create-blocks-from openmetrics` writes its block (the same blocks for about 4x the CPU: it parses
the file twice and every label of every line, and the text goes through the disk). Either way
the answers come once the input ended whole: from a task whose JVM is gone, none. Nothing holds
more than one shard of samples: not the task, not the writer, not the driver, which only moves the
finished block folders (renames, on the storage it shares with the executors).

A volume's part is the same in every range, and a cluster's parts of one range are blocks that
overlap in time (different series): Prometheus (2.39 and later: always, no flag) and Thanos and
Mimir's compactors merge overlapping blocks.
"""

from __future__ import annotations

import contextlib
import json
import math
import shlex
import subprocess
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from spark.openmetrics_text import joined_texts
from spark.poll_history import GridState

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

BLOCK_RANGE_HOURS = 18
"""Each block holds at most 18 hours: the largest block a Prometheus with the default retention
(15d) builds itself (its largest compaction range at most a tenth of the retention, on the
TSDB's 2h x 3^n ranges: 2h, 6h, 18h), so Prometheus's retention drops backfilled history in the
same steps as its own, and promtool's `--max-block-duration` accepts it as it is."""
BLOCK_RANGE = BLOCK_RANGE_HOURS * 3600
ROWS_PER_SHARD = 2_000_000
"""Log-dir rows per shard at most (about 20M samples: a few GB of text, one promtool's block)."""
SHARDS_PER_CORE = 2
"""At least this many shards per core of the cluster (when there are rows enough)."""
EVENTS = "events"
BLOCK = "block"
FAILED = "failed"
"""The first field of each line `SHARD_SCRIPT` answers with."""

SHARD_SCRIPT = r"""
set -u
staging=$1 writer=$2 hours=$3 parent=$PPID child= dir= log= answers= watcher= watch=
# kvq-tsdb-blocks where this executor has it, else promtool (the same blocks, 4x the CPU).
name=${writer##*/}
[ "$name" = promtool ] || command -v "$writer" >/dev/null || writer=promtool name=promtool
# The watcher also ends within a second once $watch is gone: a TERM sent to it can be lost (on a
# loaded machine, one that came as its subshell started left it looping, and the task waiting).
unwatch() {
  [ -z "$watcher" ] || { rm -f "$watch"; kill "$watcher" 2>/dev/null; wait "$watcher" 2>/dev/null; }
}
# The writer waited for once killed: one still running could write into $dir after its removal.
stop() {
  [ -z "$child" ] || { kill "$child" 2>/dev/null; wait "$child" 2>/dev/null; }
  unwatch; rm -rf "$dir" "$log" "$answers" "$watch"; exit 143
}
# Set first: a signal while a command substitution runs waits for it (no orphan left).
trap stop TERM INT HUP
dir=$(mktemp -d "$staging/task-XXXXXXXX") || exit 1
# Not in the staging folder: a complaint that it is full must fit.
log=$(mktemp) answers=$(mktemp) watch=$(mktemp)
# The run that started this task removes $staging/.run when it is stopped: a Connect server's JVM
# outlives the run, and a task whose input was all written does not notice it was cancelled.
# Looked at every second; this task stops when it is gone.
( trap 'kill "$nap" 2>/dev/null; wait "$nap" 2>/dev/null; exit 0' TERM
  while [ -e "$staging/.run" ] && [ -e "$watch" ]; do sleep 1 & nap=$!; wait "$nap"; done
  [ -e "$watch" ] && kill -TERM "$$" 2>/dev/null; exit 0 ) & watcher=$!
# A refusal in one answer line: $1 (what failed, or "" when the log says it) and the log.
fail() {
  echo "failed	${1:+$1: }$(head -c 2000 "$log" | tr '\t\n' '  ')"
  unwatch; rm -rf "$dir" "$log" "$answers" "$watch"
  exit 0
}
# The JVM feeding this task is gone (stopped, killed): its input is not whole.
gone() {
  kill -0 "$parent" 2>/dev/null && return 1
  unwatch; rm -rf "$dir" "$log" "$answers" "$watch"; exit 1
}
exec 3<&0
if [ "$name" != promtool ]; then
  # Each shard's block written as its lines come (no shard's text stored), the events kept in
  # $dir/events; the head's chunks in the task's folder (TMPDIR), removed with it if stopped.
  TMPDIR="$dir" "$writer" --stream "$dir" "$hours" <&3 >"$answers" 2>"$log" & child=$!
  wait "$child" || fail ""
else
  # Lines "shard<TAB>sample" go to the shard's file (a shard's lines come one shard after the
  # other; one seen again gets a file of its own), lines without a tab are the runs' events.
  awk -v dir="$dir" '
  function finish() { if (cur != "") { print "# EOF" > file; close(file); print stem } }
  {
    tab = index($0, "\t")
    if (tab == 0) { print > (dir "/events"); next }
    key = substr($0, 1, tab - 1)
    if (key != cur) { finish(); cur = key; stem = key "." (++seen[key]); file = dir "/" stem ".om" }
    print substr($0, tab + 1) > file
  }
  END { finish() }' <&3 >"$dir/shards" 2>"$log" & child=$!
  wait "$child" || fail "writing the shards' samples"
  gone
  [ -f "$dir/events" ] && echo "events	$dir/events" >>"$answers"
  while read -r stem; do
    mkdir "$dir/$stem"
    "$writer" tsdb create-blocks-from openmetrics --quiet --max-block-duration="${hours}h" \
      "$dir/$stem.om" "$dir/$stem" >"$log" 2>&1 & child=$!
    wait "$child" || fail "$name on shard ${stem%.*}"
    rm -f "$dir/$stem.om"
    for block in "$dir/$stem"/*; do
      [ -f "$block/meta.json" ] && echo "block	${stem%.*}	$block" >>"$answers"
    done
  done <"$dir/shards"
  rm -f "$dir/shards"
fi
child=
exec 3<&-
gone
unwatch
cat "$answers"
rm -f "$log" "$answers"
exit 0
"""
RUN_TOKEN = ".run"
"""The file in a staging folder whose removal stops the tasks writing there (`SHARD_SCRIPT`)."""
STOP_NOTICE_SECONDS = 2.0
"""How long the scripts take at most to stop once the token is gone: twice their look."""


def prepared_staging(staging: Path) -> None:
    """`staging` created, with the token its scripts run while (`RUN_TOKEN`)."""
    staging.mkdir(parents=True, exist_ok=True)
    (staging / RUN_TOKEN).touch()


def stop_writers(staging: Path) -> None:
    """Stop every script still writing below `staging` (a Connect server's tasks, cancelled but
    maybe still running): their tokens removed, then the time they take to notice."""
    tokens = [*staging.glob(f"*/{RUN_TOKEN}"), *staging.glob(RUN_TOKEN)]
    for token in tokens:
        token.unlink(missing_ok=True)
    if tokens:
        time.sleep(STOP_NOTICE_SECONDS)


ADAPTIVE = "spark.sql.adaptive.enabled"


class ShardError(RuntimeError):
    """promtool refused a shard; the message carries its output."""


@dataclass(frozen=True)
class ShardPlan:
    """How the runs are cut into shards: block ranges of `span` seconds, `parts` per range."""

    span: int = BLOCK_RANGE
    parts: int = 1
    shards: int = 1
    """Shards expected in all: the shuffle's partitions (unless spark.sql.shuffle.partitions)."""
    origins: tuple[int, ...] = (0,)
    """Per cluster_index, what numbers its shards from the ranges of the clusters before it: the
    ranges before it less its first block range (`number`)."""

    @staticmethod
    def sized(
        rows: int, blocks: list[tuple[int, int]], cores: int, span: int = BLOCK_RANGE
    ) -> ShardPlan:
        """Parts per range for `rows` log-dir rows over the block ranges of each cluster
        (`blocks`: its first and last, by cluster_index): enough that no shard holds more than
        `ROWS_PER_SHARD` rows and every core gets `SHARDS_PER_CORE`."""
        origins, ranges = [], 0
        for first, last in blocks:
            origins.append(ranges - first)
            ranges += last - first + 1
        ranges = max(ranges, 1)
        by_size = math.ceil(rows / ranges / ROWS_PER_SHARD)
        by_cores = math.ceil(SHARDS_PER_CORE * cores / ranges)
        most = max(1, math.ceil(rows / ranges / 1000))  # never a shard of a few rows
        parts = max(1, min(max(by_size, by_cores), most))
        return ShardPlan(span, parts, parts * ranges, tuple(origins) or (0,))

    def number(self, cluster_index: Column, block: Column, part: Column) -> Column:
        """The shard's number, 0 to `shards` - 1: the shuffle puts each shard into a partition
        of its own by it (a hash of the shard's name put two or three shards into one task
        while others got none: a third of the tasks empty, the longest 4x the mean)."""
        from pyspark.sql import functions as F

        origin = F.lit(self.origins[0])
        for index, value in enumerate(self.origins[1:], start=1):
            origin = F.when(cluster_index == index, F.lit(value)).otherwise(origin)
        return ((origin + block) * F.lit(self.parts) + part).cast("int")

    @property
    def hours(self) -> int:
        return self.span // 3600

    def split(self, texts: DataFrame, step: Column, events: str) -> DataFrame:
        """`texts` (one row per run: cluster_index, broker_id, log_dir, lo, hi, its `events`
        column) cut at the block ranges: one row per (run, range it has grid times in) with
        `lo`/`hi` inside the range, the events on the run's first piece only; with a `shard`
        column, shuffled by it and sorted by (shard, time) in each task."""
        from pyspark.sql import functions as F

        lo, hi, span = F.col("lo"), F.col("hi"), F.lit(self.span)
        first = F.floor(lo * step / span)
        last = F.when(hi >= lo, F.floor(hi * step / span)).otherwise(first)
        block = F.col("block")
        pieces = texts.select("*", F.explode(F.sequence(first, last)).alias("block"))
        part = F.pmod(F.xxhash64("broker_id", "log_dir"), F.lit(self.parts))
        # The volume's columns are left behind: after the shuffle, its label text says it all.
        # (Replaced and dropped by name: a list of the columns kept would be the plan's schema,
        # which a Spark Connect session asks its server for.)
        cut = pieces.withColumns(
            {
                "lo": F.greatest(lo, F.ceil(block * span / step)),
                "hi": F.least(hi, F.ceil((block + 1) * span / step) - 1),
                events: F.when(block == first, F.col(events)).otherwise(F.lit("")),
                "shard": F.concat_ws("-", F.col("cluster_index"), block, part),
                "shard_number": self.number(F.col("cluster_index"), block, part),
            }
        ).drop("block", "broker_id", "log_dir")
        # Each series in time order is all a shard's lines need (`volume_lines`; series may
        # interleave): one whole-number key, (shard, first grid index; below 2^32 until 2106),
        # which Spark sorts by radix on the key alone. By (shard, volume, time), every
        # comparison in a task (one shard) fell through to the volume's columns, its log dir's
        # text compared byte by byte.
        order = F.col("shard_number").cast("long") * F.lit(1 << 32) + F.col("lo")
        return cut.repartitionById(self.partitions(cut), "shard_number").sortWithinPartitions(order)

    def partitions(self, cut: DataFrame) -> int:
        from spark.session import user_setting

        chosen = user_setting(cut.sparkSession, "spark.sql.shuffle.partitions")
        return int(chosen or 1) if chosen is not None else max(1, self.shards)


def block_of(t: int, span: int) -> int:
    """The block range index of grid time `t` (seconds)."""
    return t // span


@dataclass
class ShardOutput:
    """What the tasks answered: the finished block folders by shard, the event files."""

    blocks: list[tuple[str, Path]] = field(default_factory=list)
    events: list[Path] = field(default_factory=list)

    def add(self, answers: Iterable[str]) -> None:
        for answer in answers:
            kind, _, rest = answer.partition("\t")
            if kind == BLOCK:
                shard, _, path = rest.partition("\t")
                self.blocks.append((shard, Path(path)))
            elif kind == EVENTS:
                self.events.append(Path(rest))
            elif kind == FAILED:
                raise ShardError(rest.strip())

    def samples(self, cluster_index: int) -> int:
        """The samples of the cluster's blocks (their meta.json)."""
        total = 0
        for shard, path in self.blocks:
            if shard.split("-", 1)[0] == str(cluster_index):
                meta = json.loads((path / "meta.json").read_text())
                total += int(meta["stats"]["numSamples"])
        return total


def pipe_shards(
    spark: SparkSession, lines: DataFrame, staging: Path, hours: int, writer: str = "promtool"
) -> list[str]:
    """`lines` (one text column: `shard<TAB>sample` or an event line) through `SHARD_SCRIPT`,
    task by task, on the executors (`writer`: `spark.promtool_blocks.block_writer`); the answers
    of every task."""
    from spark.session import is_remote

    prepared_staging(staging)
    command = _shard_command(staging, writer, hours)
    # Planned without adaptive execution: every shuffle's partitions are set here already, and
    # adaptive execution runs each shuffle stage as a job of its own, the driver re-planning the
    # rest between them (0.2-1 s each on a cold JVM, while no core works); planned once, the
    # shuffles run as one job, each stage starting as soon as its parent ends.
    conf = spark.conf
    adaptive = conf.get(ADAPTIVE) or "true"
    conf.set(ADAPTIVE, "false")
    try:
        if is_remote(spark):
            return _transformed(spark, lines, command)  # planned and run now
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        strings = getattr(lines._jdf, "as")(jvm.org.apache.spark.sql.Encoders.STRING())
        rdd = strings.javaRDD()  # the physical plan, made now
    finally:
        conf.set(ADAPTIVE, adaptive)
    return list(rdd.pipe(command, {}, False, 1 << 16, "UTF-8").collect())


ANSWER_FIELDS = "ROW FORMAT DELIMITED FIELDS TERMINATED BY '\\u0001'"
"""TRANSFORM's rows in and out as whole lines: fields cut at a character no line holds (by
default at tabs, and the columns after the first dropped)."""


def _transformed(spark: SparkSession, lines: DataFrame, command: list[str]) -> list[str]:
    """`pipe` for a Spark Connect session, which has no RDDs: SQL's TRANSFORM, which runs a
    command per task (`/bin/bash -c` of the text) fed the task's rows a line each, and whose rows
    are the lines it answers."""
    # A view, not `spark.sql(query, lines=lines)`: the server answers a query with its plan, and
    # the client fails to read back one this deep (protobuf's limit on nesting).
    view = f"kvq_shard_lines_{uuid.uuid4().hex}"
    lines.toDF("line").createOrReplaceTempView(view)  # named here: no schema asked for
    query = (
        f"SELECT TRANSFORM(line) {ANSWER_FIELDS} USING {_sql_text(shlex.join(command))} "
        f"AS (answer STRING) {ANSWER_FIELDS} FROM `{view}`"
    )
    try:
        return [row.answer for row in spark.sql(query).collect()]
    finally:
        spark.catalog.dropTempView(view)


def _sql_text(text: str) -> str:
    """`text` as a Spark SQL string literal (backslash escapes, the SQL default)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _shard_command(staging: Path, writer: str, hours: int) -> list[str]:
    return ["sh", "-c", SHARD_SCRIPT, "kvq-shard-blocks", str(staging), writer, str(hours)]


def write_shards_here(lines: Iterable[str], staging: Path, hours: int, writer: str) -> list[str]:
    """`lines` (texts of whole lines, `shard<TAB>sample`) through `SHARD_SCRIPT` in a process
    of the driver's own, as a task's go through it (the driver's few cluster-wide lines: no
    Spark job to read them back from a file, and the writer builds their blocks while the driver
    computes them); its answers. Whatever stops the driver stops the script (and it its writer)."""
    prepared_staging(staging)
    script = subprocess.Popen(
        _shard_command(staging, writer, hours), stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert script.stdin is not None and script.stdout is not None
    try:
        # A script that stopped early (a refused shard) says why in its answers.
        with contextlib.suppress(BrokenPipeError), script.stdin:
            for text in joined_texts(lines):
                script.stdin.write(text.encode("utf-8"))
        answers = script.stdout.read().decode("utf-8").splitlines()
    except BaseException:
        script.terminate()  # its trap ends the writer and removes its folder
        script.wait()
        raise
    if script.wait() != 0:
        raise ShardError(f"the block writer's script ended with exit code {script.returncode}")
    return answers


def states_by_block(states: list[GridState], span: int) -> Iterator[tuple[int, list[GridState]]]:
    """(block range, its states) of `states` (in time order), one block range after the other."""
    start = 0
    while start < len(states):
        block = block_of(states[start].t, span)
        end = start
        while end < len(states) and block_of(states[end].t, span) == block:
            end += 1
        yield block, states[start:end]
        start = end


def global_shard_prefix(cluster_index: int, block: int) -> str:
    """The `shard<TAB>` that starts each cluster-wide line of a cluster's block range."""
    return f"{cluster_index}-{block}-global\t"


def write_shards_here_in_parallel(
    pieces: list[tuple[int, int, list[GridState]]],
    family_lines,
    staging: Path,
    hours: int,
    writer: str,
    processes: int,
) -> list[str]:
    """`write_shards_here` of the cluster-wide lines of `pieces` ((cluster index, block range,
    its states), in order), cut into up to `processes` runs of whole block ranges, each through a
    script of its own (in `staging`/N), at once: the block writer's time is mostly each block's
    fixed cost (its files written and synced), and the driver's cores would otherwise wait.
    `family_lines(cluster_index, states, line_prefix)` gives the lines of some states of a
    cluster; the answers of every script."""
    count = max(1, min(processes, len(pieces)))
    groups = [
        pieces[n * len(pieces) // count : (n + 1) * len(pieces) // count] for n in range(count)
    ]

    stopping = threading.Event()

    def lines(group) -> Iterator[str]:
        for cluster_index, block, states in group:
            if stopping.is_set():
                raise ShardError("stopped")  # `write_shards_here` ends its script
            yield from family_lines(
                cluster_index, states, global_shard_prefix(cluster_index, block)
            )

    # Leaving the block waits for every worker: none writes into `staging` after this returns.
    with ThreadPoolExecutor(count, thread_name_prefix="kvq-cluster-wide") as pool:
        answers = [
            pool.submit(write_shards_here, lines(group), staging / str(n), hours, writer)
            for n, group in enumerate(groups)
        ]
        try:
            return [answer for done in answers for answer in done.result()]
        except (
            BaseException
        ):  # a script's failure, an interrupt: the others stop at their next range
            stopping.set()
            raise
