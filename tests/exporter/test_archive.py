"""ArchiveWriter: hourly JSONL files, finished hours gzipped, no half lines after a crash."""

import errno
import gzip
import json

from exporter.archive import ArchiveWriter, hour_path, repair_partial_line
from exporter.exporter_app import Exporter
from exporter.settings import ExporterSettings
from kvq.contract.archive_record import from_line
from kvq.model.observation import Observation
from kvq.model.volume import LogDirDescription

P = "client.quota.callback.static."
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


def test_a_partial_line_longer_than_a_read_block_is_cut_at_its_start(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_bytes(b'{"a":1}\n' + b"x" * (3 << 20))  # a huge poll cut short by a crash
    assert repair_partial_line(path) == 3 << 20
    assert path.read_bytes() == b'{"a":1}\n'


def fill(folder, chunk: bytes = b"\0" * 512) -> None:
    """Write `folder`/filler until the disk refuses a byte."""
    with open(folder / "filler", "wb", buffering=0) as handle:
        try:
            while True:
                handle.write(chunk)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC


def test_a_full_archive_disk_never_joins_records_and_counts_its_failures(
    tmp_path, devcluster, mount_tmpfs, caplog
):
    """A real 64 KiB tmpfs: polls keep running while the disk is full, a write that got only
    part of its line in is cut back, and once ~700 bytes are freed the next line starts on a
    line of its own; the exporter publishes how many polls the archive lost."""
    dc = devcluster(brokers=2, log_dirs_per_broker=2)
    archive = tmp_path / "archive"
    mount_tmpfs(archive, size="64k")
    settings = ExporterSettings.build(
        {
            P + "kafka.admin.bootstrap.servers": dc.bootstrap,
            P + "storage.per.volume.limit.min.available.ratio": "0.05",
            "kvq.exporter.archive.dir": str(archive),
            "kvq.cluster.name": "full",
        },
        environ={},
    )
    exporter = Exporter(settings, clock=lambda: T0 + 60)
    try:
        exporter.poller.poll_once()
        (archive / "small").write_bytes(b"s" * 700)
        fill(archive)
        polls = 0
        while exporter.archive.failures < 3 and polls < 100:  # the last page fills, then no room
            exporter.poller.poll_once()
            polls += 1
        assert exporter.archive.failures == 3, "the poll keeps running on a full disk"
        (archive / "small").unlink()  # ~700 bytes freed (a page of tmpfs)
        for _ in range(30):
            exporter.poller.poll_once()
        failures = exporter.archive.failures
        assert failures > 3, "the freed page filled up again"
        metrics = exporter.render_metrics().decode()
    finally:
        exporter.stop()
    hour_file = hour_path(archive, "full", T0 + 60)
    lines = hour_file.read_bytes().split(b"\n")
    records = [from_line(line.decode()) for line in lines[:-1]]  # each line is one JSON record
    assert lines[-1] == b"", "the file ends with a complete record"
    assert all(observation.succeeded for _, observation in records)
    assert "archive: cut" in caplog.text, "a full disk took part of a line (what joined them)"
    assert len(records) == 1 + polls + 30 - failures
    assert f'kafka_volume_quota_archive_write_failures_total{{cluster="full"}} {failures}.0' in (
        metrics
    )
