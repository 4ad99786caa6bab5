"""devcluster produce throughput (3 brokers, replication factor 2) next to the disk's own speed.

A kvq-devcluster process (its own core) takes a librdkafka producer's batches (acks=all, 6
partitions, RF 2: every byte is written twice) for a fixed volume; printed: acknowledged MB/s of
produce, MB/s written to disk by the brokers (x2), and the same disk's sequential write speed
(1 MiB os.write calls into the data dir, as the brokers write, without and with fsync).
    python -m bench.produce_throughput [--megabytes 400]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from statistics import median
from typing import Any

from devkit import results_page

MIB = 1 << 20


def disk_write_speed(directory: Path, megabytes: int, sync: bool) -> float:
    """MB/s of sequential 1 MiB writes to a new file in ``directory``."""
    path = directory / "disk-speed.bin"
    chunk = os.urandom(MIB)
    started = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for _ in range(megabytes):
            os.write(fd, chunk)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    elapsed = time.perf_counter() - started
    path.unlink()
    return megabytes * MIB / elapsed / 1e6


def produce_speed(work: Path, megabytes: int) -> tuple[float, int]:
    """(acknowledged MB/s, bytes on disk) of one producer into a 3-broker RF-2 devcluster."""
    import confluent_kafka.admin as ck

    from demo.stack import devcluster_process
    from devkit.producer_load import LoadProducer

    with devcluster_process(work / "data", brokers=3, log_dirs_per_broker=1) as (bootstrap, _):
        admin = ck.AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
        admin.create_topics([ck.NewTopic("bench", 6, 2)])["bench"].result(30)
        del admin
        batching: dict[str, Any] = {
            "linger.ms": "20",
            "batch.size": str(MIB),
            "queue.buffering.max.kbytes": str(256 * 1024),
        }
        producer = LoadProducer(bootstrap, acks="all", **batching)
        value = os.urandom(10_000)
        count = megabytes * MIB // len(value)
        try:
            started = time.perf_counter()
            sent = 0
            while sent < count:
                if producer.send("bench", value):
                    sent += 1
            assert producer.producer.flush(120) == 0, "not every message was acknowledged"
            elapsed = time.perf_counter() - started
        finally:
            producer.close()
        if producer.log.errors:
            raise RuntimeError(f"produce errors: {dict(producer.log.errors)}")
        on_disk = sum(f.stat().st_size for f in (work / "data").rglob("00000000000000000000.log"))
        return producer.log.acked_bytes() / elapsed / 1e6, on_disk


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=int, default=400)
    args = parser.parse_args(argv)
    results_page.arguments(parser, args)
    with tempfile.TemporaryDirectory(prefix="kvq-bench-produce-") as work_name:
        work = Path(work_name)
        plain = median([disk_write_speed(work, args.megabytes, sync=False) for _ in range(3)])
        synced = median([disk_write_speed(work, args.megabytes, sync=True) for _ in range(3)])
        produced, on_disk = produce_speed(work, args.megabytes)
    print(f"devcluster, 3 brokers, RF 2, acks=all, {args.megabytes} MiB of 10 kB messages")
    print(f"  produce (acknowledged)                 {produced:8.1f} MB/s   (goal >= 50)")
    print(f"  written by the brokers (x2 replicas)   {produced * 2:8.1f} MB/s")
    print(f"  bytes on disk / bytes acknowledged     {on_disk / (args.megabytes * MIB):8.2f}")
    print(f"  disk: 1 MiB writes, no fsync (median)  {plain:8.1f} MB/s")
    print(f"  disk: 1 MiB writes + fsync (median)    {synced:8.1f} MB/s")
    print(f"  replicated produce / disk (no fsync)   {produced * 2 / plain:8.2f}x")


if __name__ == "__main__":
    from bench.results import command_line

    raise SystemExit(command_line(__name__))
