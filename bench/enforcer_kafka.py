"""The enforcer throttling and restoring 20,000 (entity, key) pairs: real Kafka next to devcluster.

One run, the same steps on each backend: 20,000 users with a `producer_byte_rate` of their own are
seeded; a real kvq-enforcer (the CLI, as users run it) gets a firing KafkaVolumeQuotaThrottle
webhook at factor 0.5, then the resolution. Measured from the webhook's POST: when the enforcer
answers (its plan written, altered and verified on one broker), and when every broker enforces the
new values. Kafka's brokers apply quota records from the metadata log in its order, so a marker
quota written after the enforcer answered (an `ip` entity, which the enforcer never touches) is
shown by a broker only once that broker has applied every value before it: each broker is asked
(DescribeClientQuotas, filtered on the marker) every 10 ms; once all show it, each broker's whole
answer is checked against the plan. Needs Java and Maven's Kafka jars (`make kafka-deps`); about 3
minutes.
    python -m bench.enforcer_kafka [--pairs 20000] [--devcluster-only]
    python -m bench.enforcer_kafka --pairs 5000 --compare-with /path/to/older/checkout
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from pathlib import Path

import requests

from devkit import results_page
from devkit.enforcer_process import TOKEN, running_enforcer

CLUSTER = "bench"
KEY = "producer_byte_rate"
FACTOR = 0.5
MARKER = (("ip", "192.0.2.1"),)  # TEST-NET-1: no client of this run connects from there
MARKER_KEY = "connection_creation_rate"


def originals(pairs: int) -> dict:
    """user -> its producer_byte_rate before the throttle: all different."""
    return {f"bench-user-{i:05d}": 1_000_000.0 + i for i in range(pairs)}


def throttled(value: float) -> float:
    """What the plan sets at FACTOR (rounded down, above the 8 KiB/s floor)."""
    return float(max(math.floor(value * FACTOR), 8192))


class Brokers:
    """DescribeClientQuotas asked of each broker on its own, and quotas altered."""

    def __init__(self, admin_properties: dict[str, str], node_ids: list[int]) -> None:
        from enforcer.quota_client import KafkaQuotaClient
        from kvq.kafka.admin_session import KafkaAdminSession

        self.node_ids = node_ids
        self.session = KafkaAdminSession(admin_properties, "kvq-bench", 30_000)
        self.client = KafkaQuotaClient(admin_properties, timeout_ms=30_000)
        # above any value an earlier run on the same cluster left (--compare-with runs several,
        # each over a second long); Kafka holds this key as a 32-bit int
        self.marker_value = float(int(time.time()) % 1_000_000_000)

    def close(self) -> None:
        self.session.close()
        self.client.close()

    def alter(self, values: dict[tuple, float]) -> None:
        from enforcer.quota_plan import Change
        from kvq.kafka.quota_entity import QuotaEntity

        self.client.alter(
            [Change(QuotaEntity.of(entity), key, v) for (entity, key), v in values.items()]
        )

    def describe_each(self, components: list[tuple[str, str]], strict: bool) -> dict[int, dict]:
        """Per broker {entity pairs: {key: value}} as that broker's metadata image has them."""
        from kafka.protocol.admin.client_quotas import DescribeClientQuotasRequest

        component = DescribeClientQuotasRequest.ComponentData

        def build(version: int):
            return DescribeClientQuotasRequest(
                version=version,
                components=[component(entity_type=t, match_type=0, match=n) for t, n in components],
                strict=strict,
            )

        answers = self.session.send_to_each(self.node_ids, build, DescribeClientQuotasRequest, 30.0)
        shown = {}
        for node_id, answer in answers.items():
            if isinstance(answer, Exception) or answer.error_code:
                raise RuntimeError(f"DescribeClientQuotas to broker {node_id}: {answer}")
            shown[node_id] = {
                tuple((e.entity_type, e.entity_name) for e in entry.entity): {
                    v.key: v.value for v in entry.values
                }
                for entry in answer.entries
            }
        return shown

    def every_broker_applied_so_far(self) -> float:
        """Write the next marker value; seconds until every broker shows it (10 ms polls)."""
        self.marker_value += 1
        started = time.monotonic()
        self.alter({(MARKER, MARKER_KEY): self.marker_value})
        pending = set(self.node_ids)
        while pending:
            shown = self.describe_each(list(MARKER), strict=True)
            pending = {
                n for n in pending if shown[n].get(MARKER, {}).get(MARKER_KEY) != self.marker_value
            }
            if pending:
                if time.monotonic() - started > 120:
                    raise TimeoutError(f"brokers {sorted(pending)} never showed the marker")
                time.sleep(0.01)
        return time.monotonic() - started

    def check(self, expected: dict[str, float]) -> None:
        """Every broker holds exactly `expected` for the bench users."""
        for node_id, shown in self.describe_each([], strict=False).items():
            held = {
                dict(entity).get("user"): values.get(KEY)
                for entity, values in shown.items()
                if len(entity) == 1 and str(dict(entity).get("user", "")).startswith("bench-user")
            }
            wrong = sum(1 for user, value in expected.items() if held.get(user) != value)
            if wrong:
                raise RuntimeError(f"broker {node_id}: {wrong} of {len(expected)} values differ")


def measure(
    name: str,
    admin_properties: dict,
    node_ids: list[int],
    pairs: int,
    work: Path,
    code: Path | None = None,
):
    """(throttle: answered, every broker; restore: answered, every broker) in seconds, with the
    enforcer of checkout `code` (None: this one)."""
    from devkit.alertmanager import throttle_webhook

    before = originals(pairs)
    brokers = Brokers(admin_properties, node_ids)
    try:
        brokers.alter({((("user", u),), KEY): v for u, v in before.items()})
        brokers.every_broker_applied_so_far()
        brokers.check(before)
        times = []
        with running_enforcer(admin_properties, work, code=code) as enforcer:
            session = requests.Session()
            session.headers["Authorization"] = f"Bearer {TOKEN}"
            for factor, expected in (
                (FACTOR, {u: throttled(v) for u, v in before.items()}),
                (None, before),
            ):
                started = time.monotonic()
                answer = session.post(
                    enforcer.url + "/webhook",
                    json=throttle_webhook(cluster=CLUSTER, factor=factor),
                    timeout=300,
                )
                answer.raise_for_status()
                answered = time.monotonic() - started
                enforced = answered + brokers.every_broker_applied_so_far()
                brokers.check(expected)
                times += [answered, enforced]
                print(
                    f"  {name}: {'throttle' if factor else 'restore'}: answered {answered:.2f} s, "
                    f"every broker {enforced:.2f} s",
                    flush=True,
                )
        return tuple(times)
    finally:
        brokers.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=20_000)
    parser.add_argument(
        "--devcluster-only", action="store_true", help="skip real Kafka (no Java needed)"
    )
    parser.add_argument(
        "--compare-with",
        type=Path,
        metavar="CHECKOUT",
        help="on devcluster only: the enforcer of this checkout (e.g. an older commit's "
        "worktree) next to this one's, alternating, the same cluster and pairs",
    )
    args = parser.parse_args(argv)
    results_page.arguments(parser, args, kafka=not args.devcluster_only)
    if args.compare_with is not None:
        compare(args.pairs, args.compare_with.resolve())
        return

    from devcluster.cluster import DevCluster
    from devkit.kafka_cluster import KafkaCluster

    results = {}
    with tempfile.TemporaryDirectory(prefix="kvq-bench-enforcer-") as temp:
        work = Path(temp)
        (work / "devcluster").mkdir()
        with DevCluster(brokers=3, log_dirs_per_broker=1, data_dir=work / "dc-data") as cluster:
            results["devcluster"] = measure(
                "devcluster",
                {"bootstrap.servers": cluster.bootstrap},
                [0, 1, 2],
                args.pairs,
                work / "devcluster",
            )
        if args.devcluster_only:
            return
        (work / "kafka-enforcer").mkdir()
        with KafkaCluster(work / "kafka", nodes=3, log_dirs_per_node=1) as kafka:
            results["kafka"] = measure(
                "Kafka", kafka.admin_properties, kafka.node_ids, args.pairs, work / "kafka-enforcer"
            )
    dc, kafka = results["devcluster"], results["kafka"]
    print(f"enforcer: {args.pairs:,} (user, producer_byte_rate) pairs, factor {FACTOR}, then 1.0")
    print(f"  {'':44}{'devcluster':>12}{'Kafka 3 nodes':>15}{'ratio':>8}")
    rows = ("throttle: enforcer answered", "throttle: every broker enforces",
            "restore: enforcer answered", "restore: every broker enforces")  # fmt: skip
    for index, row in enumerate(rows):
        print(
            f"  {row:44}{dc[index]:>10.2f} s{kafka[index]:>13.2f} s"
            f"{kafka[index] / dc[index]:>7.1f}x"
        )


def compare(pairs: int, other: Path, rounds: int = 2) -> None:
    """This checkout's enforcer and `other`'s on one devcluster, alternating `rounds` times (the
    machine's load changes over minutes); the best of each."""
    from devcluster.cluster import DevCluster

    here = Path(__file__).resolve().parents[1]
    runs: dict[str, list[tuple]] = {"this": [], str(other): []}
    with tempfile.TemporaryDirectory(prefix="kvq-bench-enforcer-") as temp:
        work = Path(temp)
        with DevCluster(brokers=3, log_dirs_per_broker=1, data_dir=work / "dc-data") as cluster:
            properties = {"bootstrap.servers": cluster.bootstrap}
            for index in range(rounds * 2):
                name, code = ("this", here) if index % 2 else (str(other), other)
                run_dir = work / f"run-{index}"
                run_dir.mkdir()
                runs[name].append(measure(name, properties, [0, 1, 2], pairs, run_dir, code))
    print(f"enforcer on devcluster: {pairs:,} (user, producer_byte_rate) pairs, best of {rounds}")
    print(f"  {'':32}{'throttle answered':>19}{'restore answered':>18}")
    for name, times in runs.items():
        print(
            f"  {name[-32:]:32}{min(t[0] for t in times):>17.2f} s"
            f"{min(t[2] for t in times):>16.2f} s"
        )


if __name__ == "__main__":
    from bench.results import command_line

    raise SystemExit(command_line(__name__))
