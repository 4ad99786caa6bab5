"""The exporter's poll on real Kafka with many partitions: its duration and the brokers' CPU.

A real 3-node Kafka cluster (devkit/kafka_cluster.py) holding 10,000 partitions. Measured in one
run: the exporter's poll (DescribeCluster, then DescribeLogDirs with `topics=[]`, directory totals
only, to every broker at once) and, for comparison, DescribeLogDirs asking for every topic (what a
client that lists partitions sends). The brokers' CPU is read from each JVM's /proc/<pid>/stat
(utime + stime) over windows of the same length: polling every `--interval` seconds, and idle
(no poll), alternately; the CPU a poll costs is the difference divided by the polls. Needs root
(tmpfs log dirs), Java and Maven's Kafka jars (`make kafka-deps`); about 5 minutes.
    python -m bench.exporter_poll_kafka [--partitions 10000] [--polls 40]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.timing import cpu_seconds
from devkit import results_page

TOPIC_PARTITIONS = 100
"""Partitions per topic; topics are created a few at a time (the controller writes every
partition's records in one batch of at most 10,000)."""
TOPICS_PER_REQUEST = 10


def create_partitions(bootstrap: str, partitions: int) -> None:
    """`partitions` (one replica each) in topics of TOPIC_PARTITIONS, created TOPICS_PER_REQUEST
    at a time."""
    import confluent_kafka.admin as ck

    admin = ck.AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    sizes = [TOPIC_PARTITIONS] * (partitions // TOPIC_PARTITIONS)
    sizes += [partitions % TOPIC_PARTITIONS] if partitions % TOPIC_PARTITIONS else []
    names = [f"bench-{i:04d}" for i in range(len(sizes))]
    for start in range(0, len(names), TOPICS_PER_REQUEST):
        batch = slice(start, start + TOPICS_PER_REQUEST)
        futures = admin.create_topics(
            [ck.NewTopic(n, s, 1) for n, s in zip(names[batch], sizes[batch], strict=True)],
            request_timeout=120,
        )
        for future in futures.values():
            future.result(180)


def hosted_partitions(session, node_ids: list[int]) -> int:
    """Partitions the brokers report in their log dirs (DescribeLogDirs, every topic)."""
    answers = describe_every_topic(session, node_ids)
    return sum(
        len(topic.partitions)
        for answer in answers.values()
        for result in answer.results
        for topic in result.topics
    )


def describe_every_topic(session, node_ids: list[int]) -> dict:
    """DescribeLogDirs with `topics=None` (every partition of every log dir) to every broker."""
    from kafka.protocol.admin import DescribeLogDirsRequest

    answers = session.send_to_each(
        node_ids,
        lambda version: DescribeLogDirsRequest(version=version, topics=None),
        DescribeLogDirsRequest,
        60.0,
    )
    failed = {n: a for n, a in answers.items() if isinstance(a, Exception)}
    if failed:
        raise RuntimeError(f"DescribeLogDirs failed: {failed}")
    return answers


def cpu_per_poll(
    poll: Callable[[], object], pids: list[int], polls: int, interval: float, rounds: int
) -> tuple[float, float, float]:
    """(median busy-window CPU, median idle-window CPU, CPU per poll) in seconds: each round a
    window of `polls` polls `interval` apart, then an idle window as long."""
    busy, idle = [], []
    for _ in range(rounds):
        before, started = cpu_seconds(pids), time.monotonic()
        for index in range(polls):
            poll()
            time.sleep(max(0.0, started + (index + 1) * interval - time.monotonic()))
        busy.append(cpu_seconds(pids) - before)
        before = cpu_seconds(pids)
        time.sleep(polls * interval)
        idle.append(cpu_seconds(pids) - before)
    busy_cpu, idle_cpu = statistics.median(busy), statistics.median(idle)
    return busy_cpu, idle_cpu, max(0.0, busy_cpu - idle_cpu) / polls


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--polls", type=int, default=40, help="polls per CPU window")
    parser.add_argument("--interval", type=float, default=0.25, help="seconds between polls")
    parser.add_argument("--rounds", type=int, default=3, help="busy/idle window pairs")
    args = parser.parse_args(argv)
    results_page.arguments(parser, args, kafka=True)

    from bench.timing import median_seconds
    from devkit.kafka_cluster import KafkaCluster
    from devkit.processes import wait_until
    from exporter.cluster_client import KafkaClusterClient
    from exporter.cluster_volume_source import ClusterVolumeSource
    from kvq.kafka.admin_session import KafkaAdminSession

    with (
        tempfile.TemporaryDirectory(prefix="kvq-bench-poll-") as work,
        KafkaCluster(Path(work), nodes=3, log_dirs_per_node=1, log_dir_bytes=1 << 30) as kafka,
    ):
        started = time.monotonic()
        create_partitions(kafka.bootstrap, args.partitions)
        session = KafkaAdminSession(kafka.admin_properties, "kvq-bench", 60_000)
        client = KafkaClusterClient(kafka.admin_properties, timeout_seconds=30)
        try:
            wait_until(
                lambda: hosted_partitions(session, kafka.node_ids) == args.partitions,
                600,
                interval=2.0,
                what=f"{args.partitions} partitions in the brokers' log dirs",
            )
            created = time.monotonic() - started
            source = ClusterVolumeSource(client, time.time)

            def exporter_poll() -> None:
                observation = source.observe()
                if not observation.succeeded:
                    raise RuntimeError(f"poll failed: {observation.error}")

            def every_topic() -> None:
                describe_every_topic(session, kafka.node_ids)

            exporter_poll()  # connections and API versions
            every_topic()
            poll_seconds = median_seconds(exporter_poll, 21)
            every_topic_seconds = median_seconds(every_topic, 5)
            pids = [node.process.proc.pid for node in kafka.node_list if node.process]
            busy, idle, per_poll = cpu_per_poll(
                exporter_poll, pids, args.polls, args.interval, args.rounds
            )
            _, _, per_every_topic = cpu_per_poll(
                every_topic, pids, max(4, args.polls // 8), args.interval * 8, 1
            )
        finally:
            client.close()
            session.close()

    window = args.polls * args.interval
    print(
        f"exporter poll on real Kafka: 3 brokers, {args.partitions:,} partitions "
        f"({args.partitions / 3:,.0f} per broker; created in {created:.0f} s)"
    )
    rows = [
        (
            "one poll (DescribeCluster, DescribeLogDirs with topics=[])",
            f"{poll_seconds * 1000:.1f} ms",
        ),
        ("DescribeLogDirs of every topic, for comparison", f"{every_topic_seconds * 1000:.1f} ms"),
        ("every-topic / exporter poll", f"{every_topic_seconds / poll_seconds:.1f}x"),
        ("brokers' CPU per exporter poll (all 3 brokers)", f"{per_poll * 1000:.1f} ms"),
        ("brokers' CPU per every-topic DescribeLogDirs", f"{per_every_topic * 1000:.1f} ms"),
    ]
    for what, value in rows:
        print(f"  {what:58}{value:>10}")
    print(
        f"  brokers' CPU in {window:g} s windows (3 JVMs, median of {args.rounds}): "
        f"{args.polls} polls {busy:.2f} s, idle {idle:.2f} s"
    )
    print(
        f"  at one poll every 5 s: {per_poll / 5 * 100 / 3:.3f} % of one core per broker, "
        f"against {idle / window * 100 / 3:.1f} % idle"
    )


if __name__ == "__main__":
    from bench.results import command_line

    raise SystemExit(command_line(__name__))
