"""kvq-backfill's input: an archive it cannot read whole, or holding impossible times, fails with
one line naming the file (and line) and the cause, never a traceback nor silently partial data."""

from __future__ import annotations

import gzip
import json
import os
import pwd
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import pytest

from devkit.archive_generator import ArchivePlan, generate, write_config
from kvq.contract.archive_record import to_line
from kvq.model.observation import Observation
from kvq.model.volume import LogDirDescription
from spark.archive_files import archive_files, damaged_files, gzip_problem
from spark.evaluation_grid import EvaluationGrid, GridTooLarge
from spark.poll_history import impossible_time
from tests.spark.backfill_cli import run_backfill

NOW = 1_800_000_000.0  # 2027-01-15


def good(time: float) -> str:
    return to_line(Observation(time, (0,), (LogDirDescription(0, "/d", 100, 50),)), "kafka")


def error_line(err: str) -> str:
    """The one `kvq-backfill: ...` line that is not progress, asserting there is exactly one."""
    errors = [line for line in err.splitlines() if line.startswith("kvq-backfill: ")]
    assert len(errors) == 1, err
    assert "Traceback" not in err and "Caused by" not in err
    return errors[0]


# --- unreadable folders and files: a real run as another user ---------------------------------


@pytest.fixture
def shared_tmp():
    """A temp folder other users can enter (pytest's own tmp_path is private to root)."""
    folder = Path(tempfile.mkdtemp(prefix="kvq-archive-input-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        for path in [folder, *folder.rglob("*")]:  # a non-root test run must be able to delete
            if not path.is_symlink():
                path.chmod(0o755)
        shutil.rmtree(folder)


def as_another_user() -> tuple[list[str], str]:
    """(command prefix, python) running kvq-backfill without root's right to read anything."""
    if os.geteuid() != 0:
        return [], sys.executable
    if shutil.which("setpriv") is None:
        pytest.fail("needs setpriv (util-linux, part of every Debian) to drop root's right to read")
    # Root without the capabilities that bypass file modes: it still reaches the checkout and the
    # venv (a fresh clone may sit in a folder only root may enter), but is refused what the test
    # made unreadable, as any other user would be.
    return ["setpriv", "--bounding-set=-dac_override,-dac_read_search"], sys.executable


def _env(home: Path) -> dict[str, str]:
    path = os.pathsep.join([str(Path(__file__).parents[2]), sysconfig.get_paths()["purelib"]])
    return {"PATH": os.environ["PATH"], "HOME": str(home), "PYTHONPATH": path}


def test_an_unreadable_day_folder_or_file_is_named_before_spark_starts(shared_tmp):
    """As a user without root's rights: a `chmod 000` day folder (half the archive) and one
    unreadable hour file fail the run (exit 2) naming both, instead of half the samples."""
    archive = shared_tmp / "archive"
    generate(ArchivePlan(brokers=1, dirs_per_broker=1, hours=48), archive)
    days = sorted((archive / "kafka").iterdir())
    hour = sorted(days[0].iterdir())[3]
    days[1].chmod(0o000)
    hour.chmod(0o000)
    config = write_config(shared_tmp / "kvq.properties")
    output = shared_tmp / "out"
    output.mkdir()
    nobody = pwd.getpwnam("nobody")
    if os.geteuid() == 0:
        os.chown(output, nobody.pw_uid, nobody.pw_gid)
    prefix, python = as_another_user()
    command = [*prefix, python, "-m", "spark.cli", "--archive", str(archive)]
    command += ["--config", str(config), "--output", str(output)]
    result = subprocess.run(
        command, env=_env(shared_tmp), capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 2, result.stderr
    line = error_line(result.stderr)
    assert f"{days[1]}: folder cannot be listed: Permission denied" in line
    assert f"{hour}: file cannot be read: Permission denied" in line
    assert "starting Spark" not in result.stderr


# --- damaged gzip files ------------------------------------------------------------------------


@pytest.fixture
def gz_text():
    return (good(1_763_596_800) + good(1_763_596_830)).encode()


def damage(folder: Path, text: bytes) -> dict[str, str]:
    """One file per kind of damage; returns {file name: the reason the check gives}."""
    folder.mkdir(parents=True, exist_ok=True)
    whole = gzip.compress(text, mtime=0)
    (folder / "truncated.jsonl.gz").write_bytes(whole[: len(whole) // 2])
    (folder / "appended.jsonl.gz").write_bytes(whole + b"garbage after the member\n")
    (folder / "zero-padded.jsonl.gz").write_bytes(whole + bytes(512))
    (folder / "plain-text.jsonl.gz").write_bytes(text)
    return {
        "truncated.jsonl.gz": f"truncated: its {len(whole) // 2} bytes end inside compressed data",
        "appended.jsonl.gz": "25 bytes of non-gzip data after the compressed data",
        "zero-padded.jsonl.gz": "512 bytes of non-gzip data after the compressed data",
        "plain-text.jsonl.gz": "not gzip data (no gzip header; a plain file must be named *.jsonl)",
    }


def test_gzip_damage_is_named_and_whole_files_pass(tmp_path, gz_text):
    reasons = damage(tmp_path / "bad", gz_text)
    for name, reason in reasons.items():
        assert gzip_problem(tmp_path / "bad" / name) == reason
    sound = tmp_path / "sound"
    sound.mkdir()
    (sound / "two-members.jsonl.gz").write_bytes(gzip.compress(gz_text) + gzip.compress(gz_text))
    (sound / "empty.jsonl.gz").write_bytes(b"")  # read as no lines by Python and Hadoop alike
    (sound / "plain.jsonl").write_bytes(b"\x1f\x8bnot checked: not a .gz")
    assert damaged_files(archive_files(sound)) == []
    files = archive_files(tmp_path)
    found = [(p.path.name, p.reason) for p in damaged_files(files, workers=3)]
    assert found == [(p.name, reasons[p.name]) for p in files if p.name in reasons]


def test_damaged_gzip_files_fail_the_run_naming_each(spark, tmp_path, gz_text, capsys):
    archive = tmp_path / "archive"
    reasons = damage(archive / "kafka", gz_text)
    (archive / "kafka" / "sound.jsonl.gz").write_bytes(gzip.compress(gz_text))
    config = write_config(tmp_path / "kvq.properties")
    assert run_backfill(archive, config, tmp_path / "out") == 1
    line = error_line(capsys.readouterr().err)
    assert line.startswith("kvq-backfill: damaged archive file ")
    for name, reason in reasons.items():
        assert f"{archive / 'kafka' / name}: {reason}" in line
    assert "sound.jsonl.gz" not in line
    assert not list((tmp_path / "out").glob("*.om"))


def test_a_file_damaged_after_the_check_is_named_from_sparks_failure(
    spark, tmp_path, gz_text, capsys, monkeypatch
):
    """What the driver's checks cannot see (a file changed after them, executors that read
    another copy) still fails naming the file and Hadoop's cause, not a Java stack trace."""
    from spark import job

    archive = tmp_path / "archive"
    damage(archive, gz_text)
    for name in ("appended", "zero-padded", "plain-text"):
        (archive / f"{name}.jsonl.gz").unlink()
    monkeypatch.setattr(job, "damaged_files", lambda files, workers: [])
    config = write_config(tmp_path / "kvq.properties")
    assert run_backfill(archive, config, tmp_path / "out") == 1
    line = error_line(capsys.readouterr().err)
    assert line == (
        f"kvq-backfill: archive file {archive / 'truncated.jsonl.gz'} cannot be read: "
        "Unexpected end of input stream (EOFException)"
    )


# --- impossible poll times and the size of the grid --------------------------------------------


def test_impossible_times():
    assert impossible_time(NOW, NOW) is None
    assert impossible_time(NOW + 3600, NOW) is None  # another host's clock, a little ahead
    assert impossible_time(NOW * 1000, NOW) == "looks like milliseconds"
    assert "is in the future" in impossible_time(NOW + 2 * 86_400, NOW)
    assert impossible_time(60.0, NOW) is None  # a test's or replay's small times
    assert "is before 1970" in impossible_time(-60.0, NOW)
    assert impossible_time(float("nan"), NOW) == "is not a number"


def test_the_grid_is_counted_before_it_is_built():
    with pytest.raises(GridTooLarge, match="1001 grid times every 60s from 1970-01-01T00:00:00Z"):
        EvaluationGrid.over(0.0, 60_000.0, 60, max_times=1000)
    assert len(EvaluationGrid.over(0.0, 60_000.0, 60, max_times=1001)) == 1001
    ranged = EvaluationGrid(60, 0, 10**9).only([(5, 7), (6, 9), (10**9 - 1, 2 * 10**9)])
    assert len(ranged) == 7  # overlapping ranges once, clipped to the grid; counted, not walked
    assert list(ranged.indexes()) == [5, 6, 7, 8, 9, 10**9 - 1, 10**9]


def archive_with(tmp_path: Path, odd_line: str) -> Path:
    """An hour of good polls, and a second file whose line 2 is `odd_line`."""
    archive = tmp_path / "archive"
    archive.mkdir()
    start = 1_763_596_800
    (archive / "00.jsonl").write_text("".join(good(start + 60 * i) for i in range(60)))
    (archive / "odd.jsonl").write_text(good(start + 3600) + odd_line)
    return archive


@pytest.mark.parametrize(
    ("time", "reason"),
    [
        (1_763_596_800_000, "looks like milliseconds"),
        (1_763_596_800 + 10 * 365 * 86_400, "(2035-11-18T00:00:00Z) is in the future"),
    ],
)
def test_an_impossible_poll_time_is_refused_naming_its_line(spark, tmp_path, capsys, time, reason):
    """A millisecond time, or one 10 years ahead (which made a 5M-time grid and a JVM in full
    GC for minutes), fails at once naming the file and line."""
    archive = archive_with(tmp_path, json.dumps({**json.loads(good(0)), "time": time}) + "\n")
    config = write_config(tmp_path / "kvq.properties")
    assert run_backfill(archive, config, tmp_path / "out") == 1
    line = error_line(capsys.readouterr().err)
    assert line.startswith(f"kvq-backfill: {archive / 'odd.jsonl'}:2: poll time {time!r}")
    assert reason in line and "fix or remove the line" in line


def test_a_span_of_too_many_grid_times_is_refused_and_start_narrows_it(spark, tmp_path, capsys):
    """A poll from a clock set years back (possible, so not refused by itself) would stretch the
    grid over a decade: refused before any work, naming that line, until --start narrows it."""
    archive = archive_with(tmp_path, good(1_450_000_000))  # 2015-12-13
    config = write_config(tmp_path / "kvq.properties")
    assert run_backfill(archive, config, tmp_path / "out", "--step", "PT1M") == 1
    line = error_line(capsys.readouterr().err)
    assert "more than 1000000 per run" in line
    assert f"first observation is 2015-12-13T09:46:40Z ({archive / 'odd.jsonl'}:2)" in line
    assert "narrow the range with --start/--end" in line
    assert run_backfill(archive, config, tmp_path / "out", "--start", "2025-11-20") == 0
    assert capsys.readouterr().out.endswith("samples at 61 times\n")
