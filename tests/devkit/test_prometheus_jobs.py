"""devkit.prometheus: a scrape job with an interval of its own is scraped at it, the others at the
global interval (the slowdown bench's --kafka-scrape: the brokers scraped as a PodMonitor without
an interval would be)."""

from __future__ import annotations

from devkit.processes import server_port, wait_until
from devkit.prometheus import run_prometheus


def test_a_job_given_its_own_interval_is_scraped_at_it_the_others_at_the_global_one(tmp_path):
    # Prometheus scrapes itself: two jobs on its own /metrics, one of them every 30 s.
    port = server_port()
    me = [f"127.0.0.1:{port}"]
    with run_prometheus(
        tmp_path, targets={"often": me, "kafka": me}, port=port, job_intervals={"kafka": "30s"}
    ) as prometheus:

        def intervals() -> dict[str, str]:
            targets = prometheus.api("targets")["activeTargets"]
            return {t["labels"]["job"]: t["scrapeInterval"] for t in targets}

        wait_until(lambda: len(intervals()) == 2, 30, what="both jobs' targets")
        assert intervals() == {"often": "1s", "kafka": "30s"}
