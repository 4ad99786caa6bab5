"""A broker log dir: a real directory whose size Kafka would report through DescribeLogDirs v4.

Total and usable bytes are measured the way Kafka measures them (Java's FileStore: total =
f_blocks * f_frsize, usable = f_bavail * f_frsize), so a tmpfs or loop mount used as a log dir
reports its real numbers. A *virtual capacity* turns the directory into a small disk of its own:
total = capacity, usable = capacity minus the bytes of the files under the directory. A pinned
usable value overrides the measurement (never above the
total). ``fill`` writes real bytes, so both modes see them.

Partition directories (``<topic>-<partition>``) found in the log dir are reported as Kafka reports
hosted replicas, with the size Kafka gives (``UnifiedLog.size``): the bytes of the ``.log``
segments alone, not the index files, checkpoints or partition.metadata beside them.
"""

from __future__ import annotations

import errno
import os
import re
from dataclasses import dataclass
from pathlib import Path

FILL_PREFIX = "devcluster-fill-"
SEGMENT_SUFFIX = ".log"
_CHUNK = b"\0" * (1 << 20)
_PARTITION_DIR = re.compile(r"^(?P<topic>[A-Za-z0-9._-]+)-(?P<partition>\d+)$")


class DiskFull(OSError):
    def __init__(self, written: int, cause: OSError):
        super().__init__(cause.errno, f"{cause.strerror} after writing {written} bytes")
        self.written = written


@dataclass
class Space:
    total_bytes: int
    usable_bytes: int


@dataclass
class LogDir:
    path: Path
    capacity_bytes: int | None = None
    pinned_usable_bytes: int | None = None
    offline_reason: str | None = None
    """Set when a write failed (Kafka's LogDirFailureChannel): the dir is offline until the control
    API brings it back (``online`` or ``clear``)."""

    def __post_init__(self) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        self.default_capacity_bytes = self.capacity_bytes

    def space(self) -> Space:
        total, usable = self._measure()
        if self.pinned_usable_bytes is not None:
            usable = min(self.pinned_usable_bytes, total)
        return Space(total, usable)

    def _measure(self) -> tuple[int, int]:
        """(total, usable) of the disk itself: the virtual one, or the file system's."""
        if self.capacity_bytes is not None:
            return self.capacity_bytes, max(0, self.capacity_bytes - tree_size(self.path))
        st = os.statvfs(self.path)
        return st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize

    def virtual_usable_bytes(self) -> int | None:
        """Free bytes of a virtual disk (a capacity), None on a real one (the write finds out)."""
        if self.capacity_bytes is None:
            return None
        return max(0, self.capacity_bytes - tree_size(self.path))

    def fill(self, nbytes: int) -> Path:
        """Write a real file of ``nbytes`` bytes, as a disk of this size takes them: once the
        usable bytes are gone (virtual capacity, or the file system's ``f_bavail``, never root's
        reserve) the disk is full; what fit stays and ``DiskFull`` is raised."""
        goal = min(nbytes, self._measure()[1])
        target = self._new_fill_file()
        written = 0
        error = None
        fd = os.open(target, os.O_WRONLY | os.O_APPEND)
        try:
            view = memoryview(_CHUNK)
            while written < goal:
                try:
                    written += os.write(fd, view[: min(len(_CHUNK), goal - written)])
                except OSError as exc:  # ENOSPC before f_bavail: someone else wrote meanwhile
                    error = exc
                    break
        finally:
            os.close(fd)
        if written < nbytes:
            if written == 0:
                target.unlink(missing_ok=True)
            raise DiskFull(written, error or OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)))
        return target

    def _new_fill_file(self) -> Path:
        """Create the next ``devcluster-fill-NNNNNN.bin`` (concurrent fills get distinct files)."""
        existing = sorted(self.path.glob(FILL_PREFIX + "*"))
        seq = int(existing[-1].name[len(FILL_PREFIX) :].split(".")[0]) + 1 if existing else 0
        while True:
            target = self.path / f"{FILL_PREFIX}{seq:06d}.bin"
            try:
                os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
                return target
            except FileExistsError:
                seq += 1

    def clear(self) -> None:
        """Back to start-up state: no fill files, unpinned, start-up capacity, online."""
        for f in self.path.glob(FILL_PREFIX + "*"):
            f.unlink(missing_ok=True)
        self.pinned_usable_bytes = None
        self.capacity_bytes = self.default_capacity_bytes
        self.offline_reason = None

    def partitions(self) -> list[tuple[str, int, int]]:
        """(topic, partition, bytes of its segments) of every partition directory, sorted."""
        out = []
        with os.scandir(self.path) as entries:
            for entry in entries:
                m = _PARTITION_DIR.match(entry.name)
                if m and entry.is_dir(follow_symlinks=False):
                    try:
                        size = segments_size(Path(entry.path))
                    except FileNotFoundError:  # the partition was deleted meanwhile
                        continue
                    out.append((m["topic"], int(m["partition"]), size))
        return sorted(out)


def segments_size(partition: Path) -> int:
    """Bytes of a partition directory's ``.log`` segments (Kafka's UnifiedLog.size); a segment
    deleted while it runs (retention) is skipped, the directory itself missing is an error."""
    total = 0
    with os.scandir(partition) as entries:
        for entry in entries:
            if entry.name.endswith(SEGMENT_SUFFIX):
                try:
                    if entry.is_file(follow_symlinks=False):
                        total += entry.stat(follow_symlinks=False).st_size
                except FileNotFoundError:
                    continue
    return total


def tree_size(path: Path) -> int:
    """Bytes of the regular files under ``path`` (symlinks not followed). Files and directories
    removed while it runs (segments deleted, a fill cleared) are skipped, not an error; ``path``
    itself missing is one."""
    total = 0
    stack = [path]
    while stack:
        directory = stack.pop()
        try:
            entries = os.scandir(directory)
        except FileNotFoundError:
            if directory == path:
                raise
            continue
        with entries:
            for entry in entries:
                try:
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(Path(entry.path))
                    elif entry.is_file(follow_symlinks=False):
                        total += entry.stat(follow_symlinks=False).st_size
                except FileNotFoundError:
                    continue
    return total
