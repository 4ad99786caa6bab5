"""A big output file written around the page cache (`O_DIRECT`), in aligned blocks.

The backfill writes gigabytes once and never reads them back (promtool does, later). Written
through the page cache, they pile up as dirty pages behind the gigabytes of part files Spark just
wrote, and the kernel throttles the writer to what its write-back manages; written directly,
they go to the disk at its own speed. Where the file system refuses `O_DIRECT` (tmpfs, some
network file systems) or the platform lacks it, the file is written through the cache as usual.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import mmap
import os
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from types import TracebackType

BLOCK = 4096
"""Direct writes must be multiples of the device's logical block (512 or 4096) in size and
memory alignment: 4096 covers both."""
BUFFER = 16 << 20


class UncachedFile:
    """`write` bytes into `path`; `close` writes the unaligned tail.

    Two buffers: a thread writes the full one (the write releases the GIL) while the caller
    fills the other, so reading the parts and writing the file overlap."""

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
        self._buffers = [mmap.mmap(-1, BUFFER) for _ in range(2)]  # page-aligned
        self._views = [memoryview(b) for b in self._buffers]
        self._filling = 0
        self._used = 0
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="uncached-file")
        self._pending: Future[None] | None = None

    def write(self, data: bytes) -> None:
        left = memoryview(data)  # slices without copies
        while left:
            taken = left[: BUFFER - self._used]
            self._views[self._filling][self._used : self._used + len(taken)] = taken
            self._used += len(taken)
            left = left[len(taken) :]
            if self._used == BUFFER:
                self._hand_over()

    def close(self) -> None:
        """Write what is left and flush the file to disk (it is renamed into place next)."""
        if self._fd < 0:
            return
        try:
            self._wait()
            view, used = self._views[self._filling], self._used
            aligned = used - used % BLOCK
            self._write(view[:aligned])
            self._cached()
            self._write(view[aligned:used])
            os.fsync(self._fd)
        finally:
            self._release()

    def _release(self) -> None:
        """Close the file and free the buffers, written or not (after a failure: not)."""
        if self._fd < 0:
            return
        self._writer.shutdown(wait=True)  # a write under way still uses a buffer
        os.close(self._fd)
        self._fd = -1
        for view, buffer in zip(self._views, self._buffers, strict=True):
            view.release()
            # A failed write's traceback still holds a slice of it ("cannot close: exported
            # pointers exist"): the buffer is then freed with the traceback instead.
            with contextlib.suppress(BufferError):
                buffer.close()

    def _hand_over(self) -> None:
        """Queue the full buffer for writing and go on filling the other one."""
        self._wait()  # the other buffer's write: done before it is filled again
        self._pending = self._writer.submit(self._write, self._views[self._filling])
        self._filling ^= 1
        self._used = 0

    def _wait(self) -> None:
        if self._pending is not None:
            pending, self._pending = self._pending, None
            pending.result()

    def _write(self, data: memoryview) -> None:
        done = 0
        while done < len(data):
            try:
                done += os.write(self._fd, data[done:])
            except OSError as exc:  # some file systems accept O_DIRECT at open, not at write
                if exc.errno != errno.EINVAL or not self.direct:
                    raise
                self._cached()

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
        if error is None:
            self.close()
        else:
            self._release()  # the file is removed: no point writing its tail
