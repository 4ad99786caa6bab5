"""Write sample lines as one OpenMetrics file per cluster, in parallel and in promtool's order.

Every task writes its lines into one part file per (cluster, family) in the order it holds them
(Spark's concurrent writers: no sort, no shuffle), and every series is whole and time-ordered
inside one task (`spark.metric_rows`). The driver then concatenates, per cluster, the families in
catalog order with their `# TYPE`/`# HELP` lines and a final `# EOF`: the cluster-wide families
from its own lines, the others by streaming the part files (LZ4, `spark.lz4_parts`) block by
block (it never holds the data), counting the sample lines on the way, into a file written around
the page cache (`spark.uncached_file`). So families are never interleaved, each series is
contiguous and in time order (promtool silently drops out-of-order samples), and timestamps are
whole seconds (promtool reads milliseconds as seconds).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from kvq.contract.metric_families import MetricFamily
from spark.hadoop_paths import hadoop_path
from spark.lz4_parts import CODEC, decompressed, part_files
from spark.openmetrics_text import EOF_LINE, header_lines
from spark.uncached_file import UncachedFile

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def write_parts(spark: SparkSession, lines: DataFrame, writers: int, work_dir: Path) -> None:
    """`lines` (cluster_index, family, text) -> work_dir/cluster_index=C/family=F/part-*.

    Each task keeps up to `writers` files open instead of sorting its rows by family, so the order
    of the rows inside a task is the order in the files."""
    spark.conf.set("spark.sql.optimizer.plannedWrite.enabled", "false")
    spark.conf.set("spark.sql.maxConcurrentOutputFileWriters", str(writers))
    if work_dir.exists():
        shutil.rmtree(work_dir)
    lines.write.option("compression", CODEC).partitionBy("cluster_index", "family").text(
        hadoop_path(work_dir)
    )


def concatenate(
    work_dir: Path,
    cluster_index: int,
    catalog: list[MetricFamily],
    path: Path,
    driver_lines: Callable[[MetricFamily], Iterable[str] | None],
) -> int:
    """One cluster's file at `path`: each family of `catalog` in order, from the lines the driver
    has for it (`driver_lines(family)`, None when it has none) or else from its part files, with
    headers and `# EOF`; returns the sample count.

    Written under a temporary name beside `path` and renamed once complete: `path` is only ever
    absent, a previous run's whole file, or this run's whole file, whatever stops the run."""
    pending = pending_path(path)
    try:
        with UncachedFile(pending) as out:
            count = _families(out, work_dir, cluster_index, catalog, driver_lines)
            out.write(EOF_LINE.encode("utf-8"))
        pending.replace(path)
    except BaseException:
        pending.unlink(missing_ok=True)
        raise
    return count


def pending_path(path: Path) -> Path:
    """Where `path` is written before it is complete: hidden (not `*.om`), one name per output,
    so a run killed outright (SIGKILL) leaves at most one, which the next run overwrites."""
    return path.with_name(f".{path.name}.tmp")


def _families(
    out: UncachedFile,
    work_dir: Path,
    cluster_index: int,
    catalog: list[MetricFamily],
    driver_lines: Callable[[MetricFamily], Iterable[str] | None],
) -> int:
    """`concatenate`'s families, written to `out`; returns the sample count."""
    count = 0
    for index, family in enumerate(catalog):
        header = header_lines(family).encode("utf-8")
        lines = driver_lines(family)
        if lines is not None:
            for line in lines:
                out.write(header + line.encode("utf-8"))
                header = b""
                count += 1
            continue
        folder = work_dir / f"cluster_index={cluster_index}" / f"family={index}"
        for part in part_files(folder):
            out.write(header)
            header = b""
            for data in decompressed(part):
                count += data.count(b"\n")
                out.write(data)
            # Gone at once: what the kernel has not written back of it yet never is.
            part.unlink()
    return count
