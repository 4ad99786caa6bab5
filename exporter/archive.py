"""ArchiveWriter: one JSON line per poll in hourly files, for the Spark backfill.

Layout: `<dir>/<cluster>/YYYY-MM-DD/HH.jsonl` (UTC). Each line is written with a single append and
flushed; finished hours are gzipped. A crash can at worst leave a partial last line: it is cut off
when the file is opened again, so readers never meet half a record. A write that fails (a full
disk takes part of a line, then refuses the rest) is cut back to the last complete record at once,
or before the next write if even that failed: records are never joined, whatever frees the space.
"""

from __future__ import annotations

import contextlib
import errno
import gzip
import logging
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path

from kvq.contract.archive_record import to_line
from kvq.model.observation import Observation

log = logging.getLogger("kvq.exporter")
_BLOCK = 1 << 20


def hour_path(root: Path, cluster: str, time: float) -> Path:
    moment = datetime.fromtimestamp(time, UTC)
    return root / cluster / moment.strftime("%Y-%m-%d") / f"{moment:%H}.jsonl"


def repair_partial_line(path: Path) -> int:
    """Cut a trailing partial line (a crash, a failed write); return how many bytes were dropped.

    Truncating needs no free space, so this works on a full disk."""
    with open(path, "rb+") as handle:
        size = handle.seek(0, os.SEEK_END)
        keep = size
        while keep > 0:  # back to just after the last newline, block by block (lines can be long)
            start = max(0, keep - _BLOCK)
            handle.seek(start)
            block = handle.read(keep - start)
            if keep == size and block.endswith(b"\n"):
                return 0
            newline = block.rfind(b"\n")
            if newline >= 0:
                keep = start + newline + 1
                break
            keep = start
        handle.truncate(keep)
        return size - keep


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of `data`: a full disk may take part of it before refusing the rest."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        if written == 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        view = view[written:]


def gzip_file(path: Path) -> Path:
    """Compress `path` to `path.gz` atomically, then remove `path`."""
    target = path.with_name(path.name + ".gz")
    partial = path.with_name(path.name + ".gz.partial")
    try:
        with open(path, "rb") as source, gzip.open(partial, "wb") as sink:
            shutil.copyfileobj(source, sink)
    except OSError:
        partial.unlink(missing_ok=True)  # a full disk: keep the plain file, no half .gz
        raise
    os.replace(partial, target)
    path.unlink()
    return target


class ArchiveWriter:
    """Appends observations; rotates hourly; gzips every hour file except the current one."""

    def __init__(self, root: str | Path, cluster: str) -> None:
        self.root = Path(root)
        self.cluster = cluster
        self._path: Path | None = None
        self._fd: int | None = None
        self._torn = False
        """The current file may end in part of a line: cut it before writing the next."""
        self.failures = 0
        """Observations that could not be written (the metric archive_write_failures_total)."""
        (self.root / cluster).mkdir(parents=True, exist_ok=True)

    def append(self, observation: Observation) -> Path:
        """Write one line, or raise OSError with the file still ending in a complete record
        (or marked to be cut back before the next write)."""
        line = to_line(observation, self.cluster).encode()
        try:
            path = hour_path(self.root, self.cluster, observation.time)
            if path != self._path:
                self._open(path)
            if self._torn:
                self._cut_partial_line()
            assert self._fd is not None
            write_all(self._fd, line)
        except OSError:
            self.failures += 1
            self._torn = self._path is not None
            with contextlib.suppress(OSError):  # if this fails too, the next append retries it
                self._cut_partial_line()
            raise
        return path

    def _cut_partial_line(self) -> None:
        if self._path is not None and self._path.exists():
            dropped = repair_partial_line(self._path)
            if dropped:
                log.warning("archive: cut %d bytes of a partly written line", dropped)
        self._torn = False

    def _open(self, path: Path) -> None:
        self.close()
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():
            repair_partial_line(path)
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._path = path
        try:
            self.compress_finished_hours()
        except OSError as exc:  # the plain file stays readable; the next rotation tries again
            log.warning("archive: cannot gzip a finished hour: %s", exc)

    def compress_finished_hours(self) -> list[Path]:
        done = []
        for path in sorted((self.root / self.cluster).glob("*/*.jsonl")):
            if path != self._path:
                repair_partial_line(path)
                done.append(gzip_file(path))
        return done

    def close(self) -> None:
        fd, self._fd, self._path = self._fd, None, None
        if fd is not None:
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
