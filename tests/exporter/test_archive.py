"""ArchiveWriter: hourly JSONL files, finished hours gzipped, no half lines after a crash."""

import gzip
import json

from exporter.archive import ArchiveWriter, hour_path, repair_partial_line
from kvq.contract.archive_record import from_line
from kvq.model.observation import Observation
from kvq.model.volume import LogDirDescription

HOUR = 3600.0
T0 = 1763812800.0  # 2025-11-22T12:00:00Z


def obs(time):
    return Observation(time, (0,), (LogDirDescription(0, "/d", 100, 50),))


def test_one_line_per_poll_in_the_hour_file(tmp_path):
    writer = ArchiveWriter(tmp_path, "prod")
    path = writer.append(obs(T0 + 1))
    writer.append(obs(T0 + 2))
    assert path == tmp_path / "prod" / "2025-11-22" / "12.jsonl"
    lines = path.read_text().splitlines()
    assert [from_line(line)[1].time for line in lines] == [T0 + 1, T0 + 2]
    writer.close()


def test_finished_hours_are_gzipped_and_readable(tmp_path):
    writer = ArchiveWriter(tmp_path, "prod")
    first = writer.append(obs(T0 + 1))
    second = writer.append(obs(T0 + HOUR + 1))
    writer.close()
    assert not first.exists()
    with gzip.open(first.with_name("12.jsonl.gz"), "rt") as handle:
        assert json.loads(handle.readline())["time"] == T0 + 1
    assert second.exists() and second.name == "13.jsonl"


def test_partial_line_from_a_crash_is_cut_when_reopened(tmp_path):
    path = hour_path(tmp_path, "prod", T0)
    path.parent.mkdir(parents=True)
    path.write_text('{"schema":1}\n{"schema":1,"clus')
    writer = ArchiveWriter(tmp_path, "prod")
    writer.append(obs(T0 + 5))
    writer.close()
    lines = path.read_text().splitlines()
    assert lines[0] == '{"schema":1}'
    assert from_line(lines[1])[1].time == T0 + 5
    assert len(lines) == 2


def test_repair_leaves_complete_files_alone(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text("a\nb\n")
    assert repair_partial_line(path) == 0
    assert path.read_text() == "a\nb\n"
