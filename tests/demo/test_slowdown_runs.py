"""`make demo SCENARIO=slowdown KAFKA=apache --runs N`: each policy run N times on fresh clusters,
each run's table, then the spread of each measure over the runs."""

from __future__ import annotations

from dataclasses import replace

import pytest

from demo.slowdown import parse, spread, spread_of, title
from tests.demo.test_slowdown_share_ledger import outcome


def test_runs_default_to_one_and_take_a_count():
    assert parse([]).runs == 1
    assert parse(["--runs", "3"]).runs == 3


@pytest.mark.parametrize("given", ["0", "-2"])
def test_no_run_at_all_is_refused_before_any_cluster_starts(given, capsys):
    with pytest.raises(SystemExit) as exited:
        parse(["--runs", given])
    assert exited.value.code == 2
    assert f"--runs: {given}; give 1 or more" in capsys.readouterr().err


def test_a_run_of_several_says_which_it_was():
    one = outcome(10.0, 160.0)
    assert one.heading == title("graceful-slowdown")
    assert replace(one, repeat=(2, 3)).heading == f"{title('graceful-slowdown')}, run 2 of 3"


def test_the_spread_is_the_lowest_the_median_and_the_highest():
    assert spread_of([0.9, 0.8, 0.85], "{:.0%}".format) == "80% / 85% / 90%"
    assert spread_of([2.0, 1.0], "{:.1f} s".format) == "1.0 s / 2.0 s / 2.0 s"


def test_a_measure_a_run_could_not_take_counts_as_the_highest():
    """Every quota entity not back within the watch (None) is worse than any time."""
    assert spread_of([3.0, None, 1.0], "{:.1f} s".format) == "1.0 s / 3.0 s / -"


def test_each_policy_gets_one_block_over_its_runs():
    early, late = outcome(10.0, 160.0), outcome(20.0, 170.0)
    runs = [replace(early, repeat=(1, 2)), replace(late, repeat=(2, 2))]
    text = spread(runs)
    assert text.count(title("graceful-slowdown")) == 1
    low, high = sorted(o.share() for o in runs)
    assert "share of the most any policy could" in text
    assert f"{low:.0%} / {high:.0%} / {high:.0%}" in text
    for measure in ("its ledger", "lowest available bytes", "without an ack", "quota entity back"):
        assert measure in text
