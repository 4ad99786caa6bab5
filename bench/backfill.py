"""The Spark backfill against its baselines, side by side in one run, as ratios (issue 15's goals).

    python -m bench.backfill                # the 1M-row archive: scale-out, parse, replay
    python -m bench.backfill --sizes 13m    # 30 days x 300 volumes at 60 s in 3 minutes?
    python -m bench.backfill --goals        # 1M, 10M rows vs the replay, 13M (~40 min)

Every `kvq-backfill` run is the whole command in a fresh process (JVM start included), as a user
runs it. The baselines: a single-threaded loop that only gunzips and parses the archive's lines
(`json.loads`), and the plain-Python replay through the exporter's own policy core
(`devkit.python_replay`, writing the same OpenMetrics). Archives come from
`devkit.archive_generator` (fill, broker stops, fallback, bad lines). The load average is printed:
on a shared machine the scale-out ratio is only as good as the cores that were free.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import json
import multiprocessing
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

SAMPLES = re.compile(r": (\d+) samples at (\d+) times")


@dataclass(frozen=True)
class Archive:
    root: Path
    config: Path
    rows: int
    megabytes: float
    label: str


def make_archive(tmp: Path, name: str, brokers: int, dirs: int, hours: float, interval: float):
    from devkit.archive_generator import ArchivePlan, generate, write_config

    root = tmp / name
    counts = generate(
        ArchivePlan(brokers=brokers, dirs_per_broker=dirs, hours=hours, interval=interval),
        root / "archive",
    )
    size = sum(p.stat().st_size for p in (root / "archive").rglob("*") if p.is_file())
    config = write_config(root / "kvq.properties", interval=f"PT{interval:g}S")
    rows = counts["observations"] * brokers * dirs
    label = (
        f"{brokers * dirs} volumes ({brokers} brokers x {dirs} log dirs), {hours / 24:g} days "
        f"polled every {interval:g} s: {rows / 1e6:.2f}M log-dir rows, {size / 1e6:.0f} MB gzipped"
    )
    return Archive(root / "archive", config, rows, size / 1e6, label)


def parse_seconds(archive: Archive) -> float:
    """A single-threaded loop that only gunzips and parses every line."""
    from spark.archive_files import archive_files, numbered_lines

    started = time.perf_counter()
    for path in archive_files(archive.root):
        for _, line in numbered_lines(path):
            with contextlib.suppress(ValueError):
                json.loads(line)
    return time.perf_counter() - started


def backfill_seconds(archive: Archive, out: Path, master: str, step: int) -> tuple[float, int]:
    """The whole `kvq-backfill` command in a fresh process: (seconds, samples written)."""
    command = [
        sys.executable, "-m", "spark.cli", "--archive", str(archive.root),
        "--config", str(archive.config), "--output", str(out), "--master", master,
        "--step", f"PT{step}S",
    ]  # fmt: skip
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"kvq-backfill failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return seconds, sum(int(m.group(1)) for m in SAMPLES.finditer(done.stdout))


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
        backfilled(config.limit),
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


def one_million(tmp: Path, step: int) -> None:
    archive = make_archive(tmp, "1m", brokers=12, dirs=4, hours=168, interval=30)
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
    ten = make_archive(tmp, "10m", brokers=75, dirs=4, hours=23 * 24, interval=60)
    class_archive_written(ten, tmp, step)
    print(f"\n10M rows: {ten.label}; grid step {step} s; {load()}", flush=True)
    replay, replay_samples = replay_seconds(ten, None, step)
    print(f"  plain-Python replay (not writing):            {rate(ten.rows, replay)}", flush=True)
    spark, samples = backfill_seconds(ten, tmp / "10m-spark", "local[*]", step)
    print(f"  kvq-backfill (local[*]):                      {rate(ten.rows, spark)}", flush=True)
    print(f"  samples: {samples} (replay: {replay_samples})")
    print(f"  plain-Python replay / kvq-backfill:           {replay / spark:5.2f}x  (goal >= 2x)")
    (tmp / "10m-spark" / "kafka.om").unlink()
    return spark / ten.rows


def thirty_days(tmp: Path, step: int, per_row_10m: float | None) -> None:
    month = make_archive(tmp, "13m", brokers=75, dirs=4, hours=30 * 24, interval=60)
    class_archive_written(month, tmp, step)
    print(f"\n13M rows: {month.label}; grid step {step} s; {load()}", flush=True)
    seconds, samples = backfill_seconds(month, tmp / "13m-spark", "local[*]", step)
    print(f"  kvq-backfill (local[*]):                      {rate(month.rows, seconds)}  "
          f"{samples} samples  (goal < 180 s; {load()})", flush=True)  # fmt: skip
    if per_row_10m is not None:
        per_row = (seconds / month.rows) / per_row_10m
        print(f"  time per row, 13M / 10M:                      {per_row:5.2f}x  (linear: 1.0)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.backfill",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--sizes",
        default="1m",
        help="comma-separated, of 1m (scale-out, parse, replay), 10m (vs the replay), 13m "
        "(30 days x 300 volumes in 3 minutes); --goals is all three (default: 1m)",
    )
    parser.add_argument("--goals", action="store_true", help="every size: 1m,10m,13m")
    parser.add_argument("--step", type=int, default=60, help="grid step, seconds")
    parser.add_argument("--keep", metavar="DIR", help="work in DIR and keep it (default: a temp)")
    args = parser.parse_args(argv)
    if args.keep:
        Path(args.keep).mkdir(parents=True, exist_ok=True)
    work = (
        contextlib.nullcontext(args.keep)
        if args.keep
        else tempfile.TemporaryDirectory(prefix="kvq-bench-backfill-")
    )
    sizes = {"1m", "10m", "13m"} if args.goals else set(args.sizes.split(","))
    with work as tmp:
        if "1m" in sizes:
            one_million(Path(tmp), args.step)
        per_row = ten_million(Path(tmp), args.step) if "10m" in sizes else None
        if "13m" in sizes:
            thirty_days(Path(tmp), args.step, per_row)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
