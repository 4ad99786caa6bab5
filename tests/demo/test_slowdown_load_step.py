"""`make demo SCENARIO=slowdown KAFKA=apache --load-step TIMES [--step-at SECONDS]`: the load
steps up after the first slowdown, or at a time of its own before it."""

from __future__ import annotations

import pytest

from demo.slowdown import SETUP, LoadStep, parse


def test_without_a_time_of_its_own_the_step_waits_for_the_first_slowdown():
    """`before_slowdown` takes no step (and touches no stack) unless --step-at gave a time."""
    args = parse(["--load-step", "10"])
    assert LoadStep(args.load_step, args.step_at).before_slowdown(None, [], SETUP) is None


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--step-at", "5"], "--step-at: 5 needs --load-step and a number of seconds from 0"),
        (
            ["--load-step", "10", "--step-at", "-1"],
            "--step-at: -1 needs --load-step and a number of seconds from 0",
        ),
        (["--load-step", "1"], "--load-step: 1 is no step up; give a number above 1"),
    ],
)
def test_a_step_that_cannot_be_taken_is_refused_naming_it(argv, said, capsys):
    with pytest.raises(SystemExit):
        parse(argv)
    assert said in capsys.readouterr().err


def test_a_step_before_the_slowdown_needs_no_episode_longer_than_the_wait_after_it():
    args = parse(["--load-step", "10", "--step-at", "10", "--episode-seconds", "20"])
    assert args.episode_seconds == 20.0
    with pytest.raises(SystemExit):
        parse(["--load-step", "10", "--episode-seconds", "20"])
