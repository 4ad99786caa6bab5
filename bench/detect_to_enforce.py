"""Detect-to-enforce latency of the whole loop vs the sum of its configured intervals.

Runs the demo scenario (real devcluster, exporter, Prometheus, Alertmanager, enforcer) a few
times and compares the time from a volume crossing the limit to Kafka's quotas being throttled
with the worst case the configuration allows: poll interval + scrape interval + rule evaluation
interval + Alertmanager group_wait (each 1 s in the demo stack).
    python -m bench.detect_to_enforce [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

CONFIGURED_SECONDS = {
    "exporter poll": 1.0,
    "scrape": 1.0,
    "rule evaluation": 1.0,
    "group_wait": 1.0,
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)

    from demo import scenario
    from demo.stack import DemoStack

    latencies = []
    for run in range(args.runs):
        with tempfile.TemporaryDirectory() as work, DemoStack(Path(work)) as stack:
            outcome = scenario.run(stack, scenario.Timeline(), log=lambda _: None)
            latencies.append(outcome.detect_to_enforce_seconds)
            print(f"  run {run + 1}: detect-to-enforce {latencies[-1]:.2f} s", flush=True)
    budget = sum(CONFIGURED_SECONDS.values())
    median = statistics.median(latencies)
    print(f"detect-to-enforce over {args.runs} runs (demo stack, all intervals 1 s)")
    print(f"  configured worst case ({' + '.join(CONFIGURED_SECONDS)}) {budget:6.2f} s")
    print(f"  measured median                                   {median:6.2f} s")
    print(f"  measured max                                      {max(latencies):6.2f} s")
    print(f"  median / configured worst case                    {median / budget:6.2f}x")


if __name__ == "__main__":
    main()
