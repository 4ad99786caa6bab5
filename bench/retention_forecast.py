"""What retention will delete, foreseen from Kafka itself: ListOffsets by timestamp against the log
start offset retention has reached by then.

Retention deletes a segment once its newest record is `retention.ms` old, at the next check, so
the records written before a time are gone a retention time, a segment (`segment.ms`) and a check
later at the latest. ListOffsets by timestamp gives a partition's first offset written at or after
a time, from the same record timestamps retention goes by: asked for `now + ahead - retention -
lag`, it is the log start offset foreseen `ahead` seconds from now. One broker, a topic of two
partitions with a short retention and segment, checks every second, a librdkafka producer at a
steady rate; every 2 s, per partition, the log start offset and the forecasts for each time
ahead, with no lag and with a segment and a check. Printed per lag: how many forecasts foresaw
more deleted than Kafka had deleted by then (a forecast a policy could not trust), and by how
many seconds of the partition's writes the others fell short (what trusting them keeps back).
The design it serves: docs/policy-study.md#foreseeing-retention-from-its-retention-time.
About 3 minutes.
    python -m bench.retention_forecast [--retention 60] [--segment 5] [--seconds 170]
"""

from __future__ import annotations

import argparse
import bisect
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from devkit import results_page
from devkit.kafka_cluster import KafkaCluster
from devkit.processes import wait_until

TOPIC = "forecast"
PARTITIONS = (0, 1)
AHEAD = (0, 10, 20, 30)
"""Seconds ahead of each reading that retention's progress is foreseen for."""
EVERY_S = 2.0
CHECK_S = 1.0
"""The broker's log.retention.check.interval.ms, in seconds."""
MESSAGES_PER_S = 300
Settings = dict[str, str | int | float | bool]
"""librdkafka's configuration, as confluent-kafka types it."""
VALUE = b"x" * 1000


@dataclass(frozen=True)
class Reading:
    """One partition at one moment: its log start offset and, per lag, the offsets foreseen for
    each of AHEAD."""

    seconds: float
    partition: int
    start_offset: int
    foreseen: dict[float, tuple[int, ...]]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--retention", type=int, default=60, help="retention.ms in seconds (60)")
    parser.add_argument("--segment", type=int, default=5, help="segment.ms in seconds (5)")
    parser.add_argument(
        "--seconds", type=int, default=170, help="how long the producer writes (170)"
    )
    args = parser.parse_args(argv)
    if not 1 <= args.segment < args.retention <= 600:
        parser.error(
            f"--segment {args.segment} --retention {args.retention}: "
            "1 <= segment < retention <= 600 seconds"
        )
    if args.seconds < args.retention + max(AHEAD) + 20:
        parser.error(f"--seconds {args.seconds}: at least retention + {max(AHEAD) + 20}")
    results_page.arguments(parser, args)
    lags = (0.0, args.segment + CHECK_S)
    with tempfile.TemporaryDirectory(prefix="kvq-bench-retention-forecast-") as temp:
        readings = observe(Path(temp), args.retention, args.segment, args.seconds, lags)
    print(
        f"topic: retention.ms {args.retention * 1000}, segment.ms {args.segment * 1000}, "
        f"{len(PARTITIONS)} partitions; log.retention.check.interval.ms {CHECK_S * 1000:.0f}; "
        f"{MESSAGES_PER_S} messages of {len(VALUE)} B a second for {args.seconds} s"
    )
    for lag in lags:
        report(readings, lag)


def observe(
    work: Path, retention: int, segment: int, seconds: int, lags: tuple[float, ...]
) -> list[Reading]:
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    check = {"log.retention.check.interval.ms": str(round(CHECK_S * 1000))}
    with KafkaCluster(
        work, nodes=1, log_dirs_per_node=1, log_dir_bytes=128 << 20, broker_properties=check
    ) as kafka:
        properties: Settings = {**kafka.admin_properties}
        config = {"retention.ms": str(retention * 1000), "segment.ms": str(segment * 1000)}
        topic = NewTopic(TOPIC, len(PARTITIONS), 1, config=config)
        admin = AdminClient(properties)  # held: its futures fail once it is collected
        for future in admin.create_topics([topic]).values():
            future.result()
        consumer = Consumer({**properties, "group.id": "kvq-bench", "enable.auto.commit": False})
        try:

            def start_offset(partition: int) -> int:
                low, _ = consumer.get_watermark_offsets(
                    TopicPartition(TOPIC, partition), timeout=5, cached=False
                )
                return low

            def first_written_at(partition: int, at: float) -> int:
                # one timestamp per request: librdkafka keeps one per partition
                (found,) = consumer.offsets_for_times(
                    [TopicPartition(TOPIC, partition, round(at * 1000))], timeout=5
                )
                return found.offset

            wait_until(lambda: all(start_offset(p) == 0 for p in PARTITIONS), 60, what="leaders")
            stop = threading.Event()
            writer = threading.Thread(target=produce, args=(properties, stop), daemon=True)
            writer.start()
            readings = []
            began = time.time()
            try:
                while time.time() - began < seconds:
                    now = time.time()
                    for partition in PARTITIONS:
                        foreseen = {
                            lag: tuple(
                                first_written_at(partition, now + ahead - retention - lag)
                                for ahead in AHEAD
                            )
                            for lag in lags
                        }
                        readings.append(
                            Reading(now - began, partition, start_offset(partition), foreseen)
                        )
                    time.sleep(max(0.0, EVERY_S - (time.time() - now)))
                    if len(readings) % round(30 / EVERY_S * len(PARTITIONS)) == 0:
                        print(f"  {time.time() - began:3.0f} s of {seconds}", flush=True)
            finally:
                stop.set()
                writer.join(30)
            return readings
        finally:
            consumer.close()


def produce(properties: Settings, stop: threading.Event) -> None:
    from confluent_kafka import Producer

    producer = Producer({**properties, "linger.ms": 5})
    sent, began = 0, time.monotonic()
    while not stop.is_set():
        producer.produce(TOPIC, VALUE, partition=sent % len(PARTITIONS))
        sent += 1
        producer.poll(0)
        time.sleep(max(0.0, sent / MESSAGES_PER_S - (time.monotonic() - began)))
    producer.flush(10)


def report(readings: list[Reading], lag: float) -> None:
    """Each forecast against the log start offset read at or after the time it was for."""
    wrong = judged = 0
    short: list[float] = []
    per_partition_s = MESSAGES_PER_S / len(PARTITIONS)
    for partition in PARTITIONS:
        mine = [r for r in readings if r.partition == partition]
        times = [r.seconds for r in mine]
        for reading in mine:
            for ahead, offset in zip(AHEAD, reading.foreseen[lag], strict=True):
                later = bisect.bisect_left(times, reading.seconds + ahead)
                if offset < 0 or later == len(mine):
                    continue  # no record that late yet, or not read that late
                judged += 1
                reached = mine[later].start_offset
                wrong += reached < offset
                if reached >= offset:
                    short.append((reached - offset) / per_partition_s)
    short.sort()
    print(f"\nlag {lag:.0f} s (retention time + {lag:.0f} s):")
    print(f"  forecasts judged                          {judged:6d}")
    print(f"  foresaw more deleted than Kafka had       {wrong:6d} ({wrong / judged:.0%})")
    if short:
        print(
            f"  the others short by (s of writes)   median {short[len(short) // 2]:5.1f}, "
            f"most {short[-1]:5.1f}"
        )


if __name__ == "__main__":
    from bench.results import command_line

    raise SystemExit(command_line(__name__))
