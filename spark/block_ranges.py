"""Split an OpenMetrics file into time-disjoint files, one per TSDB block range, for promtool.

promtool 2.42 reads its whole input once per block range it builds (`create-blocks-from
openmetrics`: one parse to find the first and last time, then one per range, keeping only that
range's samples), so a month in one file at the default 2-hour blocks is parsed ~360 times. A
file that holds one range is parsed twice, and the files of different ranges are independent
promtool runs, side by side on as many cores as there are.

Block ranges are promtool's: `[k * span, (k + 1) * span)` in milliseconds since the epoch. The
input must be what the backfill writes (`spark.openmetrics_text`): families one after the other,
each after its comment lines (`# TYPE`, `# HELP`), every series contiguous and in time order,
`# EOF` last. Then the lines of one series in one range are one contiguous run, and finding the
runs needs no look at most lines: the index gallops over the file (probing lines at doubling
distances from a run's start, then bisecting), a few lines per run. The files are then written
one range after the other, in time order, each run copied whole, so promtool can start on the
first range while the next are written. Every file has the input's layout: a family's comment
lines before its first sample there, each series contiguous and in time order, `# EOF` last.
"""

from __future__ import annotations

import contextlib
import mmap
import os
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

EOF = b"# EOF\n"
FIRST_PROBE = 1 << 12
"""Bytes past a run's start of the first probe for its end (a few dozen lines)."""

RunKey = tuple[bytes, int]
"""A sample line's series (name and labels, as written) and block range index."""


class LayoutError(ValueError):
    """The input is not laid out as the backfill writes it (a line without a timestamp)."""


@dataclass
class RangeRuns:
    """Where one block range's lines are: runs of whole lines, in the file's order, and the
    family (an index into `RangeIndex.comments`) each belongs to."""

    starts: array = field(default_factory=lambda: array("q"))
    ends: array = field(default_factory=lambda: array("q"))
    families: array = field(default_factory=lambda: array("l"))

    def add(self, family: int, start: int, end: int) -> None:
        if self.ends and self.ends[-1] == start and self.families[-1] == family:
            self.ends[-1] = end  # the next series of the family, right after: one copy
            return
        self.starts.append(start)
        self.ends.append(end)
        self.families.append(family)


@dataclass
class RangeIndex:
    """An OpenMetrics file's runs by block range index, and each family's comment lines."""

    comments: list[bytes] = field(default_factory=list)
    ranges: dict[int, RangeRuns] = field(default_factory=dict)


def split_by_block_range(
    openmetrics: Path, folder: Path, span_seconds: int, prefix: str = ""
) -> dict[int, Path]:
    """Write `openmetrics`'s samples into `folder/<prefix><k>.om`, one file per block range k of
    `span_seconds` that holds samples; returns {k: path}."""
    folder.mkdir(parents=True, exist_ok=True)
    with SplitFile(openmetrics, span_seconds) as split:
        written = {k: folder / f"{prefix}{k}.om" for k in split.ranges}
        for k, path in written.items():
            split.write(k, path)
    return written


class SplitFile:
    """An OpenMetrics file, indexed by block range on entering: `ranges` (in time order), and
    `write(k, path)` each range's file when wanted (the input stays mapped until the exit)."""

    def __init__(self, openmetrics: Path, span_seconds: int) -> None:
        self.openmetrics = openmetrics
        self.span_ms = span_seconds * 1000
        self.ranges: list[int] = []
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> SplitFile:
        with contextlib.ExitStack() as stack:
            stream = stack.enter_context(open(self.openmetrics, "rb"))
            if not stream.seek(0, os.SEEK_END):
                raise LayoutError(f"{self.openmetrics} is empty")
            data = stack.enter_context(mmap.mmap(stream.fileno(), 0, access=mmap.ACCESS_READ))
            self._index = index_by_block_range(data, self.span_ms)
            self._view = memoryview(data)
            stack.callback(self._view.release)  # before the mmap closes
            self.ranges = sorted(self._index.ranges)
            self._stack = stack.pop_all()
        return self

    def write(self, k: int, path: Path) -> None:
        _write_range(self._view, self._index.comments, self._index.ranges[k], path)

    def __exit__(self, *exc: object) -> None:
        self._stack.close()


def _write_range(view: memoryview, comments: list[bytes], runs: RangeRuns, path: Path) -> None:
    family = -1
    with open(path, "wb") as out:
        for start, end, run_family in zip(runs.starts, runs.ends, runs.families, strict=True):
            if run_family != family:
                family = run_family
                out.write(comments[family])
            # released even when the write fails (a full disk): a slice left in the traceback
            # would keep the mmap from closing
            with view[start:end] as run:
                out.write(run)
        out.write(EOF)


def index_by_block_range(data: mmap.mmap, span_ms: int) -> RangeIndex:
    """The runs of every block range of `span_ms` in `data`, read a few lines per run."""
    index = RangeIndex()
    size, position = len(data), 0
    while position < size:
        if _at(data, position, b"#"):
            if _at(data, position, EOF):
                break
            start = position  # a family's comment lines, up to its first sample
            while _at(data, position, b"#") and not _at(data, position, EOF):
                position = _next_line(data, position)
            index.comments.append(bytes(data[start:position]))
            continue
        if not index.comments:
            raise LayoutError("samples before any # TYPE line")
        key = _key(data, position, span_ms)
        end = _run_end(data, position, key, lambda at: _key(data, at, span_ms))
        runs = index.ranges.setdefault(key[1], RangeRuns())
        runs.add(len(index.comments) - 1, position, end)
        position = end
    return index


def _at(data: mmap.mmap, position: int, prefix: bytes) -> bool:
    return data[position : position + len(prefix)] == prefix


def _next_line(data: mmap.mmap, position: int) -> int:
    """The start of the line after the one at `position` (the size at the end)."""
    newline = data.find(b"\n", position)
    return len(data) if newline < 0 else newline + 1


def _key(data: mmap.mmap, position: int, span_ms: int) -> RunKey:
    """The run a sample line belongs to: (its series, its block range index)."""
    newline = data.find(b"\n", position)
    line = data[position : newline if newline >= 0 else len(data)]
    head, _, timestamp = line.rpartition(b" ")
    series, space, _ = head.rpartition(b" ")
    if not space or line.startswith(b"#"):
        raise LayoutError(f"not a sample line with a timestamp: {line[:200]!r}")
    milliseconds = int(timestamp) * 1000 if timestamp.isdigit() else int(float(timestamp) * 1000)
    return series, milliseconds // span_ms


def _run_end(data: mmap.mmap, start: int, key: RunKey, key_at: Callable[[int], object]) -> int:
    """The start of the first line after `start` whose key is not `key` (the lines of one key
    are contiguous): probes at doubling distances, then bisects between the last line found in
    the run and the first found past it."""
    size = len(data)
    inside, past, step = start, size, FIRST_PROBE
    while True:
        probe = _next_line(data, inside + step - 1)
        if probe >= size or _at(data, probe, b"#") or key_at(probe) != key:
            past = min(probe, size)
            break
        inside, step = probe, step * 2
    while True:
        after = _next_line(data, inside)
        if after >= past:
            return past
        middle = _next_line(data, (after + past) // 2 - 1)
        probe = middle if middle < past else after
        if _at(data, probe, b"#") or key_at(probe) != key:
            past = probe
        else:
            inside = probe
