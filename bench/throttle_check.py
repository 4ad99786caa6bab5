"""The check of a throttle in force at 20,000 pairs: what it costs, and how fast a reset is undone.

On a real 1-node Apache Kafka cluster (KRaft, broker and controller in one JVM) 20,000 users get a
`producer_byte_rate` of their own, and a kvq-enforcer (the CLI) throttles them all at factor 0.5.
While the throttle holds, for `--window` seconds each, side by side in one run: the enforcer with
its check at the default (`kvq.enforcer.throttle.check.interval=PT0.25S`) and with the check off
(`PT0S`, only the reconcile round every 30 s looks). Measured: the CPU time the Kafka JVM and the
enforcer process used per second of the window (from /proc), and the checks made. Then, with the
check on, a reconciler resets 100 users' values to their originals in one request (as Strimzi's
User Operator batches them) and again all 20,000: the time until every one is throttled again
(every value read back every 50 ms). Needs Java and Maven's Kafka jars; about 4 minutes.
    python -m bench.throttle_check [--pairs 20000] [--window 30]
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import requests

from bench.timing import cpu_seconds
from devkit import results_page
from devkit.alertmanager import throttle_webhook
from devkit.enforcer_process import TOKEN, RunningEnforcer, running_enforcer
from devkit.kafka_cluster import KafkaCluster
from devkit.processes import wait_until
from enforcer.quota_client import KafkaQuotaClient
from enforcer.quota_plan import Change
from kvq.kafka.quota_entity import QuotaEntity

CLUSTER = "bench"
KEY = "producer_byte_rate"
FACTOR = 0.5
CHECK = "kvq.enforcer.throttle.check.interval"
MODES = {"check at PT0.25S (default)": "PT0.25S", "check off (PT0S)": "PT0S"}


def originals(pairs: int) -> dict[QuotaEntity, float]:
    return {QuotaEntity.user(f"bench-user-{i:05d}"): 1_000_000.0 + i for i in range(pairs)}


def throttled(value: float) -> float:
    return float(max(math.floor(value * FACTOR), 8192))


def metric(url: str, name: str) -> float:
    for line in requests.get(url + "/metrics", timeout=30).text.splitlines():
        if line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    raise RuntimeError(f"{name} not on the enforcer's /metrics")


def post(enforcer: RunningEnforcer, factor: float | None) -> None:
    answer = requests.post(
        enforcer.url + "/webhook",
        json=throttle_webhook(cluster=CLUSTER, factor=factor),
        headers={"Authorization": f"Bearer {TOKEN}"},
        timeout=600,
    )
    answer.raise_for_status()


def window(
    broker_pid: int, enforcer: RunningEnforcer, seconds: float
) -> tuple[float, float, float]:
    """(Kafka CPU s/s, enforcer CPU s/s, checks/s) over `seconds` of a throttle held."""
    checks = "kafka_volume_quota_enforcer_throttle_checks_total"
    broker, own = cpu_seconds([broker_pid]), cpu_seconds([enforcer.pid])
    looks = metric(enforcer.url, checks)
    started = time.monotonic()
    time.sleep(seconds)  # the window measured: nothing else runs meanwhile
    took = time.monotonic() - started
    return (
        (cpu_seconds([broker_pid]) - broker) / took,
        (cpu_seconds([enforcer.pid]) - own) / took,
        (metric(enforcer.url, checks) - looks) / took,
    )


def undo_time(client: KafkaQuotaClient, before: dict[QuotaEntity, float], count: int) -> float:
    """Reset `count` users to their originals; seconds until every one shows throttled again."""
    reset = dict(list(before.items())[:count])
    client.alter([Change(entity, KEY, value) for entity, value in reset.items()])
    started = time.monotonic()

    def all_throttled() -> bool:
        now = client.describe()
        return all(now.get(e, {}).get(KEY) == throttled(v) for e, v in reset.items())

    wait_until(all_throttled, 120, interval=0.05, what=f"{count} resets throttled again")
    return time.monotonic() - started


def measure(
    kafka: KafkaCluster, work: Path, pairs: int, seconds: float, log: Callable[[str], None]
) -> tuple[dict[str, tuple[float, float, float]], dict[int, float]]:
    before = originals(pairs)
    client = KafkaQuotaClient(kafka.admin_properties, timeout_ms=60_000)
    broker_pid = kafka.node(kafka.node_ids[0]).process.proc.pid  # type: ignore[union-attr]
    costs, undo = {}, {}
    try:
        client.alter([Change(entity, KEY, value) for entity, value in before.items()])
        for index, (mode, interval) in enumerate(MODES.items()):
            run = work / f"enforcer-{index}"
            run.mkdir()
            with running_enforcer(
                kafka.admin_properties, run, cluster=CLUSTER, settings={CHECK: interval}
            ) as enforcer:
                post(enforcer, FACTOR)
                log(f"  {mode}: {pairs:,} pairs throttled; measuring {seconds:.0f} s ...")
                costs[mode] = window(broker_pid, enforcer, seconds)
                if interval != "PT0S":
                    for count in (100, pairs):
                        undo[count] = undo_time(client, before, count)
                        log(f"  {count:,} resets throttled again in {undo[count]:.2f} s")
                post(enforcer, None)
    finally:
        client.close()
    return costs, undo


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=20_000)
    parser.add_argument("--window", type=float, default=30.0, help="seconds per mode (30)")
    args = parser.parse_args(argv)
    results_page.arguments(parser, args, kafka=True)
    with tempfile.TemporaryDirectory(prefix="kvq-bench-check-") as temp:
        work = Path(temp)
        with KafkaCluster(work / "kafka", nodes=1, log_dirs_per_node=1) as kafka:
            costs, undo = measure(kafka, work, args.pairs, args.window, print)
    print(
        f"\nthe check of a throttle in force: {args.pairs:,} (user, {KEY}) pairs at factor "
        f"{FACTOR}, a 1-node Kafka cluster, {args.window:.0f} s per row"
    )
    print(f"  {'':30}{'Kafka CPU':>12}{'enforcer CPU':>15}{'checks':>10}")
    for mode, (broker, own, looks) in costs.items():
        print(f"  {mode:30}{broker:>10.1%}  {own:>13.1%}  {looks:>6.2f}/s")
    on, off = costs[next(iter(MODES))], costs["check off (PT0S)"]
    print(
        f"  {'the check costs':30}{on[0] - off[0]:>+10.1%}  {on[1] - off[1]:>+13.1%}  (of one core)"
    )
    for count, took in undo.items():
        print(f"  {count:,} values reset by a reconciler: throttled again in {took:.2f} s")


if __name__ == "__main__":
    from bench.results import command_line

    raise SystemExit(command_line(__name__))
