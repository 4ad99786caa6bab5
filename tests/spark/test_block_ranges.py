"""The OpenMetrics file split by block range for promtool: every sample in the file of its range,
each file laid out as promtool needs it (the galloping search for the ends of the runs checked
against a line-by-line split of the same text)."""

from __future__ import annotations

import random

import pytest

from spark.block_ranges import split_by_block_range
from spark.openmetrics_text import read_openmetrics
from tests.spark.test_prometheus import check_layout

HOUR = 3600
START = 1_763_596_800  # 2025-11-20T00:00:00Z, a multiple of 18 h


def history(rng: random.Random, families: int, hours: int) -> str:
    """Families of series over `hours`, as the backfill writes them: some series every minute
    for the whole span (runs of hundreds of lines), some with gaps or only a few samples, label
    values with spaces and escaped quotes."""
    lines = []
    for f in range(families):
        name = f"kafka_volume_quota_family_{chr(ord('a') + f)}"
        lines += [f"# TYPE {name} gauge", f"# HELP {name} Family {f}."]
        for s in range(rng.randint(1, 6)):
            labels = f'{{cluster="kafka",log_dir="/data {s}",note="a \\"q\\" {f}"}}'
            step = rng.choice([60, 60, 300, 7 * HOUR])
            t = START + rng.randrange(0, hours * HOUR // 2)
            end = rng.choice([t + step, START + hours * HOUR])
            while t < end:
                lines.append(f"{name}{labels} {rng.choice(['0', '1', '0.25'])} {t}")
                t += step * rng.choice([1, 1, 1, 40])
    return "\n".join([*lines, "# EOF", ""])


def split_line_by_line(text: str, span: int) -> dict[int, str]:
    """The same split, one line at a time: what the galloping one must equal."""
    out: dict[int, list[str]] = {}
    family_of: dict[int, int] = {}
    comments: list[str] = []
    family, after_sample = 0, True
    for line in text.splitlines(keepends=True):
        if line == "# EOF\n":
            break
        if line.startswith("#"):
            if after_sample:  # a new family's comment lines
                comments, family, after_sample = [], family + 1, False
            comments.append(line)
            continue
        after_sample = True
        index = int(line.rsplit(" ", 1)[1]) // span
        if family_of.get(index) != family:
            out.setdefault(index, []).extend(comments)
            family_of[index] = family
        out.setdefault(index, []).append(line)
    return {index: "".join(lines) + "# EOF\n" for index, lines in out.items()}


@pytest.mark.parametrize("seed", range(12))
def test_each_range_file_holds_exactly_that_ranges_lines(tmp_path, seed):
    rng = random.Random(seed)
    text = history(rng, families=rng.randint(1, 5), hours=rng.choice([5, 40, 100]))
    source = tmp_path / "kafka.om"
    source.write_text(text)
    span = rng.choice([2, 6, 18]) * HOUR

    written = split_by_block_range(source, tmp_path / "ranges", span)

    expected = split_line_by_line(text, span)
    assert sorted(written) == sorted(expected)
    for index, path in written.items():
        assert path.read_text() == expected[index], index


def test_every_sample_is_in_the_file_of_its_range_and_each_file_is_valid(tmp_path):
    source = tmp_path / "kafka.om"
    source.write_text(history(random.Random(99), families=4, hours=80))

    written = split_by_block_range(source, tmp_path / "ranges", 18 * HOUR, prefix="c0-")

    assert [p.name for p in written.values()] == [f"c0-{i}.om" for i in sorted(written)]
    merged: dict = {}
    for index, path in written.items():
        check_layout(path)
        for series, samples in read_openmetrics(path).items():
            assert all(t // (18 * HOUR) == index for t in samples), (path, series)
            assert not merged.get(series, {}).keys() & samples.keys()
            merged.setdefault(series, {}).update(samples)
    assert merged == read_openmetrics(source)
