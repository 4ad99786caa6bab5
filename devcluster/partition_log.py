"""One replica's log: magic-2 record batches appended to ``<topic>-<p>/00000000000000000000.log``.

As Kafka's log layer does, an append assigns offsets by rewriting each batch's base offset (the
batch CRC covers only the bytes after it, so the batch stays valid) and writes the bytes as they
came. Opening a log recovers it as Kafka's log recovery does: the next offset follows the last
complete batch, and a torn batch at the end (a crash mid-write) is truncated away.

A write that finds no space raises ``NoSpace`` and leaves the file exactly as it was; the caller
takes the log dir offline, as Kafka's LogDirFailureChannel does after an IOException.
"""

from __future__ import annotations

import errno
import os
import struct
from pathlib import Path

SEGMENT_NAME = "00000000000000000000.log"
# Record batch v2 header: baseOffset int64, batchLength int32, partitionLeaderEpoch int32,
# magic int8, crc uint32, attributes int16, lastOffsetDelta int32, ...
_OFFSET_AND_LENGTH = struct.Struct(">qi")
_LAST_OFFSET_DELTA = struct.Struct(">i")
_LOG_OVERHEAD = 12  # baseOffset + batchLength
_MAGIC_AT = 16
_LAST_OFFSET_DELTA_AT = 23
RECORD_BATCH_OVERHEAD = 61


class CorruptBatch(ValueError):
    """Records Kafka rejects with CORRUPT_MESSAGE (2) or UNSUPPORTED_FOR_MESSAGE_FORMAT (43)."""

    def __init__(self, message: str, code: int = 2):
        super().__init__(message)
        self.code = code


class NoSpace(OSError):
    def __init__(self, path: Path, needed: int, cause: OSError | None = None):
        reason = cause.strerror if cause else os.strerror(errno.ENOSPC)
        super().__init__(errno.ENOSPC, f"{reason}: {needed} bytes for {path}")


def batches(records: bytes | bytearray | memoryview) -> list[tuple[int, int, int]]:
    """(position, size, offset count) of each record batch; CorruptBatch when they do not tile
    the buffer exactly or are not magic 2."""
    out = []
    pos, end = 0, len(records)
    if end == 0:
        raise CorruptBatch("empty records")
    while pos < end:
        if end - pos < RECORD_BATCH_OVERHEAD:
            raise CorruptBatch(f"{end - pos} trailing bytes are shorter than a batch header")
        _, length = _OFFSET_AND_LENGTH.unpack_from(records, pos)
        size = _LOG_OVERHEAD + length
        if length < RECORD_BATCH_OVERHEAD - _LOG_OVERHEAD or pos + size > end:
            raise CorruptBatch(f"batch length {length} at byte {pos} overruns {end} bytes")
        magic = records[pos + _MAGIC_AT]
        if magic != 2:
            raise CorruptBatch(f"record batch magic {magic}: only magic 2 is accepted", 43)
        (delta,) = _LAST_OFFSET_DELTA.unpack_from(records, pos + _LAST_OFFSET_DELTA_AT)
        if delta < 0:
            raise CorruptBatch(f"negative lastOffsetDelta {delta}")
        out.append((pos, size, delta + 1))
        pos += size
    return out


class PartitionLog:
    """The single segment of one replica; ``next_offset`` is its log end offset."""

    def __init__(self, directory: Path):
        self.directory = directory
        self.path = directory / SEGMENT_NAME
        directory.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        self.size, self.next_offset = self._recover()

    def _recover(self) -> tuple[int, int]:
        data = os.pread(self._fd, os.fstat(self._fd).st_size, 0)
        pos, next_offset = 0, 0
        while len(data) - pos >= RECORD_BATCH_OVERHEAD:
            base, length = _OFFSET_AND_LENGTH.unpack_from(data, pos)
            size = _LOG_OVERHEAD + length
            if length <= 0 or pos + size > len(data):
                break
            (delta,) = _LAST_OFFSET_DELTA.unpack_from(data, pos + _LAST_OFFSET_DELTA_AT)
            next_offset = base + delta + 1
            pos += size
        if pos != len(data):
            os.ftruncate(self._fd, pos)  # a torn write at the end: Kafka's recovery drops it
        return pos, next_offset

    def assign_offsets(self, records: bytes | bytearray | memoryview) -> tuple[bytearray, int, int]:
        """The bytes to store (base offsets rewritten from ``next_offset``), the first offset and
        the offset after the last record."""
        found = batches(records)
        out = bytearray(records)
        offset = self.next_offset
        for pos, _, count in found:
            struct.pack_into(">q", out, pos, offset)
            offset += count
        return out, self.next_offset, offset

    def append(self, data: bytes | bytearray, next_offset: int, usable_bytes: int | None) -> None:
        """Write batches already carrying their offsets; ``next_offset`` follows the last one.

        ``usable_bytes`` is the disk's free space when it is virtual (a capacity): a write that
        does not fit fails before writing anything. On a real disk ENOSPC truncates the partial
        write away. Either way the log is as it was and ``NoSpace`` is raised."""
        if usable_bytes is not None and len(data) > usable_bytes:
            raise NoSpace(self.path, len(data))
        try:
            written = 0
            view = memoryview(data)
            while written < len(data):
                written += os.pwrite(self._fd, view[written:], self.size + written)
        except OSError as exc:
            os.ftruncate(self._fd, self.size)
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                raise NoSpace(self.path, len(data), exc) from exc
            raise
        self.size += len(data)
        self.next_offset = next_offset

    def read_from(self, position: int) -> bytes:
        return os.pread(self._fd, self.size - position, position)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
