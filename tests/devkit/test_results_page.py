"""A run's results page (devkit/results_page.py): the facts at its top, the output verbatim, a
page per set of non-default arguments, and nothing half-written or written at all unless the run
completed."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from devkit import results_page
from devkit.kafka_dist import selected_version
from devkit.results_page import Recording, arguments_name, git_commit

OLD_PAGE = "# poll_fanout\n\nthe previous run's figures\n"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    p.add_argument("--brokers", type=int, default=200)
    p.add_argument("--load-step", type=float)
    p.add_argument("--scaling", action="store_true")
    p.add_argument("--policy", action="append", choices=("stop-on-violation", "graceful"))
    p.add_argument("--work", type=Path)
    return p


def test_the_page_starts_with_the_runs_facts_then_holds_every_line_it_printed(
    tmp_path, capsys
) -> None:
    with Recording("poll_fanout", "Poll fan-out: 200 brokers.", directory=tmp_path) as recording:
        print("poll fan-out: 200 brokers, 20 ms latency each")
        print("  exporter fan-out (200 brokers)         41.7 ms")
        print("a note on stderr", file=sys.stderr)
        recording.complete()
    page = (tmp_path / "poll_fanout.md").read_text()
    assert page.startswith("# poll_fanout\n")
    assert "Poll fan-out: 200 brokers." in page
    rows = dict(re.findall(r"^\| ([a-z ]+) \| (.*) \|$", page, re.M))
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", rows["date"])
    assert re.fullmatch(rf"{os.cpu_count()} cores.*, [\d.]+ GiB memory, .+", rows["machine"])
    assert "Python" in rows["system"] and "Kafka" not in rows["system"]
    assert re.fullmatch(r"`([0-9a-f]{12}(-dirty)?|unknown.*)`", rows["commit"])
    load = r"[\d.]+ / [\d.]+ / [\d.]+"
    loads = rf"{load} at the start, {load} at the end \(1 / 5 / 15 min.*"
    assert re.fullmatch(loads, rows["load average"])
    # the command as this process was started (under pytest-xdist, its worker's)
    assert rows["command"] == f"`{results_page.command_line()}`"
    assert "took" in rows
    output = page.split("## Output\n\n```\n", 1)[1]
    assert output == (
        "poll fan-out: 200 brokers, 20 ms latency each\n"
        "  exporter fan-out (200 brokers)         41.7 ms\n"
        "a note on stderr\n```\n"
    )
    shown = capsys.readouterr()  # what it printed was shown as well as kept
    assert "41.7 ms" in shown.out and "a note on stderr" in shown.err
    assert "results: " in shown.out


def test_a_run_on_kafka_names_kafkas_version(tmp_path) -> None:
    with Recording("versus", directory=tmp_path) as recording:
        recording.arguments(parser(), parser().parse_args([]), kafka=True)
        recording.complete()
    assert f"Apache Kafka {selected_version()}" in (tmp_path / "versus.md").read_text()


@pytest.mark.parametrize(
    "failure", [RuntimeError("a crash"), KeyboardInterrupt()], ids=["crash", "ctrl-c"]
)
def test_a_run_that_does_not_complete_leaves_the_previous_page_whole(tmp_path, failure) -> None:
    (tmp_path / "poll_fanout.md").write_text(OLD_PAGE)
    with (
        pytest.raises(type(failure)),
        Recording("poll_fanout", directory=tmp_path) as recording,
    ):
        print("half the figures")
        recording.attach("-picture.png", "a picture").write_bytes(b"half a picture")
        recording.complete()
        raise failure
    assert (tmp_path / "poll_fanout.md").read_text() == OLD_PAGE
    assert sorted(p.name for p in tmp_path.iterdir()) == ["poll_fanout.md"]  # no temporary left


def test_a_run_that_never_said_it_completed_writes_nothing(tmp_path) -> None:
    with Recording("poll_fanout", directory=tmp_path):
        print("figures of a run that failed (it returned 1)")
    assert list(tmp_path.iterdir()) == []


def test_a_failure_while_writing_leaves_the_previous_page_whole(tmp_path, monkeypatch) -> None:
    (tmp_path / "poll_fanout.md").write_text(OLD_PAGE)

    def full_disk(source, target):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(results_page.os, "replace", full_disk)
    with (
        pytest.raises(OSError, match="No space"),
        Recording("poll_fanout", directory=tmp_path) as recording,
    ):
        print("new figures")
        recording.complete()
    assert (tmp_path / "poll_fanout.md").read_text() == OLD_PAGE
    assert sorted(p.name for p in tmp_path.iterdir()) == ["poll_fanout.md"]


def test_a_page_is_named_by_the_arguments_that_differ_from_their_defaults() -> None:
    p = parser()

    def name(*argv: str) -> tuple[str, str]:
        return arguments_name("slowdown", p, p.parse_args(argv), ignore=("work",))

    assert name() == ("slowdown", "")
    assert name("--brokers", "200", "--work", "/tmp/x") == ("slowdown", "")  # defaults, logs
    assert name("--load-step", "10") == ("slowdown-load-step-10", "--load-step 10")
    assert name("--scaling") == ("slowdown-scaling", "--scaling")
    assert name("--policy", "graceful", "--brokers", "20")[0] == (
        "slowdown-brokers-20-policy-graceful"  # the parser's order, not the command's
    )
    assert name("--load-step=2.5", "--policy", "graceful", "--policy", "stop-on-violation") == (
        "slowdown-load-step-2.5-policy-graceful-stop-on-violation",
        "--load-step 2.5 --policy graceful,stop-on-violation",
    )


def test_a_long_name_is_cut_and_keeps_apart_from_others() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--compare-with", type=Path)
    one = arguments_name("enforcer_kafka", p, p.parse_args(["--compare-with", "/a" * 80]), ())
    two = arguments_name("enforcer_kafka", p, p.parse_args(["--compare-with", "/b" * 80]), ())
    assert len(one[0]) <= results_page.MAX_NAME and one[0] != two[0]


def test_the_runs_arguments_reach_the_open_recording_and_nothing_else(tmp_path) -> None:
    p = parser()
    results_page.arguments(p, p.parse_args(["--scaling"]))  # none open: nothing happens
    with Recording("backfill", directory=tmp_path) as recording:
        results_page.arguments(p, p.parse_args(["--scaling"]))
        recording.complete()
    assert (tmp_path / "backfill-scaling.md").read_text().startswith("# backfill (--scaling)\n")


def test_output_holding_a_fence_gets_a_longer_one(tmp_path) -> None:
    with Recording("x", directory=tmp_path) as recording:
        print("```sh\nmake bench\n```")
        recording.complete()
    page = (tmp_path / "x.md").read_text()
    assert "\n````\n```sh\nmake bench\n```\n````\n" in page


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def test_the_commit_is_dirty_for_changed_code_not_for_results_pages(tmp_path) -> None:
    repo = tmp_path / "repo"
    (repo / "docs" / "results").mkdir(parents=True)
    (repo / "bench.py").write_text("x = 1\n")
    (repo / "docs" / "results" / "x.md").write_text("# x\n")
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c")
    clean = git_commit(repo)
    assert re.fullmatch(r"[0-9a-f]{12}", clean)
    (repo / "docs" / "results" / "x.md").write_text("# x, run again\n")
    (repo / "new_file.py").write_text("untracked\n")
    assert git_commit(repo) == clean
    (repo / "bench.py").write_text("x = 2\n")
    assert git_commit(repo) == f"{clean}-dirty"
    assert git_commit(tmp_path / "not-a-repo").startswith("unknown")


def test_the_command_is_shown_as_typed_with_the_checkout_s_interpreter_relative() -> None:
    python = results_page.ROOT / ".venv" / "bin" / "python"
    typed = [str(python), "-m", "bench.slowdown", "--load-step", "10"]
    assert results_page.command_line(typed) == ".venv/bin/python -m bench.slowdown --load-step 10"
    assert results_page.command_line(["/usr/bin/python3", "-m", "bench"]) == (
        "/usr/bin/python3 -m bench"
    )


def test_a_results_dir_that_does_not_exist_yet_is_made_before_the_run_draws_into_it(
    tmp_path, monkeypatch
) -> None:
    # KVQ_RESULTS_DIR=/tmp/somewhere-new: a run draws its pictures before the page is written;
    # the directory missing then lost an 8-minute run at its last step.
    monkeypatch.setenv(results_page.RESULTS_DIR_ENV, str(tmp_path / "new" / "results"))
    with Recording("slowdown", "A run with a picture.") as recording:
        recording.attach("-picture.png", "a picture").write_bytes(b"a picture")
        print("figures")
        recording.complete()
    written = tmp_path / "new" / "results"
    assert (written / "slowdown-picture.png").read_bytes() == b"a picture"
    assert "figures" in (written / "slowdown.md").read_text()
