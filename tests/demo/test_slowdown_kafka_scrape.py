"""`make demo SCENARIO=slowdown KAFKA=apache --kafka-scrape DURATION`: Prometheus scrapes the
brokers' quota sensors that often (as a PodMonitor without an interval would), and the run says so
in its title."""

from __future__ import annotations

import pytest

from demo.producers import make_stack
from demo.slowdown import parse, setup_of, title


def test_the_brokers_scrape_reaches_the_stacks_prometheus_and_the_runs_title(tmp_path):
    setup = setup_of(parse(["--kafka-scrape", "PT30S", "--policy", "graceful-slowdown"]))
    assert setup.kafka_scrape == 30.0
    stack = make_stack(tmp_path, setup)
    assert stack.job_intervals() == {"kafka": "30s"}
    assert title("graceful-slowdown", setup=setup).endswith(", brokers scraped every 30 s")


def test_without_it_the_brokers_are_scraped_as_every_other_job():
    setup = setup_of(parse([]))
    assert setup.kafka_scrape is None
    assert "scraped" not in title("graceful-slowdown", setup=setup)


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ("PT0S", "--kafka-scrape: 'PT0S': must be a positive ISO 8601 duration"),
        ("30s", "--kafka-scrape: '30s': not an ISO 8601 duration"),
    ],
)
def test_a_scrape_interval_that_is_no_positive_duration_is_refused_naming_it(capsys, given, said):
    with pytest.raises(SystemExit) as exited:
        parse(["--kafka-scrape", given])
    assert exited.value.code == 2
    assert said in capsys.readouterr().err
