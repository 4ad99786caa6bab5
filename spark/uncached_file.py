"""A big output file written around the page cache (`O_DIRECT`), in aligned blocks.

The backfill writes gigabytes once and never reads them back (promtool does, later). Written
through the page cache, they pile up as dirty pages behind the gigabytes of part files Spark just
wrote, and the kernel throttles the writer to what its write-back manages (10M rows here: 5 GB
in 23 s through the cache, 6 s direct). Where the file system refuses `O_DIRECT` (tmpfs, some
network file systems) or the platform lacks it, the file is written through the cache as usual.
"""

from __future__ import annotations

import errno
import fcntl
import mmap
import os
from pathlib import Path
from types import TracebackType

BLOCK = 4096
"""Direct writes must be multiples of the device's logical block (512 or 4096) in size and
memory alignment: 4096 covers both."""
BUFFER = 16 << 20


class UncachedFile:
    """`write` bytes, or `copy_from` whole files, into `path`; `close` writes the unaligned tail."""

    def __init__(self, path: Path) -> None:
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
        direct = getattr(os, "O_DIRECT", 0)
        try:
            self._fd = os.open(path, flags | direct, 0o644)
            self.direct = bool(direct)
        except OSError as exc:
            if exc.errno != errno.EINVAL:
                raise
            self._fd = os.open(path, flags, 0o644)
            self.direct = False
        self._buffer = mmap.mmap(-1, BUFFER)  # page-aligned
        self._view = memoryview(self._buffer)
        self._used = 0

    def write(self, data: bytes) -> None:
        while data:
            room = BUFFER - self._used
            taken = data[:room]
            self._view[self._used : self._used + len(taken)] = taken
            self._used += len(taken)
            data = data[room:]
            if self._used == BUFFER:
                self._flush(BUFFER)

    def copy_from(self, path: Path) -> int:
        """Append the whole file at `path`; returns the number of lines (newlines) copied."""
        lines = 0
        with open(path, "rb", buffering=0) as source:
            while got := source.readinto(self._view[self._used :]):
                lines += self._buffer[self._used : self._used + got].count(b"\n")
                self._used += got
                if self._used == BUFFER:
                    self._flush(BUFFER)
        return lines

    def close(self) -> None:
        if self._fd < 0:
            return
        try:
            aligned = self._used - self._used % BLOCK
            self._flush(aligned)
            self._cached()
            self._flush(self._used)
        finally:
            os.close(self._fd)
            self._fd = -1
            self._view.release()
            self._buffer.close()

    def _flush(self, end: int) -> None:
        """Write buffer[:end] and keep what follows at the start of the buffer."""
        done = 0
        while done < end:
            try:
                done += os.write(self._fd, self._view[done:end])
            except OSError as exc:  # some file systems accept O_DIRECT at open, not at write
                if exc.errno != errno.EINVAL or not self.direct:
                    raise
                self._cached()
        rest = self._used - end
        self._view[:rest] = self._view[end : self._used]
        self._used = rest

    def _cached(self) -> None:
        """From here on, through the page cache (the tail is not a whole block)."""
        if self.direct:
            flags = fcntl.fcntl(self._fd, fcntl.F_GETFL)
            fcntl.fcntl(self._fd, fcntl.F_SETFL, flags & ~os.O_DIRECT)
            self.direct = False

    def __enter__(self) -> UncachedFile:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()
