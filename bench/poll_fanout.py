"""Poll fan-out: DescribeLogDirs to 200 brokers with 20 ms latency each.

Compares, in one run on one devcluster: the exporter's concurrent fan-out, kafka-python's stock
sequential `describe_log_dirs`, and one round trip to a single broker; and what a whole poll costs
(the exporter's DescribeCluster, then the fan-out). Times are medians of `--rounds` calls.

devcluster serves all brokers from one process on this machine, so its own work for the 200
requests (printed as its CPU per fan-out) is serial here where a real fleet spreads it over 200
machines: the fan-out's excess over one round trip is the exporter's CPU and devcluster's.
    python -m bench.poll_fanout [--brokers 200] [--latency-ms 20] [--rounds 7]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import requests

from bench.timing import child_pids, cpu_seconds, median_seconds
from devkit import results_page


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--brokers", type=int, default=200)
    parser.add_argument("--latency-ms", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)
    results_page.arguments(parser, args)

    from kafka.admin import KafkaAdminClient

    from demo.stack import devcluster_process
    from exporter.cluster_client import ClusterError, KafkaClusterClient

    # devcluster in its own process: the exporter's fan-out does not share a GIL with the brokers
    with (
        tempfile.TemporaryDirectory() as data,
        devcluster_process(Path(data), args.brokers, 1) as (bootstrap, control_url),
    ):
        for broker in range(args.brokers):
            requests.put(
                f"{control_url}/brokers/{broker}/faults",
                json={"latency_ms": args.latency_ms},
                timeout=10,
            ).raise_for_status()
        ids = list(range(args.brokers))
        ours = KafkaClusterClient({"bootstrap.servers": bootstrap}, timeout_seconds=60)
        stock = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=60000)
        try:
            warm = ours.describe_log_dirs(ids)  # connect to every broker once
            assert not any(isinstance(r, ClusterError) for r in warm.values()), warm
            stock.describe_log_dirs(topic_partitions={}, brokers=ids)
            assert [b.broker_id for b in ours.active_brokers()] == ids
            members = median_seconds(ours.active_brokers, args.rounds)
            poll = median_seconds(
                lambda: ours.describe_log_dirs(b.broker_id for b in ours.active_brokers()),
                args.rounds,
            )
            fan_out = median_seconds(lambda: ours.describe_log_dirs(ids), args.rounds)
            devcluster = child_pids()
            own_before, theirs_before = time.process_time(), cpu_seconds(devcluster)
            for _ in range(args.rounds):
                ours.describe_log_dirs(ids)
            own_cpu = (time.process_time() - own_before) / args.rounds
            devcluster_cpu = (cpu_seconds(devcluster) - theirs_before) / args.rounds
            single = median_seconds(lambda: ours.describe_log_dirs([0]), args.rounds)
            sequential = median_seconds(
                lambda: stock.describe_log_dirs(topic_partitions={}, brokers=ids),
                max(1, args.rounds // 3),
            )
        finally:
            ours.close()
            stock.close()
    print(f"poll fan-out: {args.brokers} brokers, {args.latency_ms} ms latency each")
    print(f"  one round trip (1 broker)            {single * 1000:8.1f} ms")
    print(f"  exporter fan-out ({args.brokers} brokers)     {fan_out * 1000:8.1f} ms")
    print(f"  CPU per fan-out: exporter            {own_cpu * 1000:8.1f} ms")
    print(f"  CPU per fan-out: devcluster (all {args.brokers}) {devcluster_cpu * 1000:8.1f} ms")
    print(f"  kafka-python sequential ({args.brokers})      {sequential * 1000:8.1f} ms")
    print(f"  active brokers (DescribeCluster)     {members * 1000:8.1f} ms")
    print(f"  whole poll (active brokers + fan-out){poll * 1000:8.1f} ms")
    print(f"  fan-out / one round trip             {fan_out / single:8.2f}x")
    print(f"  sequential / fan-out                 {sequential / fan_out:8.1f}x")


if __name__ == "__main__":
    from bench.results import command_line

    raise SystemExit(command_line(__name__))
