"""`make demo SCENARIO=slowdown KAFKA=apache --poll DURATION`: the exporter polls that often, and
graceful-slowdown's response time is that loop's (two polls, scrape, rule, alert to enforce)."""

from __future__ import annotations

import pytest

from demo.graceful import policy_properties
from demo.slowdown import LOOP, parse, setup_of, title
from kvq.settings.config import SLOWDOWN_RESPONSE


def test_a_shorter_poll_reaches_the_exporter_and_shortens_the_response_time():
    args = parse(["--poll", "PT2S", "--policy", "graceful-slowdown"])
    setup = setup_of(args)
    loop = setup.loop
    assert (loop.poll, loop.scrape, loop.evaluation) == (2.0, LOOP.scrape, LOOP.evaluation)
    properties = policy_properties("graceful-slowdown", loop=loop)
    assert f"{SLOWDOWN_RESPONSE}=PT8S\n" in properties
    assert title("graceful-slowdown", args.horizon, setup=setup).startswith(
        "graceful-slowdown, poll PT2S, horizon PT40S, response time PT8S"
    )


def test_without_it_the_recommended_loop_and_its_14_s():
    setup = setup_of(parse([]))
    assert setup.loop == LOOP
    assert f"{SLOWDOWN_RESPONSE}=PT14S\n" in policy_properties("graceful-slowdown", loop=LOOP)
    assert "poll" not in title("graceful-slowdown", setup=setup)


def test_a_minute_written_as_iso_is_taken_in_its_plain_form():
    assert setup_of(parse(["--poll", "PT1M"])).loop.poll == 60.0


@pytest.mark.parametrize("option", ["--poll", "--kafka-scrape", "--metrics-sample-window"])
@pytest.mark.parametrize(
    ("given", "said"),
    [("PT0S", "must be a positive ISO 8601 duration"), ("2s", "not an ISO 8601 duration")],
)
def test_a_duration_option_that_is_no_positive_duration_is_refused_naming_it(
    capsys, option, given, said
):
    with pytest.raises(SystemExit) as exited:
        parse([option, given])
    assert exited.value.code == 2
    assert f"{option}: '{given}': {said}" in capsys.readouterr().err
