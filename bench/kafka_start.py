"""A real 3-node Kafka cluster's start and stop, with and without Kafka's class archive.

devkit's KafkaCluster starts every JVM from a class-data-sharing archive of Kafka's classes
(devkit/kafka_class_archive.py): `make test` starts dozens of clusters, on a machine whose CPU the
test lanes share. Side by side, in turns (`--rounds` each): a cluster formatted (three StorageTool
JVMs), started until every node lists the others, and stopped, loading every class from the jars
or mapping the archive (written by a cluster started first, if missing). Printed: the medians of
the wall time to ready and of the CPU time of every JVM (formats, nodes, their stop). Needs Java
and Maven's Kafka jars (`make kafka-deps`); about 3 minutes.
    python -m bench.kafka_start [--rounds 5]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import tempfile
import time
from pathlib import Path

from devkit import results_page


def children_cpu_seconds() -> float:
    """User + system CPU of every child process this one has waited for."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def start_and_stop(class_archive: bool) -> tuple[float, float]:
    """(seconds until ready, CPU seconds of every JVM) of one 3-node cluster."""
    from devkit.kafka_cluster import KafkaCluster

    with tempfile.TemporaryDirectory(prefix="kvq-bench-kafka-") as work:
        cpu = children_cpu_seconds()
        started = time.monotonic()
        with KafkaCluster(Path(work), nodes=3, class_archive=class_archive):
            ready = time.monotonic() - started
        return ready, children_cpu_seconds() - cpu


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
        start_and_stop(class_archive=True)  # its first node writes the archive as it stops
    runs: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    for _ in range(args.rounds):
        for mapped in (False, True):
            runs[mapped].append(start_and_stop(mapped))
    print(f"3-node Kafka cluster: format, start until ready, stop ({args.rounds} rounds each)")
    medians = {}
    for mapped, label in ((False, "classes from the jars"), (True, "the class archive")):
        ready = statistics.median(r for r, _ in runs[mapped])
        cpu = statistics.median(c for _, c in runs[mapped])
        medians[mapped] = (ready, cpu)
        print(f"  {label:22} ready in {ready:5.1f} s   CPU of its JVMs {cpu:5.1f} s")
    ready_ratio = medians[True][0] / medians[False][0]
    cpu_ratio = medians[True][1] / medians[False][1]
    print(f"  archive / jars: ready {ready_ratio:.2f}x, CPU {cpu_ratio:.2f}x")


if __name__ == "__main__":
    from bench.results import command_line

    raise SystemExit(command_line(__name__))
