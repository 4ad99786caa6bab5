"""`make demo SCENARIO=slowdown KAFKA=apache --kafka-scrape DURATION`: Prometheus scrapes the
brokers' quota sensors that often (as a PodMonitor without an interval would), and the run says so
in its title."""

from __future__ import annotations

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
