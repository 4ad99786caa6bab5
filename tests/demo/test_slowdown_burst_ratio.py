"""`make demo SCENARIO=slowdown KAFKA=apache --burst-ratio R`: graceful-slowdown's enforcer runs
with kvq.enforcer.throttle.observed.rate.burst.ratio=R, the run's title says so, and a value the
enforcer would refuse is refused before any cluster starts, in the enforcer's words."""

from __future__ import annotations

import pytest

from demo.graceful import policy_properties
from demo.slowdown import parse, setup_of, title
from enforcer.settings import OBSERVED_RATE_BURST_RATIO, EnforcerSettings
from kvq.settings.properties import parse_properties


def test_the_ratio_reaches_graceful_slowdowns_enforcer_and_its_title():
    setup = setup_of(parse(["--burst-ratio", "1.35", "--policy", "graceful-slowdown"]))
    properties = policy_properties("graceful-slowdown", burst_ratio=setup.burst_ratio)
    given = parse_properties(properties)[OBSERVED_RATE_BURST_RATIO]
    assert EnforcerSettings.declaration(OBSERVED_RATE_BURST_RATIO).parse(given) == 1.35
    assert "observed-rate references (burst ratio 1.35)" in title("graceful-slowdown", setup=setup)


def test_the_0_1_policy_takes_no_ratio_and_without_it_the_enforcer_keeps_its_default():
    assert OBSERVED_RATE_BURST_RATIO not in policy_properties("stop-on-violation", burst_ratio=2.0)
    setup = setup_of(parse([]))
    assert setup.burst_ratio is None
    assert OBSERVED_RATE_BURST_RATIO not in policy_properties("graceful-slowdown")
    assert "burst ratio" not in title("graceful-slowdown", setup=setup)


@pytest.mark.parametrize("given", ["0.8", "11", "often"])
def test_a_ratio_the_enforcer_refuses_is_refused_naming_it_and_the_range(capsys, given):
    with pytest.raises(SystemExit) as exited:
        parse(["--burst-ratio", given])
    assert exited.value.code == 2
    said = capsys.readouterr().err
    assert f"--burst-ratio: {given!r}: " in said
    assert "a number from 1 to 10" in said
