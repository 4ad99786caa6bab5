"""Bad archive lines are reported with file and line, exactly where `from_line` rejects them, and
are fatal only when configured; any *.jsonl / *.jsonl.gz under the archive is read."""

from __future__ import annotations

import gzip
import json
import re

import pytest

from devkit.archive_generator import write_config
from devkit.python_replay import read_archive
from kvq.contract.archive_record import to_line
from kvq.model.observation import Observation
from kvq.model.volume import LogDirDescription
from tests.spark.backfill_cli import run_backfill

BAD_LINE = re.compile(r"bad line (.+?):(\d+): ")


def good(time: float, cluster: str = "kafka") -> str:
    return to_line(Observation(time, (0,), (LogDirDescription(0, "/d", 100, 50),)), cluster)


@pytest.fixture
def archive(tmp_path):
    """Two clusters, nested folders in no particular layout (a space and a plus in a name), gzip
    and plain, blank and bad lines."""
    root = tmp_path / "archive"
    (root / "a b+c" / "d").mkdir(parents=True)
    (root / "a b+c" / "d" / "x.jsonl").write_text(
        good(60)
        + "\n"  # blank: skipped, not bad
        + '{"schema":1,"time":61}\n'  # no outcome
        + good(120)[:30]
        + "\n"  # cut short
        + json.dumps({"schema": 1, "cluster": "kafka", "time": 130, "outcome": "failure"})
        + "\n"
        + good(180)
    )
    (root / "c.jsonl.gz").write_bytes(
        gzip.compress((good(240) + good(250, "other") + "[1, 2]\n" + good(300)).encode())
    )
    (root / "ignored.json").write_text("not an archive file\n")
    return root


def backfill(tmp_path, archive, *extra):
    config = write_config(tmp_path / "kvq.properties")
    return run_backfill(archive, config, tmp_path / "out", "--step", "PT1M", *extra)


def test_bad_lines_are_reported_where_the_record_format_rejects_them(
    spark, tmp_path, archive, capsys
):
    assert backfill(tmp_path, archive) == 0
    err = capsys.readouterr().err
    reported = {(f, int(n)) for f, n in BAD_LINE.findall(err)}
    expected = {(b.file, b.line) for b in read_archive(archive, "kafka").bad_lines}
    assert (
        reported
        == expected
        == {
            (str(archive / "a b+c" / "d" / "x.jsonl"), 3),
            (str(archive / "a b+c" / "d" / "x.jsonl"), 4),
            (str(archive / "a b+c" / "d" / "x.jsonl"), 5),
            (str(archive / "c.jsonl.gz"), 3),
        }
    )
    assert "read 9 lines: 4 observations of cluster 'kafka', 4 bad lines" in err
    assert "other clusters skipped: {'other': 1}" in err
    text = (tmp_path / "out" / "kafka.om").read_text()
    assert 'kafka_volume_quota_active_log_dirs{cluster="kafka"} 1 300' in text


def test_too_many_bad_lines_fail_when_configured(spark, tmp_path, archive, capsys):
    assert backfill(tmp_path, archive, "--max-bad-lines", "3") == 1
    err = capsys.readouterr().err
    assert "4 bad archive lines, more than --max-bad-lines 3" in err
    assert "Traceback" not in err


def test_an_archive_of_another_cluster_names_the_clusters_it_holds(spark, tmp_path, capsys):
    (tmp_path / "archive").mkdir()
    (tmp_path / "archive" / "00.jsonl").write_text(good(60, "prod-eu") + good(120, "prod-eu"))
    assert backfill(tmp_path, tmp_path / "archive") == 1
    err = capsys.readouterr().err
    assert "no valid observations of cluster 'kafka'" in err and "'prod-eu' (2)" in err


def test_cluster_name_flag_picks_the_cluster_as_the_exporter_flag_named_it(spark, tmp_path, capsys):
    (tmp_path / "archive").mkdir()
    (tmp_path / "archive" / "00.jsonl").write_text(good(60, "prod-eu") + good(120, "prod-eu"))
    assert backfill(tmp_path, tmp_path / "archive", "--cluster-name", "prod-eu") == 0
    text = (tmp_path / "out" / "prod-eu.om").read_text()
    assert 'kafka_volume_quota_active_log_dirs{cluster="prod-eu"} 1 120' in text


def test_without_a_cluster_name_every_cluster_gets_its_own_file(spark, tmp_path, capsys):
    (tmp_path / "archive").mkdir()
    (tmp_path / "archive" / "00.jsonl").write_text(
        good(60, "prod-eu") + good(120, "prod-us") + good(180, "prod-eu") + good(240, "prod-us")
    )
    config = write_config(tmp_path / "kvq.properties")
    unnamed = [line for line in config.read_text().splitlines() if "kvq.cluster.name" not in line]
    config.write_text("\n".join(unnamed) + "\n")
    assert run_backfill(tmp_path / "archive", config, tmp_path / "out", "--step", "PT1M") == 0
    for cluster, other, last in (("prod-eu", "prod-us", 180), ("prod-us", "prod-eu", 240)):
        text = (tmp_path / "out" / f"{cluster}.om").read_text()
        assert f'kafka_volume_quota_active_log_dirs{{cluster="{cluster}"}} 1 {last}' in text
        assert text.endswith("# EOF\n") and other not in text
    out = capsys.readouterr().out
    assert "prod-eu.om: " in out and "prod-us.om: " in out


def test_an_archive_under_a_folder_named_with_spaces_and_glob_characters_reads(
    spark, tmp_path, archive, capsys
):
    """Spark expands {a,b}, [ab], * and ? in the paths it reads: a folder named so is read as
    itself, every line of it, with the lines named by their real paths."""
    folder = tmp_path / "kafka archives {eu,us} [2026]"
    folder.mkdir()
    moved = archive.rename(folder / "archive")
    assert backfill(tmp_path, moved) == 0
    err = capsys.readouterr().err
    assert "read 9 lines: 4 observations of cluster 'kafka', 4 bad lines" in err
    assert f"bad line {moved / 'c.jsonl.gz'}:3: " in err
    text = (tmp_path / "out" / "kafka.om").read_text()
    assert 'kafka_volume_quota_active_log_dirs{cluster="kafka"} 1 300' in text
