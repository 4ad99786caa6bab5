"""The Spark backfill against its baselines, side by side in one run, as ratios (issue 15's goals).

    python -m bench.backfill                # the 1M-row archive: scale-out, parse, replay
    python -m bench.backfill --sizes 13m    # 30 days x 300 volumes at 60 s in 3 minutes?
    python -m bench.backfill --goals        # 1M, 10M rows vs the replay, 13M (~40 min)
    python -m bench.backfill --scaling      # 1 to 64 executor cores, from Spark's event log
    python -m bench.backfill --scaling --sizes 1m,13m,50m

Every `kvq-backfill` run is the whole command in a fresh process (JVM start included), as a user
runs it. The baselines: a single-threaded loop that only gunzips and parses the archive's lines
(`json.loads`), and the plain-Python replay through the exporter's own policy core
(`devkit.python_replay`, writing the same OpenMetrics). Archives come from
`devkit.archive_generator` (fill, broker stops, fallback, bad lines). The load average is printed:
on a shared machine the scale-out ratio is only as good as the cores that were free.

`--scaling` answers what this machine's two cores cannot: the wall time of the same backfill on
1 to 64 executor cores, scheduled from the task durations Spark's event log records
(`bench.spark_event_log`), checked against `local[1]` and `local[2]` measured here, and
extrapolated to a year of a 1,000-broker fleet.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import json
import multiprocessing
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

from bench.spark_event_log import (
    MAX_TASKS_PER_STAGE,
    EventLog,
    application_scaling_line,
    driver_gaps,
    event_log_settings,
    grown_stages_seconds,
    on_dedicated_cores,
    predicted_seconds,
    read_event_log,
    report,
    scaling_lines,
    within,
)
from devkit import results_page

SAMPLES = re.compile(r": (\d+) samples at (\d+) times")


@dataclass(frozen=True)
class Archive:
    root: Path
    config: Path
    rows: int
    megabytes: float
    label: str
    polls: int
    hours: float


def make_archive(tmp: Path, name: str, brokers: int, dirs: int, hours: float, interval: float):
    from devkit.archive_generator import ArchivePlan, generate, write_config

    root = tmp / name
    plan = ArchivePlan(brokers=brokers, dirs_per_broker=dirs, hours=hours, interval=interval)
    # A whole archive of the same plan is reused (--keep DIR): a 13M-row one takes minutes.
    generated = root / "generated.json"
    if generated.is_file() and json.loads(generated.read_text())["plan"] == repr(plan):
        counts = json.loads(generated.read_text())["counts"]
    else:
        generated.unlink(missing_ok=True)
        shutil.rmtree(root / "archive", ignore_errors=True)
        counts = generate(plan, root / "archive")
        generated.write_text(json.dumps({"plan": repr(plan), "counts": counts}))
    size = sum(p.stat().st_size for p in (root / "archive").rglob("*") if p.is_file())
    config = write_config(root / "kvq.properties", interval=f"PT{interval:g}S")
    rows = counts["observations"] * brokers * dirs
    label = (
        f"{brokers * dirs} volumes ({brokers} brokers x {dirs} log dirs), {hours / 24:g} days "
        f"polled every {interval:g} s: {rows / 1e6:.2f}M log-dir rows, {size / 1e6:.0f} MB gzipped"
    )
    return Archive(root / "archive", config, rows, size / 1e6, label, counts["observations"], hours)


SHAPES = {
    "tiny": (3, 2, 6, 60),  # a smoke run of the --scaling path (tests)
    "1d": (20, 3, 24, 30),  # a day of 60 volumes (--checkpoint)
    "1m": (12, 4, 168, 30),
    "10m": (75, 4, 23 * 24, 60),
    "13m": (75, 4, 30 * 24, 60),
    "50m": (96, 12, 30 * 24, 60),
}
"""Generated archives by size: brokers, log dirs per broker, hours, poll interval (seconds)."""
MODEL_CORES = 64
"""The cluster the model run splits the work for (spark.default.parallelism), and the one a
year of a fleet is predicted on."""


def shape_rows(size: str) -> float:
    brokers, dirs, hours, interval = SHAPES[size]
    return brokers * dirs * hours * 3600 / interval


def sized_archive(tmp: Path, size: str) -> Archive:
    brokers, dirs, hours, interval = SHAPES[size]
    return make_archive(tmp, size, brokers=brokers, dirs=dirs, hours=hours, interval=interval)


def parse_seconds(archive: Archive) -> float:
    """A single-threaded loop that only gunzips and parses every line."""
    from spark.archive_files import archive_files, numbered_lines

    started = time.perf_counter()
    for path in archive_files(archive.root):
        for _, line in numbered_lines(path):
            with contextlib.suppress(ValueError):
                json.loads(line)
    return time.perf_counter() - started


def backfill_seconds(
    archive: Archive,
    out: Path,
    master: str,
    step: int,
    spark_settings: dict[str, str] | None = None,
    blocks: bool = False,
) -> tuple[float, int]:
    """The whole `kvq-backfill` command in a fresh process: (seconds, samples written); with
    `blocks`, `--blocks` (TSDB blocks written by the tasks) instead of the OpenMetrics file.

    `spark_settings` reach its Spark as `--conf` options (PYSPARK_SUBMIT_ARGS), as a user's
    spark-submit would pass them: the command itself is unchanged."""
    command = [
        sys.executable, "-m", "spark.cli", *backfill_options(archive, master, step, blocks),
        "--output", str(out),
    ]  # fmt: skip
    started = time.perf_counter()
    done = run_backfill(command, spark_settings)
    seconds = time.perf_counter() - started
    return seconds, sum(int(m.group(1)) for m in SAMPLES.finditer(done.stdout))


def backfill_options(archive: Archive, master: str, step: int, blocks: bool) -> list[str]:
    """`kvq-backfill`'s options for `archive` (but --output)."""
    return [
        "--archive", str(archive.root), "--config", str(archive.config), "--master", master,
        "--step", f"PT{step}S", *(("--blocks",) if blocks else ()),
    ]  # fmt: skip


def run_backfill(
    command: list[str],
    spark_settings: dict[str, str] | None,
    environment: dict[str, str] | None = None,
) -> subprocess.CompletedProcess:
    """`command` (a backfill) in a fresh process, `spark_settings` as `--conf` options
    (PYSPARK_SUBMIT_ARGS), `environment` added to this one's; raises RuntimeError with its
    error output when it fails."""
    env = {**os.environ, **(environment or {})}
    if spark_settings:
        confs = [f"--conf {shlex.quote(f'{k}={v}')}" for k, v in spark_settings.items()]
        env["PYSPARK_SUBMIT_ARGS"] = " ".join(
            [*confs, env.get("PYSPARK_SUBMIT_ARGS", "pyspark-shell")]
        )
    done = subprocess.run(command, capture_output=True, text=True, check=False, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"kvq-backfill failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return done


def spark_floor_seconds() -> float:
    """A fresh process that starts a local Spark session (class archive included) and runs one
    trivial job (`python -m spark.warm_up`): what any PySpark command costs before it has
    read a byte."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "spark.warm_up"], capture_output=True, check=True)
    return time.perf_counter() - started


PARALLEL_JOB = """
import time
from pyspark.sql import functions as F
from spark.session import spark_session
spark = spark_session({master!r})
def run(rows):
    text = F.concat(F.lit("kafka_volume_quota_x{{a=1}} "), (F.col("id") * 60).cast("string"))
    spark.range(0, rows, 1, 16).select(text).write.format("noop").mode("overwrite").save()
run(5_000_000)
started = time.perf_counter()
run(40_000_000)
print(time.perf_counter() - started)
"""


def parallel_ceiling() -> float:
    """local[1] / local[2] time of a trivially parallel Spark job (40M strings built, JIT warm):
    the most a second core gives any Spark job on this machine."""
    times = []
    for master in ("local[1]", "local[2]"):
        code = PARALLEL_JOB.format(master=master)
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        )
        times.append(float(done.stdout.split()[-1]))
    return times[0] / times[1]


def replay_seconds(archive: Archive, out: Path | None, step: int) -> tuple[float, int]:
    """`replay_in_process` in a fresh process, like every kvq-backfill run: the gigabytes it holds
    at 10M rows are given back before the backfill runs (held, they shrink the page cache and the
    dirty-page budget the backfill's writes get)."""
    spawn = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=spawn) as child:
        return child.submit(replay_in_process, archive, out, step).result()


def replay_in_process(archive: Archive, out: Path | None, step: int) -> tuple[float, int]:
    """The plain-Python replay writing the same OpenMetrics: (seconds, samples written).

    With `out` None the samples are only computed, not written: the Python writer holds every
    sample in memory to order them (gigabytes at 10M rows), so the big comparison leaves it out,
    which flatters the replay."""
    from devkit.python_replay import read_archive, replay
    from kvq.contract.metric_families import backfilled
    from kvq.settings.config import load_config
    from spark.evaluation_grid import EvaluationGrid
    from spark.openmetrics_text import write_openmetrics

    config = load_config(archive.config)
    started = time.perf_counter()
    observations = read_archive(archive.root, config.cluster_name).observations
    grid = EvaluationGrid.over(observations[0].time, observations[-1].time, step)
    if out is None:
        samples = sum(1 for _ in replay(observations, config, grid))
        return time.perf_counter() - started, samples
    out.mkdir(parents=True, exist_ok=True)
    samples = write_openmetrics(
        out / f"{config.cluster_name}.om",
        list(backfilled(config.limit)),
        replay(observations, config, grid),
    )
    return time.perf_counter() - started, samples


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.1f} (1 min), {five:.1f} (5 min) on {os.cpu_count()} cores"


def same_samples(a: Path, b: Path) -> bool:
    from spark.openmetrics_text import read_openmetrics

    return read_openmetrics(a) == read_openmetrics(b)


def rate(rows: int, seconds: float) -> str:
    return f"{seconds:7.1f} s  {rows / seconds / 1e3:8.0f}k log-dir rows/s"


def class_archive_written(archive: Archive, tmp: Path, step: int) -> None:
    """The first kvq-backfill writes Spark's class archive (slower), the next ones start from it:
    write it before timing anything, so that no measured run is the first."""
    from spark.class_archive import ClassArchive

    classes = ClassArchive.for_this_install()
    if classes is not None and not classes.path.is_file():
        print(f"  (writing the class archive {classes.path}: a first, untimed run)", flush=True)
        backfill_seconds(archive, tmp / "first-run", "local[*]", step)


JIT_TIERS = {
    "first tier only (C1)": "-XX:TieredStopAtLevel=1",
    "both tiers (C1, then C2)": "-XX:TieredStopAtLevel=4",
}
"""The local driver's JIT, forced through _JAVA_OPTIONS (which the JVM reads after its command
line, so it overrides kvq-backfill's own choice: `spark.session.local_java_options`)."""


def machine_cpu_seconds() -> float:
    """CPU time every process of the machine has used (/proc/stat: user, nice, system, irq,
    softirq): a run's JVM is not a child this process waits for, so its own counters miss it."""
    with open("/proc/stat", encoding="ascii") as stat:
        fields = stat.readline().split()
    user, nice, system, _idle, _iowait, irq, softirq = map(int, fields[1:8])
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def jit_tiers(tmp: Path, sizes: list[str], step: int, rounds: int = 2) -> None:
    """`--jit`: each archive backfilled (`--blocks`, local[*]) with each JIT tier, alternating,
    `rounds` times; the medians side by side, and which one kvq-backfill picks for that size."""
    from spark.archive_files import archive_files
    from spark.session import SMALL_INPUT_BYTES

    for size in sizes:
        archive = sized_archive(tmp, size)
        class_archive_written(archive, tmp, step)
        stored = sum(path.stat().st_size for path in archive_files(archive.root))
        picked = next(iter(JIT_TIERS)) if stored <= SMALL_INPUT_BYTES else list(JIT_TIERS)[1]
        print(
            f"\n{size.upper()} rows: {archive.label}; {stored / 1e6:.2f} MB stored "
            f"(kvq-backfill picks {picked}: small up to {SMALL_INPUT_BYTES / 1e6:.1f} MB); "
            f"{load()}",
            flush=True,
        )
        command = [
            sys.executable, "-m", "spark.cli",
            *backfill_options(archive, "local[*]", step, blocks=True),
            "--output", str(tmp / f"{size}-jit"),
        ]  # fmt: skip
        flags = {name: {"_JAVA_OPTIONS": flag} for name, flag in JIT_TIERS.items()}
        side_by_side({name: (command, env) for name, env in flags.items()}, rounds)


def side_by_side(commands: dict[str, tuple[list[str], dict[str, str]]], rounds: int) -> None:
    """Each named (command, environment) run `rounds` times, in turn; prints each one's medians
    (seconds of the whole command, seconds of the machine's CPU), then the first's over the
    second's."""
    walls: dict[str, list[float]] = {name: [] for name in commands}
    cpus: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(rounds):
        for name, (command, environment) in commands.items():
            cpu, started = machine_cpu_seconds(), time.perf_counter()
            run_backfill(command, None, environment)
            walls[name].append(time.perf_counter() - started)
            cpus[name].append(machine_cpu_seconds() - cpu)
    medians = {
        name: (statistics.median(walls[name]), statistics.median(cpus[name])) for name in commands
    }
    width = max(map(len, commands))
    for name, (wall, cpu) in medians.items():
        print(
            f"  {name:<{width}} {wall:7.1f} s whole command, {cpu:7.1f} s of CPU (the "
            f"machine's), median of {rounds}",
            flush=True,
        )
    (first, first_cpu), (second, second_cpu) = list(medians.values())[:2]
    first_name, second_name = list(commands)[:2]
    print(
        f"  {first_name} / {second_name}: {first / second:.2f}x the time, "
        f"{first_cpu / second_cpu:.2f}x the CPU",
        flush=True,
    )


UNKEPT_BACKFILL = (
    "import spark.session\n"
    "spark.session.checkpointing = lambda spark: None\n"
    "from spark.cli import main\n"
    "raise SystemExit(main())"
)
"""`kvq-backfill` as on a cluster without spark.checkpoint.dir: the tables the job reads twice
computed for each read (`spark.session.checkpointing`)."""


def kept_windows(tmp: Path, sizes: list[str], step: int, rounds: int = 3) -> None:
    """`--checkpoint`: each archive backfilled (`--blocks`, local[*]) under graceful slowdown,
    with its per-volume windows checkpointed (a local run's default) and computed for each of
    their two reads (a cluster without a checkpoint directory), alternating."""
    from kvq.settings.config import GRACEFUL_SLOWDOWN, THROTTLE_POLICY

    for size in sizes:
        archive = sized_archive(tmp, size)
        graceful = archive.config.with_name("graceful.properties")
        graceful.write_text(archive.config.read_text() + f"{THROTTLE_POLICY}={GRACEFUL_SLOWDOWN}\n")
        archive = replace(archive, config=graceful)
        class_archive_written(archive, tmp, step)
        print(f"\n{size.upper()} rows, graceful-slowdown: {archive.label}; {load()}", flush=True)
        options = [
            *backfill_options(archive, "local[*]", step, blocks=True),
            "--output", str(tmp / f"{size}-checkpoint"),
        ]  # fmt: skip
        side_by_side(
            {
                "windows checkpointed": ([sys.executable, "-m", "spark.cli", *options], {}),
                "computed for each read": ([sys.executable, "-c", UNKEPT_BACKFILL, *options], {}),
            },
            rounds,
        )


def one_million(tmp: Path, step: int) -> None:
    archive = sized_archive(tmp, "1m")
    class_archive_written(archive, tmp, step)
    print(f"\n1M rows: {archive.label}; grid step {step} s; {load()}", flush=True)
    parse = parse_seconds(archive)
    print(
        f"  single-threaded parse (gunzip + json.loads):  {rate(archive.rows, parse)}", flush=True
    )
    replay, replay_samples = replay_seconds(archive, tmp / "1m-replay", step)
    print(
        f"  plain-Python replay:                          {rate(archive.rows, replay)}", flush=True
    )
    floor = spark_floor_seconds()
    print(
        f"  Spark session + one trivial job (no data):    {floor:7.1f} s  "
        f"({floor / parse:.1f}x the parse before reading anything)",
        flush=True,
    )
    one, _ = backfill_seconds(archive, tmp / "1m-local1", "local[1]", step)
    print(f"  kvq-backfill --master local[1]:               {rate(archive.rows, one)}", flush=True)
    two, samples = backfill_seconds(archive, tmp / "1m-local2", "local[2]", step)
    print(f"  kvq-backfill --master local[2]:               {rate(archive.rows, two)}", flush=True)
    same = same_samples(tmp / "1m-replay" / "kafka.om", tmp / "1m-local2" / "kafka.om")
    print(
        f"  same samples as the replay: {'yes' if same else 'NO'} ({samples} vs {replay_samples})"
    )
    print(f"  scale-out, local[1] / local[2] time:          {one / two:5.2f}x  (goal >= 1.6x)")
    print(
        f"  the same for a trivially parallel Spark job:  {parallel_ceiling():5.2f}x  "
        "(what a second core gives any Spark job here)"
    )
    print(f"  kvq-backfill local[2] / single-threaded parse: {two / parse:5.1f}x  (goal <= 15x)")
    print(f"  plain-Python replay / kvq-backfill local[2]:  {replay / two:5.2f}x  ({load()})")
    if not same:
        raise SystemExit("the Spark job and the replay disagree")


def ten_million(tmp: Path, step: int) -> float:
    """Returns the seconds per log-dir row of kvq-backfill (for the linearity check)."""
    ten = sized_archive(tmp, "10m")
    class_archive_written(ten, tmp, step)
    print(f"\n10M rows: {ten.label}; grid step {step} s; {load()}", flush=True)
    replay, replay_samples = replay_seconds(ten, None, step)
    print(f"  plain-Python replay (not writing):            {rate(ten.rows, replay)}", flush=True)
    spark, samples = backfill_seconds(ten, tmp / "10m-spark", "local[*]", step)
    print(f"  kvq-backfill (local[*]):                      {rate(ten.rows, spark)}", flush=True)
    print(f"  samples: {samples} (replay: {replay_samples})")
    print(f"  plain-Python replay / kvq-backfill:           {replay / spark:5.2f}x  (goal >= 2x)")
    (tmp / "10m-spark" / "kafka.om").unlink()
    blocks, block_samples = backfill_seconds(ten, tmp / "10m-blocks", "local[*]", step, blocks=True)
    print(f"  kvq-backfill --blocks (local[*]):             {rate(ten.rows, blocks)}", flush=True)
    print(f"  samples in the blocks: {block_samples}")
    print(f"  plain-Python replay / kvq-backfill --blocks:  {replay / blocks:5.2f}x  ({load()})")
    shutil.rmtree(tmp / "10m-blocks")
    return spark / ten.rows


def thirty_days(tmp: Path, step: int, per_row_10m: float | None) -> None:
    month = sized_archive(tmp, "13m")
    class_archive_written(month, tmp, step)
    print(f"\n13M rows: {month.label}; grid step {step} s; {load()}", flush=True)
    seconds, samples = backfill_seconds(month, tmp / "13m-spark", "local[*]", step)
    print(f"  kvq-backfill (local[*]):                      {rate(month.rows, seconds)}  "
          f"{samples} samples  (goal < 180 s; {load()})", flush=True)  # fmt: skip
    if per_row_10m is not None:
        per_row = (seconds / month.rows) / per_row_10m
        print(f"  time per row, 13M / 10M:                      {per_row:5.2f}x  (linear: 1.0)")


@dataclass(frozen=True)
class LoggedRun:
    seconds: float
    samples: int
    log: EventLog
    output_bytes: int
    ended: float = 0.0
    """When the process ended, seconds since the epoch (0: unknown)."""

    @property
    def outside(self) -> float:
        """The process's seconds outside the Spark application: before its start (Python's
        start, imports, the JVM's launch) and after its end (the JVM's stop, Python's exit)."""
        return max(0.0, self.seconds - self.log.seconds)

    @property
    def outside_after(self) -> float:
        """The part of `outside` after the application's end (Spark's clock and this one are
        the same machine's)."""
        if not self.ended:
            return 0.0
        return min(self.outside, max(0.0, self.ended - self.log.ended))


def logged_backfill(
    archive: Archive, out: Path, master: str, step: int, settings: dict[str, str] | None = None
) -> LoggedRun:
    """`backfill_seconds --blocks` with Spark's event log on, kept beside `out` (`--keep`: for
    reading again); the output is removed (gigabytes)."""
    events = fresh_event_log(out)
    confs = {**event_log_settings(events), **(settings or {})}
    seconds, samples = backfill_seconds(archive, out, master, step, confs, blocks=True)
    ended = time.time()
    log = read_event_log(events)
    return LoggedRun(seconds, samples, log, removed_blocks_bytes(out), ended)


def fresh_event_log(out: Path) -> Path:
    """An empty event log folder beside `out` (a previous run's removed)."""
    events = out.with_name(f"{out.name}-event-log")
    shutil.rmtree(events, ignore_errors=True)
    events.mkdir(parents=True)
    return events


def removed_blocks_bytes(out: Path) -> int:
    """The bytes of the blocks a `--blocks` run wrote into `out`, which is then removed."""
    written = sum(p.stat().st_size for p in (out / "blocks").rglob("*") if p.is_file())
    shutil.rmtree(out)
    return written


def warm_logged_backfill(
    archive: Archive, out: Path, master: str, step: int, settings: dict[str, str]
) -> LoggedRun:
    """`logged_backfill`, but the run measured is the second of two in one process
    (`bench.warm_driver`): the JVM and its JIT already running. Its `outside` is the process's
    start to the first run's (Python's start and imports, as any client's); the JVM's launch and
    stop are not in it, the driver's work in the run is."""
    events = fresh_event_log(out)
    command = [
        sys.executable, "-m", "bench.warm_driver", str(out),
        *backfill_options(archive, master, step, blocks=True),
    ]  # fmt: skip
    launched = time.time()
    done = run_backfill(command, {**event_log_settings(events), **settings})
    times = json.loads(done.stdout.splitlines()[-1])
    warm = within(read_event_log(events), times["warm_started"], times["warm_ended"])
    samples = [int(m.group(1)) for m in SAMPLES.finditer(done.stdout)]
    outside = times["cold_started"] - launched
    return LoggedRun(
        warm.seconds + outside, samples[-1], warm, removed_blocks_bytes(out), warm.ended
    )


def connect_logged_backfill(
    archive: Archive, out: Path, step: int, settings: dict[str, str]
) -> LoggedRun:
    """`logged_backfill` as a Spark Connect client (`kvq-backfill --remote`) of a server whose
    executor is one core (`local[1]`, `settings` its own), its event log on: the backfill run
    twice, as two commands; the second is measured (the server's JVM warm, as a server that
    serves runs is), from the client's launch to its exit: the whole command a user types."""
    from devkit.spark_connect import connect_server
    from spark.session import LOCAL_JAVA_OPTIONS

    events = fresh_event_log(out)
    conf = {
        **event_log_settings(events),
        **settings,
        "spark.driver.memory": "2g",
        "spark.driver.extraJavaOptions": LOCAL_JAVA_OPTIONS,
    }
    options = [*backfill_options(archive, "local[1]", step, blocks=True)]
    options = options[: options.index("--master")] + options[options.index("--master") + 2 :]
    cold = out.with_name(f"{out.name}-cold")
    with connect_server(out.with_name(f"{out.name}-server"), "local[1]", conf) as url:
        for folder in (cold, out):
            launched = time.time()
            command = [sys.executable, "-m", "spark.cli", *options, "--output", str(folder)]
            done = run_backfill([*command, "--remote", url], None)
            ended = time.time()
    shutil.rmtree(cold, ignore_errors=True)
    warm = within(read_event_log(events), launched, ended)
    samples = [int(m.group(1)) for m in SAMPLES.finditer(done.stdout)]
    return LoggedRun(ended - launched, samples[-1], warm, removed_blocks_bytes(out), warm.ended)


def model_run(
    tmp: Path, size: str, step: int, split: int, warm: bool = False, connect: bool = False
) -> tuple[Archive, LoggedRun]:
    """The run the model reads: one task at a time (as one executor core runs it), the work
    split as on `split` cores; with `warm`, then the same on a warm driver (`warm_model_run`),
    with `connect` as a client of a Spark Connect server (`connect_model_run`)."""
    archive = sized_archive(tmp, size)
    class_archive_written(archive, tmp, step)
    print(f"\n{size.upper()} rows: {archive.label}; grid step {step} s; {load()}", flush=True)
    settings = {"spark.default.parallelism": str(split)}
    run = logged_backfill(archive, tmp / f"{size}-model", "local[1]", step, settings)
    print(
        f"  kvq-backfill --master local[1], split as on {split} cores "
        f"(spark.default.parallelism={split}), event log on: {run.seconds:.1f} s, "
        f"{run.samples} samples, {run.output_bytes / 1e9:.2f} GB of TSDB blocks",
        flush=True,
    )
    outside = run.outside
    for line in report(run.log, archive.rows, outside, run.outside_after):
        print(f"  {line}")
    print("  the whole command (the goal's measure: Python's and the JVM's start and exit in):")
    for line in scaling_lines(run.log, outside):
        print(f"  {line}")
    driver = driver_gaps(run.log, outside, run.outside_after).total
    on_16 = predicted_seconds(run.log, 16, outside)
    print(
        f"  driver-only {driver:.1f} s: {driver / on_16:.0%} of the 16-core prediction "
        f"({on_16:.1f} s), {driver / predicted_seconds(run.log, 64, outside):.0%} of the 64-core"
    )
    print(f"  {application_scaling_line(run.log)}")
    print(
        f"  the same with every task taking its CPU time ({run.log.costs.cpu:.1f} s in all: on "
        "cores of its own; driver-only time as measured):"
    )
    for line in scaling_lines(on_dedicated_cores(run.log), outside):
        print(f"  {line}")
    if warm:
        warm_model_run(tmp, archive, size, step, settings)
    if connect:
        connect_model_run(tmp, archive, size, step, settings)
    return archive, run


def connect_model_run(
    tmp: Path, archive: Archive, size: str, step: int, settings: dict[str, str]
) -> None:
    """The model run again as a Spark Connect client (`connect_logged_backfill`)."""
    run = connect_logged_backfill(archive, tmp / f"{size}-connect", step, settings)
    print_warm_run(
        "as a Spark Connect client (`kvq-backfill --remote`, the second of two runs on one "
        "server, from the client's launch to its exit; the server's own start not in it)",
        run,
    )


def warm_model_run(
    tmp: Path, archive: Archive, size: str, step: int, settings: dict[str, str]
) -> None:
    """The model run again on a warm driver (`warm_logged_backfill`), its driver-only time and
    its whole command by cores."""
    run = warm_logged_backfill(archive, tmp / f"{size}-warm", "local[1]", step, settings)
    print_warm_run(
        "on a warm driver (the second of two runs in one process, `bench.warm_driver`: as a "
        "driver already running would hold it, the JVM's launch and stop not in it)",
        run,
    )


def print_warm_run(how: str, run: LoggedRun) -> None:
    """A model run on a driver already running: its driver-only time, its whole command by
    cores."""
    gaps = driver_gaps(run.log, run.outside)
    print(
        f"  {how}: {run.seconds:.1f} s, {run.samples} samples; driver-only {gaps.total:.1f} s "
        f"(before the first stage {gaps.before:.1f} s, of it {run.outside:.1f} s outside the "
        f"run's stages' span; between stages {gaps.between:.1f} s; after the last "
        f"{gaps.after:.1f} s)"
    )
    print("  the whole command:")
    for line in scaling_lines(run.log, run.outside):
        print(f"  {line}")


def check_the_model(tmp: Path, archive: Archive, model: LoggedRun, step: int) -> None:
    """The model's 1- and 2-core predictions against local[1] and local[2] measured here."""
    print(f"\n  the model against this machine ({archive.rows / 1e6:.1f}M rows; {load()}):")
    outside = model.outside
    for cores in (1, 2):
        run = logged_backfill(archive, tmp / f"check-{cores}", f"local[{cores}]", step)
        predicted = predicted_seconds(model.log, cores, outside)
        print(
            f"  {cores} core{'s' * (cores > 1)}: predicted {predicted:.1f} s, local[{cores}] "
            f"measured {run.seconds:.1f} s: error {predicted / run.seconds - 1:+.0%}; the "
            f"local[{cores}] run's own log: {run.log.tasks} tasks, task time "
            f"{run.log.task_seconds:.1f} s (GC {run.log.costs.gc:.1f} s, scheduler and result "
            f"{run.log.costs.scheduler:.1f} s), driver-only "
            f"{driver_gaps(run.log, run.seconds - run.log.seconds).total:.1f} s; it predicts "
            f"itself at {predicted_seconds(run.log, cores, run.seconds - run.log.seconds):.1f} s",
            flush=True,
        )


def scaling(
    tmp: Path,
    sizes: list[str],
    step: int,
    check: bool,
    split: int,
    warm: bool = False,
    connect: bool = False,
) -> None:
    """The backfill's scale-out read from Spark's event log (`bench.spark_event_log`)."""
    runs = [
        model_run(tmp, size, step, split, warm, connect) for size in sorted(sizes, key=shape_rows)
    ]
    smallest = runs[0][0]
    if len(runs) > 1:
        print("\n  time per log-dir row (the smallest size = 1.00):")
        base_task = runs[0][1].log.task_seconds / smallest.rows
        base_wall = runs[0][1].seconds / smallest.rows
        for archive, run in runs:
            task, wall = run.log.task_seconds / archive.rows, run.seconds / archive.rows
            print(
                f"  {archive.rows / 1e6:6.1f}M rows: task time {task * 1e6:.2f} us/row "
                f"({task / base_task:.2f}), whole run {wall * 1e6:.2f} us/row "
                f"({wall / base_wall:.2f})"
            )
        (small, first), (large, last) = runs[0], runs[-1]
        extra_rows = large.rows - small.rows
        print(
            f"  marginal, {small.rows / 1e6:.1f}M -> {large.rows / 1e6:.1f}M rows (the fixed "
            "costs, JVM start and JIT warm-up, cancel out): task time "
            f"{(last.log.task_seconds - first.log.task_seconds) / extra_rows * 1e6:.2f} us/row, "
            f"whole run {(last.seconds - first.seconds) / extra_rows * 1e6:.2f} us/row"
        )
    if check:
        check_the_model(tmp, *runs[-1], step)
    a_year_of_a_fleet(*runs[-1])


YEAR_OF_POLLS = 365 * 24 * 3600 // 30
YEAR_OF_A_FLEET = 1000 * 12 * YEAR_OF_POLLS
"""Log-dir rows of a year of 1,000 brokers x 12 log dirs polled every 30 s (12.6 billion)."""


def a_year_of_a_fleet(archive: Archive, run: LoggedRun) -> None:
    """The model run extrapolated to `YEAR_OF_A_FLEET` on `MODEL_CORES` cores: the stages keep
    their task time per row (`grown_stages_seconds`; the blocks are written inside them);
    the driver-only time before the first stage is the start (fixed: the archive is inflated by
    the read tasks), between and after the stages it grows with the polls (its pass over them,
    the cluster-wide series and their blocks, moving the blocks: one per block range and
    part)."""
    rows = YEAR_OF_A_FLEET / archive.rows
    polls = YEAR_OF_POLLS / archive.polls
    gaps = driver_gaps(run.log, run.outside, run.outside_after)
    before = gaps.before
    between = gaps.between * polls
    # the process's exit after the application does not grow
    after = (gaps.after - gaps.outside_after) * polls + gaps.outside_after
    stages = grown_stages_seconds(run.log, rows, MODEL_CORES)
    on_cpu = grown_stages_seconds(on_dedicated_cores(run.log), rows, MODEL_CORES)
    driver = before + between + after
    total = driver + stages
    samples = run.samples * rows
    print(
        f"\n  a year of 1,000 brokers x 12 log dirs at 30 s ({YEAR_OF_A_FLEET / 1e9:.1f} billion "
        f"log-dir rows, {YEAR_OF_POLLS / 1e6:.2f}M polls) on {MODEL_CORES} executor cores, from "
        f"the {archive.rows / 1e6:.1f}M-row run: {total / 3600:.2f} h "
        f"({(total - stages + on_cpu) / 3600:.2f} h with every task taking its CPU time; goal "
        "<= 1 h)"
    )
    print(
        f"    stages {stages / 3600:.2f} h ({on_cpu / 3600:.2f} h on CPU time; task time per row "
        f"as measured, each stage's tasks growing with the rows up to {MAX_TASKS_PER_STAGE}), "
        f"the blocks written inside them: {samples / 1e9:.0f} billion samples, "
        f"{run.output_bytes * rows / 1e12:.2f} TB of blocks"
    )
    print(
        f"    driver-only {driver / 3600:.3f} h = {driver / total:.1%} of the whole (goal <= 10%): "
        f"before the first stage {before:.0f} s (the start), between stages {between:.0f} s (its "
        f"pass over the polls, the cluster-wide series), after the last {after:.0f} s (moving "
        "the blocks, the exit)"
    )


def chosen_sizes(parser: argparse.ArgumentParser, args: argparse.Namespace) -> set[str]:
    """The archives --sizes (or --goals) names, else the mode's default; any other is an error."""
    default_sizes = (
        "1m,13m" if args.scaling else "tiny,1m" if args.jit else "1d" if args.checkpoint else "1m"
    )
    sizes = {"1m", "10m", "13m"} if args.goals else set((args.sizes or default_sizes).split(","))
    known = set(SHAPES) if args.scaling or args.jit or args.checkpoint else {"1m", "10m", "13m"}
    if sizes - known:
        given = ",".join(sorted(sizes - known))
        parser.error(f"--sizes {given}: give some of {','.join(sorted(known, key=shape_rows))}")
    return sizes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.backfill",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--sizes",
        default=None,
        help="comma-separated, of 1m (scale-out, parse, replay), 10m (vs the replay), 13m "
        "(30 days x 300 volumes in 3 minutes); --goals is all three (default: 1m)",
    )
    parser.add_argument("--goals", action="store_true", help="every size: 1m,10m,13m")
    parser.add_argument(
        "--scaling",
        action="store_true",
        help="the predicted wall time on 1-64 executor cores from Spark's event log, for each of "
        "--sizes (default 1m,13m; also 50m, tiny), checked against local[1] and local[2] at "
        "the largest",
    )
    parser.add_argument(
        "--model-only",
        action="store_true",
        help="with --scaling: only the runs the model reads (no local[1]/local[2] check)",
    )
    parser.add_argument(
        "--split-cores",
        type=int,
        default=MODEL_CORES,
        metavar="N",
        help=f"with --scaling: split the work as on N cores (default {MODEL_CORES})",
    )
    parser.add_argument(
        "--warm-driver",
        action="store_true",
        help="with --scaling: each model run again as the second of two in one process (the "
        "JVM and its JIT already running, as in a long-lived session or a Spark Connect server)",
    )
    parser.add_argument(
        "--connect",
        action="store_true",
        help="with --scaling: each model run again as a Spark Connect client (kvq-backfill "
        "--remote) of a server started for it, the second of two runs measured",
    )
    parser.add_argument(
        "--jit",
        action="store_true",
        help="each of --sizes (default tiny,1m) backfilled with the driver's JIT at its first "
        "tier only and with both tiers, side by side (the small-archive rule of kvq-backfill)",
    )
    parser.add_argument(
        "--checkpoint",
        action="store_true",
        help="each of --sizes (default 1d) backfilled under graceful-slowdown with its per-volume "
        "windows checkpointed and computed for each of their two reads, side by side",
    )
    parser.add_argument("--step", type=int, default=60, help="grid step, seconds")
    parser.add_argument("--keep", metavar="DIR", help="work in DIR and keep it (default: a temp)")
    args = parser.parse_args(argv)
    results_page.arguments(parser, args, ignore=("keep",))
    if args.keep:
        Path(args.keep).mkdir(parents=True, exist_ok=True)
    work = (
        contextlib.nullcontext(args.keep)
        if args.keep
        else tempfile.TemporaryDirectory(prefix="kvq-bench-backfill-")
    )
    if (args.warm_driver or args.connect) and not args.scaling:
        parser.error("--warm-driver and --connect model a run: give them with --scaling")
    sizes = chosen_sizes(parser, args)
    with work as tmp:
        if args.jit:
            jit_tiers(Path(tmp), sorted(sizes, key=shape_rows), args.step)
            return 0
        if args.checkpoint:
            kept_windows(Path(tmp), sorted(sizes, key=shape_rows), args.step)
            return 0
        if args.scaling:
            scaling(
                Path(tmp),
                sorted(sizes),
                args.step,
                not args.model_only,
                args.split_cores,
                args.warm_driver,
                args.connect,
            )
            return 0
        if "1m" in sizes:
            one_million(Path(tmp), args.step)
        per_row = ten_million(Path(tmp), args.step) if "10m" in sizes else None
        if "13m" in sizes:
            thirty_days(Path(tmp), args.step, per_row)
    return 0


if __name__ == "__main__":
    from bench.results import command_line

    raise SystemExit(command_line(__name__))
