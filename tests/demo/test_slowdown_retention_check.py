"""`make demo SCENARIO=slowdown KAFKA=apache --retention-check SECONDS`: every broker checks
retention that often (log.retention.check.interval.ms), as Kafka's default 5 minutes does."""

from __future__ import annotations

import pytest

from demo.slowdown import parse, setup_of

CHECK = "log.retention.check.interval.ms"


def test_the_option_sets_every_brokers_retention_check_and_keeps_the_scenarios_other_settings():
    assert setup_of(parse([])).broker_properties == {CHECK: "1000"}
    setup = setup_of(parse(["--retention-check", "10", "--principals", "40"]))
    assert setup.broker_properties == {CHECK: "10000"}
    assert setup.producers == 40


@pytest.mark.parametrize("seconds", ["0", "61", "ten"])
def test_a_check_interval_outside_the_retention_time_is_refused_naming_it(seconds, capsys):
    with pytest.raises(SystemExit) as refused:
        parse(["--retention-check", seconds])
    assert refused.value.code == 2
    said = capsys.readouterr().err
    assert "--retention-check" in said and seconds in said
