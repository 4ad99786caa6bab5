"""Part files written by Spark with compression=lz4 read back byte for byte on the driver, and a
damaged one named instead of silently shortening the backfill."""

from __future__ import annotations

import re
from pathlib import Path

import lz4.block
import pytest

from spark.lz4_parts import CODEC, CorruptPart, decompressed, text_lines


def spark_parts(spark, folder: Path, texts: list[str]) -> list[Path]:
    """`texts` as one LZ4 part file, written by Spark's own text writer."""
    frame = spark.createDataFrame([(t,) for t in texts], "text string").coalesce(1)
    frame.write.option("compression", CODEC).text(str(folder))
    return sorted(folder.glob("part-*"))


def framed(*blocks: list[bytes]) -> bytes:
    """Hadoop's block framing around LZ4 chunks: each block its length, then its chunks."""
    out = b""
    for chunks in blocks:
        out += sum(len(c) for c in chunks).to_bytes(4, "big")
        for chunk in chunks:
            packed = lz4.block.compress(chunk, store_size=False)
            out += len(packed).to_bytes(4, "big") + packed
    return out


def test_what_spark_wrote_over_many_blocks_comes_back_whole(spark, tmp_path):
    texts = [
        f'kvq_log_dir_total_bytes{{broker_id="{n % 97}"}} {n * 7919} {n}' for n in range(60_000)
    ]
    (part,) = spark_parts(spark, tmp_path / "parts", texts)
    assert part.name.endswith(".lz4")
    expected = "".join(t + "\n" for t in texts).encode()
    assert part.stat().st_size < len(expected) / 3  # compressed, over several 256 KiB blocks
    assert b"".join(decompressed(part)) == expected
    assert text_lines(part) == texts


def test_a_block_of_several_chunks_and_the_end_marker(tmp_path):
    part = tmp_path / "part-0.lz4"
    part.write_bytes(framed([b"a\n" * 1000, b"b\n" * 10], [b"c\n"]) + (0).to_bytes(4, "big"))
    assert list(decompressed(part)) == [b"a\n" * 1000, b"b\n" * 10, b"c\n"]


def test_an_empty_file_has_no_lines(tmp_path):
    part = tmp_path / "part-0.lz4"
    part.write_bytes(b"")
    assert text_lines(part) == []


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda data: data[:-3], "3 bytes of a chunk missing"),
        (lambda data: data[:2], "truncated at byte 2 (in a length field)"),
        (lambda data: data[:10] + b"\xff" * (len(data) - 10), "does not decompress"),
        (lambda data: b"\xff\xff\xff\xff" + data[4:], "a negative length (-1)"),
    ],
)
def test_a_damaged_part_is_named_not_shortened(tmp_path, damage, message):
    part = tmp_path / "part-7.lz4"
    part.write_bytes(damage(framed([b"x 1 2\n" * 500])))
    with pytest.raises(CorruptPart, match=re.escape(message)) as raised:
        list(decompressed(part))
    assert str(part) in str(raised.value)
