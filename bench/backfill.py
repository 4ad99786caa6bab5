"""Spark backfill vs the plain-Python replay of the same history: same output, ratio, rows/s.

    python -m bench.backfill [--brokers 12] [--dirs 4] [--hours 48] [--interval 30] [--step 60]

Generates an archive (N brokers x M log dirs polled every interval, with fill, broker stop,
fallback and bad lines), then in one run: the plain-Python replay (exporter policy core + the
Python OpenMetrics writer) and the Spark job (local[*], session started before timing), and checks
that both wrote the same samples. The Spark job runs twice: cold (first run in a fresh
JVM, what a one-shot `kvq-backfill` pays) and warm (JIT-compiled, closer to a long job).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.backfill",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--brokers", type=int, default=12)
    parser.add_argument("--dirs", type=int, default=4, help="log dirs per broker")
    parser.add_argument("--hours", type=float, default=48.0)
    parser.add_argument("--interval", type=float, default=30.0, help="seconds between polls")
    parser.add_argument("--step", type=int, default=60, help="grid step, seconds")
    parser.add_argument("--verbose", action="store_true", help="show the Spark job's progress")
    args = parser.parse_args(argv)

    from devkit.archive_generator import ArchivePlan, generate, write_config
    from devkit.python_replay import read_archive, replay
    from kvq.contract.metric_families import backfilled
    from kvq.settings.config import load_config
    from spark.evaluation_grid import EvaluationGrid
    from spark.job import BackfillRequest, run
    from spark.openmetrics_text import read_openmetrics, write_openmetrics
    from spark.progress import Progress
    from spark.session import spark_session

    with tempfile.TemporaryDirectory(prefix="kvq-bench-backfill-") as tmp:
        root = Path(tmp)
        plan = ArchivePlan(
            brokers=args.brokers,
            dirs_per_broker=args.dirs,
            hours=args.hours,
            interval=args.interval,
        )
        counts = generate(plan, root / "archive")
        size = sum(p.stat().st_size for p in (root / "archive").rglob("*") if p.is_file())
        config = load_config(
            write_config(root / "kvq.properties", interval=f"PT{args.interval:g}S")
        )
        log_dir_rows = counts["observations"] * args.brokers * args.dirs
        print(
            f"inputs: {args.brokers} brokers x {args.dirs} log dirs, {args.hours:g} h polled "
            f"every {args.interval:g} s: {counts['observations']} observations "
            f"({log_dir_rows} log-dir rows), {counts['files']} hourly files "
            f"({size / 1e6:.1f} MB gzipped), {counts['bad_lines']} bad lines; "
            f"grid step {args.step} s; {os.cpu_count()} cores"
        )

        started = time.perf_counter()
        contents = read_archive(root / "archive", config.cluster_name)
        observations = contents.observations
        grid = EvaluationGrid.over(observations[0].time, observations[-1].time, args.step)
        python_out = root / "python.om"
        samples = write_openmetrics(
            python_out, backfilled(config.limit), replay(observations, config, grid)
        )
        python_s = time.perf_counter() - started
        print(
            f"plain-Python replay: {python_s:8.2f} s  {samples} samples at {len(grid)} times  "
            f"{log_dir_rows / python_s:10.0f} log-dir rows/s  {samples / python_s:10.0f} "
            "samples/s"
        )

        started = time.perf_counter()
        spark_session()
        session_s = time.perf_counter() - started
        print(f"Spark session start: {session_s:8.2f} s (not counted below)")
        spark_times = []
        for attempt in ("cold", "warm"):
            started = time.perf_counter()
            result = run(
                BackfillRequest(root / "archive", config, root / "spark", args.step),
                Progress() if args.verbose else (lambda message: None),
            )
            spark_times.append(time.perf_counter() - started)
            spark_s = spark_times[-1]
            print(
                f"Spark job ({attempt} JVM): {spark_s:6.2f} s  {result.samples} samples at "
                f"{result.grid_times} times  {log_dir_rows / spark_s:10.0f} log-dir rows/s  "
                f"{result.samples / spark_s:10.0f} samples/s"
            )

        same = read_openmetrics(python_out) == read_openmetrics(result.openmetrics)
        print(f"same output: {'yes' if same else 'NO'} ({samples} samples)")
        for attempt, spark_s in zip(("cold", "warm"), spark_times, strict=True):
            print(
                f"ratio Spark ({attempt}) / plain Python: {spark_s / python_s:.2f}x the time "
                f"({python_s / spark_s:.2f}x the speed)"
            )
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
