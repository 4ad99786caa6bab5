"""Detect-to-enforce with the recommended settings (what deploy/kubernetes ships), vs their sum.

Runs the demo scenario (real devcluster, exporter, Prometheus, Alertmanager, enforcer) on a fresh
stack per run, so Prometheus's scrape and rule-evaluation phases differ from run to run, with the
poll interval, scrape interval, throttle rule group interval and Alertmanager route read from the
Kubernetes manifests. The log dir crosses the limit just after a poll, the worst moment for the
exporter's wait. Measured: the time until Kafka's quotas are throttled; compared with the sum of
the waits the settings allow (poll + scrape + evaluation + group_wait).
    python -m bench.detect_to_enforce [--runs 4] [--settings recommended|demo]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from devkit import loop_settings, results_page

REFERENCE_BROKERS = 200
PLUGIN_CHECK_SECONDS = 60.0  # the in-broker Strimzi quota plugin's check interval


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--settings", choices=("recommended", "demo"), default="recommended")
    args = parser.parse_args(argv)
    results_page.arguments(parser, args)

    from demo import scenario
    from demo.stack import DemoStack

    loop = getattr(loop_settings, args.settings)()
    print(
        f"settings: {loop.name}: poll {loop.poll:g} s, scrape {loop.scrape:g} s, throttle rule "
        f"evaluation {loop.evaluation:g} s, group_wait {loop.group_wait:g} s",
        flush=True,
    )
    latencies = []
    for run in range(args.runs):
        with tempfile.TemporaryDirectory() as work, DemoStack(Path(work), loop=loop) as stack:
            timeline = scenario.Timeline()
            scenario.run(stack, timeline, log=lambda _: None, fill_after_poll=True)
            crossed = timeline.at(scenario.CROSSED)
            seen, fired, applied = (
                timeline.at(step) - crossed
                for step in (scenario.SEEN, scenario.FIRED, scenario.APPLIED)
            )
            latencies.append(applied)
            print(
                f"  run {run + 1}: exporter {seen:5.2f} s, alert firing {fired:5.2f} s, "
                f"quotas throttled {applied:5.2f} s",
                flush=True,
            )
    median = statistics.median(latencies)
    polls_per_second = REFERENCE_BROKERS / loop.poll
    print(f"detect-to-enforce over {args.runs} runs, limit crossed just after a poll")
    print(f"  sum of the configured waits (worst case)  {loop.worst_case:6.2f} s")
    print(f"  measured median                           {median:6.2f} s")
    print(f"  measured max                              {max(latencies):6.2f} s")
    print(f"  max / sum of the waits                    {max(latencies) / loop.worst_case:6.2f}x")
    print(f"  in-broker plugin check interval           {PLUGIN_CHECK_SECONDS:6.2f} s")
    print(
        f"cost of this poll interval on {REFERENCE_BROKERS} brokers: one DescribeCluster and "
        f"{REFERENCE_BROKERS} DescribeLogDirs (no topics) every {loop.poll:g} s = "
        f"{polls_per_second:g} requests/s in all, {1 / loop.poll:g}/s per broker "
        "(time of one poll: bench.poll_fanout)"
    )


if __name__ == "__main__":
    from bench.results import command_line

    raise SystemExit(command_line(__name__))
