"""`make demo`: the whole loop on loopback, with a readable timeline.

Starts a 3-broker devcluster (2 log dirs each, virtual capacity), the exporter (PT1S), the enforcer
(bearer token, journal in a temp dir), Prometheus (1 s scrape and rules) and Alertmanager routing to
the enforcer; sets client quotas, fills one log dir past the limit, waits until Kafka's quotas are
throttled, frees the space and waits until they are restored byte for byte. Exit code 0 only if
the loop closed. `--keep` (make demo KEEP=1) keeps the stack up until Ctrl-C.
`--scenario producers` (make demo SCENARIO=producers) runs demo/producers.py instead; versus,
slowdown, strimzi and failover (KAFKA=apache) run demo/versus.py, demo/slowdown.py,
demo/strimzi.py and demo/failover.py.
`--kafka apache` (make demo KAFKA=apache) runs it on a 3-node Apache Kafka cluster instead of
devcluster: its log dirs are 64 MiB tmpfs file systems, filled with real bytes by producing to a
topic on broker 1, freed by deleting that topic.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import sys
import tempfile
import threading
from pathlib import Path

from demo import scenario
from demo.stack import KAFKA_BACKENDS, STACK_PARTS, DemoStack
from devkit.kafka_cluster import KafkaClusterError
from devkit.kafka_dist import KafkaDistError
from kvq.interrupts import Interrupted

STACKS: dict[str, dict] = {
    "devcluster": {},
    "apache": {"kafka": "apache", "capacity_bytes": 64 << 20},
}
"""DemoStack's arguments per Kafka backend: real Kafka's log dirs are 64 MiB tmpfs file systems."""


REAL_KAFKA_SCENARIOS = ("versus", "slowdown", "strimzi", "failover")
"""Scenarios on a real Kafka cluster of their own: demo/<name>.py's main."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make demo", description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="keep the stack up until Ctrl-C")
    parser.add_argument(
        "--scenario",
        choices=("loop", "producers", "versus", "slowdown", "strimzi", "failover"),
        default="loop",
        help="loop (default): a control-API fill closes the loop; producers: real librdkafka "
        "producers fill a small disk, with kvq and then without it (demo/producers.py); "
        "versus (KAFKA=apache): one load against no guard, the Strimzi plugin and kvq (0/1 and "
        "graceful-slowdown); slowdown "
        "(KAFKA=apache): the 0/1 policy and graceful-slowdown on one load with retention; "
        "strimzi (KAFKA=apache): Strimzi's operators putting quotas back during a throttle; "
        "failover (KAFKA=apache): the acting enforcer replica killed mid-apply, twice",
    )
    parser.add_argument(
        "--kafka",
        choices=KAFKA_BACKENDS,
        default="devcluster",
        help="devcluster (default): the embedded imitation of Kafka; apache: a real 3-node Apache "
        "Kafka cluster (Maven's jars, `make kafka-deps`) on small tmpfs log dirs (root)",
    )
    args, rest = parser.parse_known_args(argv)
    if args.scenario == "producers":
        from demo import producers

        if args.keep:
            parser.error("--keep (KEEP=1) keeps the loop scenario's stack; producers stops its own")
        return producers.main([*rest, "--kafka", args.kafka])
    if args.scenario in REAL_KAFKA_SCENARIOS:
        if args.kafka != "apache" or args.keep:
            parser.error(
                f"{args.scenario} runs on real Kafka only (KAFKA=apache) and stops its own "
                "cluster(s)"
            )
        module = importlib.import_module(f"demo.{args.scenario}")
        return module.main(rest)
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    stop = threading.Event()
    with tempfile.TemporaryDirectory(prefix="kvq-demo-") as work:
        print(f"starting the demo stack in {work} ...", flush=True)
        timeline = scenario.Timeline()
        try:
            with DemoStack(Path(work), **STACKS[args.kafka]) as stack:
                timeline.mark(f"stack up: {STACK_PARTS[args.kafka]}")
                for name, url in stack.urls().items():
                    print(f"  {name:18} {url}")
                outcome = scenario.run(stack, timeline, log=lambda text: print(f"- {text}"))
                print("\ntimeline:")
                print(timeline.render())
                print(f"\ndetect-to-enforce latency: {outcome.detect_to_enforce_seconds:.1f} s")
                print("loop closed: quotas throttled on a full volume and restored exactly.")
                if args.keep:
                    print("\nthe stack stays up (Ctrl-C stops it):")
                    for name, url in stack.urls().items():
                        print(f"  {name:18} {url}")
                    with contextlib.suppress(KeyboardInterrupt):
                        stop.wait()
        except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM under run_until_interrupted
            print("\ninterrupted; stopping everything", file=sys.stderr)
            return exc.exit_code if isinstance(exc, Interrupted) else 130
        except (TimeoutError, KafkaClusterError, KafkaDistError) as exc:
            print("\ntimeline so far:")
            print(timeline.render())
            print(f"\ndemo failed: {exc}", file=sys.stderr)
            print(f"logs were in {work} (removed); rerun with KEEP=1 to inspect", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    from devkit.processes import run_until_interrupted

    raise SystemExit(run_until_interrupted(main))
