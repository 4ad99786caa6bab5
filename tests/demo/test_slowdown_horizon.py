"""`make demo SCENARIO=slowdown KAFKA=apache --horizon DURATION`: graceful-slowdown's run with
another kvq.throttle.slowdown.horizon, named so in its lines, pictures and results page."""

from __future__ import annotations

import re
import shlex

import pytest

from demo.graceful import HORIZON, policy_properties
from demo.slowdown import PARSER, parse, title
from devkit.results_page import arguments_name
from kvq.settings.config import SLOWDOWN_HORIZON
from tests.docs.blocks import ROOT


def test_the_horizon_given_is_graceful_slowdowns_and_names_the_run():
    args = parse(["--horizon", "pt30s", "--policy", "graceful-slowdown"])
    assert args.horizon == "PT30S", "normalised as the properties and page name show it"
    graceful = policy_properties("graceful-slowdown", None, False, args.horizon)
    assert f"{SLOWDOWN_HORIZON}=PT30S\n" in graceful
    assert "horizon PT30S" in title("graceful-slowdown", args.horizon)
    assert "horizon PT30S" in title("graceful-slowdown", args.horizon, short=True)
    page, shown = arguments_name("slowdown", PARSER, args, ignore=("work",))
    assert page == "slowdown-policy-graceful-slowdown-horizon-pt30s"
    assert "--horizon PT30S" in shown


def test_without_it_the_run_keeps_the_demos_horizon_and_its_page():
    args = parse([])
    assert args.horizon == HORIZON
    assert f"{SLOWDOWN_HORIZON}={HORIZON}\n" in policy_properties("graceful-slowdown")
    assert arguments_name("slowdown", PARSER, args, ignore=("work",))[0] == "slowdown"
    assert title("stop-on-violation", "PT30S") == "the proposal's policy (0/1)"


@pytest.mark.parametrize(
    ("given", "told"),
    [
        ("PT0S", "'PT0S': must be a positive ISO 8601 duration"),
        ("30s", "'30s': not an ISO 8601 duration"),
    ],
)
def test_a_horizon_that_is_no_positive_duration_is_refused_before_any_cluster_starts(
    given, told, capsys
):
    with pytest.raises(SystemExit) as exited:
        parse(["--horizon", given])
    assert exited.value.code == 2
    assert f"--horizon: {told}" in capsys.readouterr().err


def test_the_horizon_runs_docs_policies_shows_parse_as_shown():
    text = " ".join((ROOT / "docs/policies.md").read_text().split())
    shown = re.findall(r"`python -m bench\.slowdown ([^`]*--horizon[^`]*)`", text)
    assert shown, "docs/policies.md shows a run with --horizon"
    for arguments in shown:
        args = parse(shlex.split(arguments))
        assert args.policy == ["graceful-slowdown"] and args.horizon == "PT20S"
