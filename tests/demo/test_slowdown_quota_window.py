"""`make demo SCENARIO=slowdown KAFKA=apache --quota-window-samples N`: every broker measures
quotas over N 1 s samples (Kafka's quota.window.num), said in the load's line."""

from __future__ import annotations

import pytest

from demo.slowdown import SETUP, parse, quota_window, setup_of


def test_the_window_reaches_every_broker_beside_the_scenarios_own_properties():
    setup = setup_of(parse(["--quota-window-samples", "3"]))
    assert setup.broker_properties == {**SETUP.broker_properties, "quota.window.num": "3"}
    assert quota_window(setup) == ", quotas measured over 3 s (quota.window.num)"


def test_without_it_the_brokers_keep_kafkas_default_and_the_line_says_nothing():
    setup = setup_of(parse([]))
    assert "quota.window.num" not in setup.broker_properties
    assert quota_window(setup) == ""


def test_no_samples_is_refused_with_what_is_allowed(capsys):
    with pytest.raises(SystemExit):
        parse(["--quota-window-samples", "0"])
    err = capsys.readouterr().err
    assert "--quota-window-samples: 0; give 1 or more (Kafka's default is 11)" in err
