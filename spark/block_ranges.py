"""Split an OpenMetrics file into time-disjoint files, one per TSDB block range, for promtool.

promtool 2.42 reads its whole input once per block range it builds (`create-blocks-from
openmetrics`: one parse to find the first and last time, then one per range, keeping only that
range's samples), so a month in one file at the default 2-hour blocks is parsed ~360 times. A
file that holds one range is parsed twice, and the files of different ranges are independent
promtool runs, side by side on as many cores as there are.

Block ranges are promtool's: `[k * span, (k + 1) * span)` in milliseconds since the epoch. The
input must be what the backfill writes (`spark.openmetrics_text`): families one after the other,
each after its comment lines (`# TYPE`, `# HELP`), every series contiguous and in time order,
`# EOF` last. Then the lines of one series in one range are one contiguous run, and the split
only has to find where the runs end: it gallops over the file (probing lines at doubling
distances, then bisecting), so it reads a few lines per run, not every line, and copies each run
whole. Every output file has the same layout: a family's comment lines before its first
sample there, each series contiguous and in time order, `# EOF` last.
"""

from __future__ import annotations

import contextlib
import mmap
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

EOF = b"# EOF\n"
FIRST_PROBE = 1 << 12
"""Bytes past a run's start of the first probe for its end (a few dozen lines)."""

RunKey = tuple[bytes, int]
"""A sample line's series (name and labels, as written) and block range index."""


class LayoutError(ValueError):
    """The input is not laid out as the backfill writes it (a line without a timestamp)."""


@dataclass
class RangeFiles:
    """The files written so far, by block range index; each gets its family's comment lines before
    its first sample of that family. `files` closes them however the split ends."""

    folder: Path
    prefix: str
    files: contextlib.ExitStack
    paths: dict[int, Path] = field(default_factory=dict)
    _open: dict[int, BinaryIO] = field(default_factory=dict)
    _family_of: dict[int, int] = field(default_factory=dict)

    def write(self, index: int, family: int, comments: bytes, run: memoryview) -> None:
        out = self._open.get(index)
        if out is None:
            path = self.folder / f"{self.prefix}{index}.om"
            out = self.files.enter_context(open(path, "wb"))  # noqa: SIM115 (the stack closes it)
            self._open[index] = out
            self.paths[index] = path
        if self._family_of.get(index) != family:
            out.write(comments)
            self._family_of[index] = family
        out.write(run)

    def end(self) -> None:
        for out in self._open.values():
            out.write(EOF)


def split_by_block_range(
    openmetrics: Path, folder: Path, span_seconds: int, prefix: str = ""
) -> dict[int, Path]:
    """Write `openmetrics`'s samples into `folder/<prefix><k>.om`, one file per block range k of
    `span_seconds` that holds samples; returns {k: path}."""
    folder.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as files:
        ranges = RangeFiles(folder, prefix, files)
        with open(openmetrics, "rb") as stream:
            if not stream.seek(0, os.SEEK_END):
                raise LayoutError(f"{openmetrics} is empty")
            with mmap.mmap(stream.fileno(), 0, access=mmap.ACCESS_READ) as data:
                _split(data, span_seconds * 1000, ranges)
        ranges.end()
    return dict(sorted(ranges.paths.items()))


def _split(data: mmap.mmap, span_ms: int, files: RangeFiles) -> None:
    view = memoryview(data)
    try:
        size, position = len(data), 0
        family, comments = 0, b""
        while position < size:
            if _at(data, position, b"#"):
                if _at(data, position, EOF):
                    return
                start = position  # a family's comment lines, up to its first sample
                while _at(data, position, b"#") and not _at(data, position, EOF):
                    position = _next_line(data, position)
                family, comments = family + 1, bytes(data[start:position])
                continue
            key = _key(data, position, span_ms)
            end = _run_end(data, position, key, lambda at: _key(data, at, span_ms))
            # released even when the write fails (a full disk): a slice left in the traceback
            # would keep the mmap from closing
            with view[position:end] as run:
                files.write(key[1], family, comments, run)
            position = end
    finally:
        view.release()


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
