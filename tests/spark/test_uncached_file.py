"""The backfill's output file, written around the page cache: the same bytes as a plain write,
whatever the sizes, and a plain write where the file system refuses direct I/O."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from spark.uncached_file import BLOCK, BUFFER, UncachedFile


def part(lines: int, width: int) -> bytes:
    return b"".join(b"%0*d\n" % (width - 1, n) for n in range(lines))


@pytest.mark.parametrize(
    "sizes",
    [
        [],  # nothing but the headers
        [1],  # less than a block
        [BLOCK // 8],  # exactly one block
        [BUFFER // 16 + 3],  # more than the buffer, and a tail
        [7, BUFFER // 16, 1, BUFFER // 8 + 5],  # parts across buffer boundaries
    ],
)
def test_the_same_bytes_as_a_plain_write(tmp_path, sizes):
    parts = [part(n, 16) for n in sizes]
    out = tmp_path / "out.om"
    with UncachedFile(out) as file:
        file.write(b"# TYPE x gauge\n")
        for data in parts:
            file.write(data)
        file.write(b"# EOF\n")
    assert out.read_bytes() == b"# TYPE x gauge\n" + b"".join(parts) + b"# EOF\n"


def accepts_direct_io(folder: Path) -> bool:
    try:
        os.close(os.open(folder / "probe", os.O_WRONLY | os.O_CREAT | os.O_DIRECT, 0o644))
    except (AttributeError, OSError):
        return False
    return True


def test_direct_where_the_file_system_allows_it(tmp_path):
    with UncachedFile(tmp_path / "out") as file:
        assert file.direct == accepts_direct_io(tmp_path)
        file.write(b"x" * (BLOCK + 1))
    assert (tmp_path / "out").read_bytes() == b"x" * (BLOCK + 1)


def test_through_the_cache_where_direct_io_is_refused(tmp_path, monkeypatch):
    """Some file systems refuse O_DIRECT at open with EINVAL (tmpfs before Linux 6.6, some
    network and FUSE file systems); none here does, so the refusal is simulated."""
    real_open = os.open

    def refusing(path, flags, *args):
        if flags & getattr(os, "O_DIRECT", 0):
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_open(path, flags, *args)

    monkeypatch.setattr(os, "open", refusing)
    big = part(BUFFER // 16 + 9, 16)
    with UncachedFile(tmp_path / "out.om") as file:
        assert not file.direct
        file.write(big)
    assert (tmp_path / "out.om").read_bytes() == big


def test_an_unwritable_place_is_an_error_not_a_silent_loss(tmp_path):
    with pytest.raises(FileNotFoundError):
        UncachedFile(tmp_path / "missing" / "out.om")


def test_a_full_disk_raises_its_write_error_only(tmp_path, mount_tmpfs):
    """ENOSPC, not a BufferError from freeing a buffer the failed write's traceback still holds."""
    mount_tmpfs(tmp_path / "small", "64k")
    with pytest.raises(OSError) as failure, UncachedFile(tmp_path / "small" / "out") as file:
        file.write(part(BUFFER // 8, 16))  # two buffers' worth
    assert failure.value.errno == errno.ENOSPC
