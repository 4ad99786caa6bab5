"""Write sample lines as one OpenMetrics file per cluster, in parallel and in promtool's order.

Every task writes its lines into one part file per (cluster, family) in the order it holds them
(Spark's concurrent writers: no sort, no shuffle), and every series is whole and time-ordered
inside one task (`spark.metric_rows`). The driver then concatenates, per cluster, the families in
catalog order with their `# TYPE`/`# HELP` lines and a final `# EOF`: the cluster-wide families
from its own lines, the others by streaming the part files (LZ4, `spark.lz4_parts`) block by
block (it never holds the data) into a file written around the page cache
(`spark.uncached_file`). A thread of its own reads, decompresses and removes the parts ahead of
the copy (file reads and LZ4 release the GIL), and the lines are never looked at: Spark counts
the samples as it writes them (`spark.metric_rows.counting_samples`). So families are never
interleaved, each series is contiguous and in time order (promtool silently drops out-of-order
samples), and timestamps are whole seconds (promtool reads milliseconds as seconds).
"""

from __future__ import annotations

import contextlib
import queue
import shutil
import threading
from collections.abc import Callable, Generator, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from kvq.contract.metric_families import MetricFamily
from spark.hadoop_paths import hadoop_path
from spark.lz4_parts import CODEC, decompressed, part_files
from spark.openmetrics_text import EOF_LINE, header_lines, joined_texts
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
    # Each task moves its own files into place as it commits (algorithm 2): with the default one,
    # the driver renames every task's files alone, after the last task (driver-only time).
    # A failed run's work folder is removed whole, so files of committed tasks do no harm.
    lines.write.option("compression", CODEC).option(
        "mapreduce.fileoutputcommitter.algorithm.version", "2"
    ).partitionBy("cluster_index", "family").text(hadoop_path(work_dir))


def concatenate(
    work_dir: Path,
    cluster_index: int,
    catalog: list[MetricFamily],
    path: Path,
    driver_lines: Callable[[MetricFamily], Iterable[str] | None],
) -> int:
    """One cluster's file at `path`: each family of `catalog` in order, from the lines the driver
    has for it (`driver_lines(family)`, None when it has none) or else from its part files, with
    headers and `# EOF`; returns how many sample lines came from `driver_lines` (the parts' are
    counted by Spark as it writes them).

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
    """`concatenate`'s families, written to `out`; returns the count of the driver's lines."""
    count = 0
    for index, family in enumerate(catalog):
        header = header_lines(family).encode("utf-8")
        lines = driver_lines(family)
        if lines is not None:
            count += _write_lines(out, header, lines)
            continue
        parts = part_files(work_dir / f"cluster_index={cluster_index}" / f"family={index}")
        if not parts:
            continue
        out.write(header)
        with contextlib.closing(_part_bytes(parts)) as pieces:
            for piece in pieces:
                out.write(piece)
    return count


def _write_lines(out: UncachedFile, header: bytes, lines: Iterable[str]) -> int:
    """`header` (if there is a line) and `lines` (texts of whole lines), joined into writes of
    about a megabyte; returns the count of lines."""
    count = 0
    for text in joined_texts(lines):
        out.write(header + text.encode("utf-8"))
        header = b""
        count += text.count("\n")
    return count


PREFETCH_BYTES = 4 << 20
"""The reading thread hands over decompressed data in groups of about this many bytes."""
PREFETCH_GROUPS = 4
"""How many groups it may read ahead of the copy (memory: this times `PREFETCH_BYTES`)."""
_DONE = object()


def _part_bytes(parts: list[Path]) -> Generator[bytes, None, None]:
    """The decompressed bytes of `parts` in order, read ahead by a thread that also removes each
    part once read (what the kernel has not written back of it yet never is). Closing the
    iterator stops and joins the thread: an interrupted copy leaves no thread reading."""
    groups: queue.Queue[object] = queue.Queue(PREFETCH_GROUPS)
    stop = threading.Event()
    reader = threading.Thread(
        target=_read_parts, args=(parts, groups, stop), name="kvq-part-reader", daemon=True
    )
    reader.start()
    try:
        while (group := groups.get()) is not _DONE:
            if isinstance(group, BaseException):
                raise group
            yield from group  # type: ignore[misc]
    finally:
        stop.set()
        reader.join()


def _read_parts(parts: list[Path], groups: queue.Queue[object], stop: threading.Event) -> None:
    """`_part_bytes`' thread: groups of decompressed pieces, then `_DONE` (or the error)."""
    try:
        group: list[bytes] = []
        size = 0
        for part in parts:
            for piece in decompressed(part):
                group.append(piece)
                size += len(piece)
                if size >= PREFETCH_BYTES:
                    if not _hand_over(groups, group, stop):
                        return
                    group, size = [], 0
            part.unlink()
        if group and not _hand_over(groups, group, stop):
            return
        _hand_over(groups, _DONE, stop)
    except BaseException as exc:  # noqa: BLE001 - the copy raises it in the main thread
        _hand_over(groups, exc, stop)


def _hand_over(groups: queue.Queue[object], item: object, stop: threading.Event) -> bool:
    """Put `item` once there is room; False when the copy stopped (no one takes it any more)."""
    while not stop.is_set():
        try:
            groups.put(item, timeout=0.1)
            return True
        except queue.Full:
            continue
    return False
