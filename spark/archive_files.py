"""Which files of an archive directory hold observations: *.jsonl and *.jsonl.gz, recursively."""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

SUFFIXES = (".jsonl", ".jsonl.gz")


@dataclass(frozen=True, slots=True)
class BadLine:
    """An archive line that is not a valid record: where it is and why."""

    file: str
    line: int
    reason: str


class ArchiveNotFound(ValueError):
    """The archive directory is missing or holds no archive files."""


def archive_files(archive_dir: str | Path) -> list[Path]:
    """Every archive file under `archive_dir`, sorted by path (absolute paths)."""
    root = Path(archive_dir)
    if not root.is_dir():
        raise ArchiveNotFound(f"archive directory {str(root)!r} does not exist or is not a folder")
    files = sorted(
        p.resolve() for p in root.rglob("*") if p.is_file() and p.name.endswith(SUFFIXES)
    )
    if not files:
        raise ArchiveNotFound(
            f"no archive files (*.jsonl or *.jsonl.gz, searched recursively) under {str(root)!r}"
        )
    return files


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
