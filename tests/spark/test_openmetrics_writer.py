"""The driver's concatenation into `<cluster>.om`: whatever stops it, the file is absent, a
previous run's whole file, or this run's whole file; never a partial one or a temp left over."""

from __future__ import annotations

import threading

import pytest

from kvq.contract.metric_families import backfilled
from kvq.model.limits import MinAvailableRatio
from spark.lz4_parts import CorruptPart
from spark.openmetrics_text import header_lines
from spark.openmetrics_writer import concatenate, pending_path
from tests.spark.test_lz4_parts import framed

CATALOG = list(backfilled(MinAvailableRatio(0.05)))


def failing_lines(family):
    """The driver's lines of the first family, then a failure (a full disk, an interrupt)."""
    if family is not CATALOG[0]:
        raise KeyboardInterrupt  # what SIGINT and SIGTERM raise (kvq.interrupts)
    return [f"{family.name} 1 1700000000\n"]


def test_a_stopped_concatenation_keeps_the_previous_file_and_leaves_no_temp(tmp_path):
    previous = "# previous run's whole file\n# EOF\n"
    path = tmp_path / "kafka.om"
    path.write_text(previous)
    with pytest.raises(KeyboardInterrupt):
        concatenate(tmp_path / "parts", 0, CATALOG, path, failing_lines)
    assert path.read_text() == previous
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kafka.om"]


def test_a_complete_file_replaces_the_previous_one(tmp_path):
    path = tmp_path / "kafka.om"
    path.write_text("# previous\n")
    count = concatenate(tmp_path / "parts", 0, CATALOG, path, lambda family: [])
    assert count == 0 and path.read_text().endswith("# EOF\n")
    assert not pending_path(path).exists()


def write_parts(folder, texts: list[bytes]) -> None:
    """One Hadoop-framed LZ4 part file per text, in task order, as Spark's writer names them."""
    folder.mkdir(parents=True)
    for task, text in enumerate(texts):
        chunks = [text[i : i + CHUNK] for i in range(0, len(text), CHUNK)]
        (folder / f"part-{task:05d}-x.txt.lz4").write_bytes(framed(chunks))


CHUNK = 256 << 10  # Hadoop's Lz4Codec buffer


def part_reader_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("kvq-part-reader")]


def test_parts_are_copied_whole_in_task_order_then_removed(tmp_path):
    """Several megabytes per family (more than the reading thread reads ahead), families from the
    parts and from the driver in catalog order; each part gone once copied."""
    parts = tmp_path / "parts"
    first = [f'a{{t="{task}"}} 1 1\n'.encode() for task in range(3)]
    big = [
        b"".join(f'b{{t="{task}"}} {n} {n}\n'.encode() for n in range(150_000)) for task in range(3)
    ]
    write_parts(parts / "cluster_index=0" / "family=0", first)
    write_parts(parts / "cluster_index=0" / "family=2", big)
    path = tmp_path / "kafka.om"

    def driver_lines(family):
        if family is not CATALOG[1]:
            return None
        return [f"{family.sample_name} {n} {n}\n" for n in range(10_000)]

    count = concatenate(parts, 0, CATALOG, path, driver_lines)
    expected = b"".join(
        [
            header_lines(CATALOG[0]).encode(),
            *first,
            header_lines(CATALOG[1]).encode(),
            *(f"{CATALOG[1].sample_name} {n} {n}\n".encode() for n in range(10_000)),
            header_lines(CATALOG[2]).encode(),
            *big,
            b"# EOF\n",
        ]
    )
    assert count == 10_000
    assert path.read_bytes() == expected
    assert not list(parts.rglob("part-*"))
    assert not part_reader_threads()


def test_a_full_disk_while_copying_parts_stops_the_reading_thread(tmp_path, mount_tmpfs):
    """The output fills its disk mid-copy: the error reaches the caller, the thread reading the
    parts ahead is stopped and joined, and no partial file is left."""
    parts = tmp_path / "parts"
    text = b"".join(f'b{{t="x"}} {n} {n}\n'.encode() for n in range(400_000))  # 10 MB
    write_parts(parts / "cluster_index=0" / "family=0", [text, text, text])
    disk = tmp_path / "disk"
    mount_tmpfs(disk, size="4m")
    with pytest.raises(OSError, match="No space left"):
        concatenate(parts, 0, CATALOG, disk / "kafka.om", lambda family: None)
    assert not part_reader_threads()
    assert list(disk.iterdir()) == []


def test_a_damaged_part_is_raised_by_the_copy_not_lost_in_the_thread(tmp_path):
    parts = tmp_path / "parts"
    text = b"".join(f'b{{t="x"}} {n} {n}\n'.encode() for n in range(100_000))
    write_parts(parts / "cluster_index=0" / "family=0", [text, text])
    damaged = sorted((parts / "cluster_index=0" / "family=0").iterdir())[-1]
    damaged.write_bytes(damaged.read_bytes()[:-5])
    path = tmp_path / "kafka.om"
    with pytest.raises(CorruptPart, match="truncated"):
        concatenate(parts, 0, CATALOG, path, lambda family: None)
    assert not part_reader_threads()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["parts"]
