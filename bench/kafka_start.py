"""A real 3-node Kafka cluster's start and stop, with and without the class archive and fast stop.

devkit's KafkaCluster starts every JVM from a class-data-sharing archive of Kafka's classes
(devkit/kafka_class_archive.py), and its stop kills the last node left 1 s after the others have
exited (`last_node_seconds`: that node's Raft client waits 5 s for voters that are gone): `make
test` starts and stops dozens of clusters, on a machine whose CPU the test lanes share. Side by
side, in turns (`--rounds` each): a cluster formatted (three StorageTool JVMs), started until every
node lists the others, and stopped, loading every class from the jars or mapping the archive
(written by a cluster started first, if missing), and with the archive, stopped waiting for its
last node. Printed: the medians of the wall time to ready, of the stop, and of the CPU time of
every JVM (formats, nodes, their stop). Needs Java and Maven's Kafka jars (`make kafka-deps`);
about 4 minutes.
    python -m bench.kafka_start [--rounds 5]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from devkit import results_page


def children_cpu_seconds() -> float:
    """User + system CPU of every child process this one has waited for."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@dataclass(frozen=True)
class Way:
    """One way to start and stop the cluster."""

    label: str
    class_archive: bool
    last_node_seconds: float | None


WAYS = (
    Way("classes from the jars", False, 1.0),
    Way("the class archive", True, 1.0),
    Way("... last node waited for", True, None),
)


@dataclass(frozen=True)
class Run:
    ready: float
    """Seconds from the start until ready."""
    stop: float
    """Seconds the stop took."""
    cpu: float
    """CPU seconds of every JVM."""


def start_and_stop(way: Way) -> Run:
    """One 3-node cluster started and stopped `way`."""
    from devkit.kafka_cluster import KafkaCluster

    with tempfile.TemporaryDirectory(prefix="kvq-bench-kafka-") as work:
        cpu = children_cpu_seconds()
        started = time.monotonic()
        cluster = KafkaCluster(
            Path(work),
            nodes=3,
            class_archive=way.class_archive,
            last_node_seconds=way.last_node_seconds,
        )
        with cluster:
            ready = time.monotonic() - started
            stopping = time.monotonic()
        stop = time.monotonic() - stopping
        return Run(ready, stop, children_cpu_seconds() - cpu)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    results_page.arguments(parser, args, kafka=True)

    from devkit.kafka_dist import fetch
    from spark.class_archive import java_binary

    java = java_binary()
    if java is None:
        raise SystemExit("no java found (JAVA_HOME or PATH): apt-get install default-jre")
    if not fetch().class_archive(java).path.is_file():
        start_and_stop(WAYS[1])  # its first node writes the archive as it stops
    runs: dict[Way, list[Run]] = {way: [] for way in WAYS}
    for _ in range(args.rounds):
        for way in WAYS:
            runs[way].append(start_and_stop(way))
    print(f"3-node Kafka cluster: format, start until ready, stop ({args.rounds} rounds each)")
    medians = {}
    for way in WAYS:
        median = Run(
            *(statistics.median(getattr(r, f) for r in runs[way]) for f in ("ready", "stop", "cpu"))
        )
        medians[way] = median
        print(
            f"  {way.label:26} ready in {median.ready:5.1f} s   stopped in {median.stop:4.1f} s"
            f"   CPU of its JVMs {median.cpu:5.1f} s"
        )
    jars, archive, waited = (medians[way] for way in WAYS)
    print(
        f"  archive / jars: ready {archive.ready / jars.ready:.2f}x,"
        f" CPU {archive.cpu / jars.cpu:.2f}x; stop, last node killed / waited for:"
        f" {archive.stop / waited.stop:.2f}x"
    )


if __name__ == "__main__":
    from bench.results import command_line

    raise SystemExit(command_line(__name__))
