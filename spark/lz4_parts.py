"""Part files as Spark writes them with `compression=lz4`, read back on the driver.

The backfill's part files are written once by Spark and read once by the driver's concatenation.
Compressed, they are several times smaller, so far fewer fresh page-cache pages to fill (dear
where a virtual machine gives free memory back to its host). LZ4 because Spark's Hadoop writes it
without native libraries and the `lz4` package reads its blocks faster than a disk delivers them.

Hadoop's framing (`org.apache.hadoop.io.compress.BlockCompressorStream`): a file is a sequence
of blocks, each the big-endian int32 length of its uncompressed bytes followed by one or more
chunks, each a big-endian int32 length and one LZ4 block (no frame, no size header) of at most
the codec's buffer size uncompressed; an uncompressed length of 0 ends the stream.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import lz4.block

CODEC = "lz4"
"""Spark's `compression` option for the part files: Hadoop's Lz4Codec."""


class CorruptPart(ValueError):
    """A part file that is not Hadoop-framed LZ4 (truncated, or not written by Spark's Lz4Codec)."""


def part_files(folder: Path) -> list[Path]:
    """The non-empty part files Spark wrote into `folder`, in task order (none: no folder)."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob("part-*") if p.stat().st_size)


def decompressed(path: Path) -> Iterator[bytes]:
    """The uncompressed bytes of the part file at `path`, in pieces of at most a chunk."""
    with open(path, "rb") as stream:
        while header := stream.read(4):
            left = _length(header, path, stream)
            if left == 0:
                return
            while left > 0:
                chunk = _read(stream, _length(stream.read(4), path, stream), path)
                try:
                    data = lz4.block.decompress(chunk, uncompressed_size=left)
                except lz4.block.LZ4BlockError as exc:
                    raise CorruptPart(
                        f"{path}: the LZ4 chunk ending at byte {stream.tell()} does not "
                        f"decompress ({exc})"
                    ) from None
                if not data:
                    raise CorruptPart(f"{path}: an empty LZ4 chunk before byte {stream.tell()}")
                left -= len(data)
                yield data


def text_lines(path: Path) -> list[str]:
    """The text lines of a (small) part file."""
    return b"".join(decompressed(path)).decode("utf-8").splitlines()


def _length(header: bytes, path: Path, stream: BinaryIO) -> int:
    if len(header) < 4:
        raise CorruptPart(f"{path}: truncated at byte {stream.tell()} (in a length field)")
    value = int.from_bytes(header, "big", signed=True)
    if value < 0:
        raise CorruptPart(f"{path}: a negative length ({value}) before byte {stream.tell()}")
    return value


def _read(stream: BinaryIO, size: int, path: Path) -> bytes:
    data = stream.read(size)
    if len(data) < size:
        raise CorruptPart(
            f"{path}: truncated at byte {stream.tell()} ({size - len(data)} bytes of a chunk "
            "missing)"
        )
    return data
