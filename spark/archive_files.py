"""Which files of an archive directory hold observations (*.jsonl and *.jsonl.gz, recursively),
checked readable, and which of its .gz files are not whole gzip data."""

from __future__ import annotations

import gzip
import os
import zlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, TextIO

SUFFIXES = (".jsonl", ".jsonl.gz")


@dataclass(frozen=True, slots=True)
class BadLine:
    """An archive line that is not a valid record: where it is and why."""

    file: str
    line: int
    reason: str


class ArchiveError(ValueError):
    """The archive cannot be used as given; the message names the path and why."""


class ArchiveNotFound(ArchiveError):
    """The archive directory is missing or holds no archive files."""


class ArchiveUnreadable(ArchiveError):
    """A folder or archive file under the archive directory cannot be read by this user."""


@dataclass(frozen=True, slots=True)
class PathProblem:
    """A file or folder of the archive that cannot be used, and why (the OS's words)."""

    path: Path
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


MAX_PROBLEMS_NAMED = 3


def one_line(what: str, problems: list[PathProblem], advice: str) -> str:
    """`what PATH: reason`, the next few problems, then `advice`: one line, however many."""
    first, rest = problems[0], problems[1:]
    text = f"{what} {first}"
    if rest:
        text += f"; and {len(rest)} more: " + "; ".join(str(p) for p in rest[:MAX_PROBLEMS_NAMED])
        if len(rest) > MAX_PROBLEMS_NAMED:
            text += f"; ... ({len(rest) - MAX_PROBLEMS_NAMED} not shown)"
    return f"{text}; {advice}"


def archive_files(archive_dir: str | Path) -> list[Path]:
    """Every archive file under `archive_dir`, sorted by path (absolute paths).

    Every folder below it must be listable and every archive file readable: a part of the archive
    skipped without a word would be missing history (raises ArchiveUnreadable naming them)."""
    root = Path(archive_dir)
    if not root.is_dir():
        raise ArchiveNotFound(f"archive directory {str(root)!r} does not exist or is not a folder")
    files: list[Path] = []
    unreadable: list[PathProblem] = []
    _collect(root, files, unreadable)
    if unreadable:
        raise ArchiveUnreadable(
            one_line(
                "unreadable archive",
                unreadable,
                "every folder and archive file under the archive directory must be readable by "
                "the user running the backfill",
            )
        )
    if not files:
        raise ArchiveNotFound(
            f"no archive files (*.jsonl or *.jsonl.gz, searched recursively) under {str(root)!r}"
        )
    return sorted(files)


def _collect(folder: Path, files: list[Path], unreadable: list[PathProblem]) -> None:
    """Add the archive files below `folder` to `files`, what cannot be read to `unreadable`.

    Symbolic links to folders are not followed (as `Path.rglob`: no loops); links to files are."""
    try:
        with os.scandir(folder) as listing:
            entries = sorted(listing, key=lambda e: e.name)
    except OSError as exc:
        unreadable.append(PathProblem(folder, f"folder cannot be listed: {exc.strerror}"))
        return
    for entry in entries:
        path = Path(entry.path)
        if entry.is_dir(follow_symlinks=False):
            _collect(path, files, unreadable)
        elif entry.name.endswith(SUFFIXES) and entry.is_file():
            try:
                os.close(os.open(path, os.O_RDONLY))
            except OSError as exc:
                unreadable.append(PathProblem(path, f"file cannot be read: {exc.strerror}"))
                continue
            files.append(path.resolve())


def open_text(path: Path) -> TextIO:
    """Open an archive file as text, gunzipping `.gz` files."""
    if path.name.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")  # noqa: SIM115 - the caller closes it


def numbered_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number from 1, line) of one archive file; blank lines hold nothing and are skipped."""
    with open_text(path) as stream:
        for number, line in enumerate(stream, start=1):
            if line.strip():
                yield number, line


GZIP_MAGIC = b"\x1f\x8b"
SCAN_CHUNK = 1 << 20
INFLATE_LIMIT = 16 << 20
"""Bytes inflated per call while checking: a small file that inflates hugely costs no memory."""


def damaged_files(files: list[Path], workers: int = 1) -> list[PathProblem]:
    """The `.gz` files of `files` that are not whole gzip data, and why (in the order of
    `files`); [] when all are sound.

    Every member is inflated (the data is thrown away): a truncated file, a text file named
    `.gz` or bytes after the last member would otherwise fail Spark's read task with a Java stack
    trace (Hadoop's codec refuses any of them, zero padding included). `workers` files are
    inflated at a time (zlib inflates outside the GIL)."""
    gzipped = [path for path in files if path.name.endswith(".gz")]
    with ThreadPoolExecutor(workers, thread_name_prefix="kvq-gzip-check") as pool:
        found = list(pool.map(gzip_problem, gzipped))
    return [
        PathProblem(path, problem)
        for path, problem in zip(gzipped, found, strict=True)
        if problem is not None
    ]


def gzip_problem(path: Path) -> str | None:
    """Why `path` is not one or more whole gzip members, or None when it is."""
    try:
        with open(path, "rb") as stream:
            return _gzip_stream_problem(stream)
    except OSError as exc:
        return f"cannot be read: {exc.strerror}"


def _gzip_stream_problem(stream: BinaryIO) -> str | None:
    data = stream.read(SCAN_CHUNK)
    offset = len(data)  # the file position after `data`
    if not data:
        return None  # empty: no lines (as Python's gzip and Hadoop's codec read it)
    if not data.startswith(GZIP_MAGIC):
        return "not gzip data (no gzip header; a plain file must be named *.jsonl)"
    decompressor = zlib.decompressobj(wbits=31)  # one gzip member
    while True:
        try:
            _inflate(decompressor, data)
        except zlib.error as exc:
            return f"damaged gzip data ({exc})"
        if decompressor.eof:
            rest = decompressor.unused_data
            rest_at = offset - len(rest)
            if len(rest) < len(GZIP_MAGIC):
                more = stream.read(SCAN_CHUNK)
                rest, offset = rest + more, offset + len(more)
            if not rest:
                return None
            if not rest.startswith(GZIP_MAGIC):
                trailing = offset - rest_at + len(stream.read())
                return f"{trailing} bytes of non-gzip data after the compressed data"
            decompressor = zlib.decompressobj(wbits=31)
            data = rest
            continue
        data = stream.read(SCAN_CHUNK)
        if not data:
            return f"truncated: its {offset} bytes end inside compressed data"
        offset += len(data)


def _inflate(decompressor, data: bytes) -> None:
    """Feed `data` to the decompressor, up to the end of its member, output thrown away."""
    decompressor.decompress(data, INFLATE_LIMIT)
    while decompressor.unconsumed_tail and not decompressor.eof:
        decompressor.decompress(decompressor.unconsumed_tail, INFLATE_LIMIT)
