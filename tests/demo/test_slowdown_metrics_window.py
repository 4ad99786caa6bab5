"""`make demo SCENARIO=slowdown KAFKA=apache --metrics-sample-window DURATION`: every broker samples
its own metrics that often (the average throttle time the enforcer reads request sizes from covers
two samples), and the run's heading says so."""

from __future__ import annotations

from demo.slowdown import parse, quota_window, setup_of


def test_the_window_reaches_every_broker_in_milliseconds_and_the_heading():
    setup = setup_of(parse(["--metrics-sample-window", "PT10S", "--quota-window-samples", "3"]))
    assert setup.broker_properties["metrics.sample.window.ms"] == "10000"
    assert quota_window(setup) == (
        ", quotas measured over 3 s (quota.window.num)"
        ", throttle times averaged over 2 x 10 s (metrics.sample.window.ms)"
    )


def test_without_it_the_brokers_keep_kafkas_default():
    setup = setup_of(parse([]))
    assert "metrics.sample.window.ms" not in setup.broker_properties
    assert quota_window(setup) == ""
