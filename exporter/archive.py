"""ArchiveWriter: one JSON line per poll in hourly files, for the Spark backfill.

Layout: `<dir>/<cluster>/YYYY-MM-DD/HH.jsonl` (UTC). Each line is written with a single append and
flushed; finished hours are gzipped. A crash can at worst leave a partial last line: it is cut off
when the file is opened again, so readers never meet half a record.
"""

from __future__ import annotations

import gzip
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path

from kvq.contract.archive_record import to_line
from kvq.model.observation import Observation


def hour_path(root: Path, cluster: str, time: float) -> Path:
    moment = datetime.fromtimestamp(time, UTC)
    return root / cluster / moment.strftime("%Y-%m-%d") / f"{moment:%H}.jsonl"


def repair_partial_line(path: Path) -> int:
    """Cut a trailing partial line left by a crash; return how many bytes were dropped."""
    size = path.stat().st_size
    if size == 0:
        return 0
    with open(path, "rb+") as handle:
        handle.seek(-1, os.SEEK_END)
        if handle.read(1) == b"\n":
            return 0
        block = min(size, 1 << 20)
        handle.seek(size - block)
        tail = handle.read(block)
        keep = size - block + tail.rfind(b"\n") + 1
        handle.truncate(keep)
        return size - keep


def gzip_file(path: Path) -> Path:
    """Compress `path` to `path.gz` atomically, then remove `path`."""
    target = path.with_name(path.name + ".gz")
    partial = path.with_name(path.name + ".gz.partial")
    with open(path, "rb") as source, gzip.open(partial, "wb") as sink:
        shutil.copyfileobj(source, sink)
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
        (self.root / cluster).mkdir(parents=True, exist_ok=True)

    def append(self, observation: Observation) -> Path:
        path = hour_path(self.root, self.cluster, observation.time)
        if path != self._path:
            self._open(path)
        os.write(self._fd, to_line(observation, self.cluster).encode())
        return path

    def _open(self, path: Path) -> None:
        self.close()
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():
            repair_partial_line(path)
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._path = path
        self.compress_finished_hours()

    def compress_finished_hours(self) -> list[Path]:
        done = []
        for path in sorted((self.root / self.cluster).glob("*/*.jsonl")):
            if path != self._path:
                repair_partial_line(path)
                done.append(gzip_file(path))
        return done

    def close(self) -> None:
        if self._fd is not None:
            os.fsync(self._fd)
            os.close(self._fd)
            self._fd = None
