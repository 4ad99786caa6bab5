"""What tests on real Kafka and on devcluster read alike: log dir sizes as Kafka and the kernel
report them and what is mounted (how kvq's components are configured to reach a cluster is
devkit.kafka_cluster.kafka_admin_settings: the benchmarks use it too)."""

from __future__ import annotations

import os
from pathlib import Path

from exporter.cluster_client import KafkaClusterClient

SHARED_KAFKA_LOG_DIR_BYTES = 64 << 20
"""The size of each tmpfs log dir of the run's `shared_kafka` (tests/conftest.py)."""

PAGE = 4096
CHECKPOINT_SLACK = 16 * PAGE
"""Kafka rewrites small checkpoint files now and then: a few pages either way between two reads."""


def usable_bytes(path: Path) -> int:
    """What Java's FileStore.getUsableSpace() answers: f_bavail x f_frsize."""
    stats = os.statvfs(path)
    return stats.f_bavail * stats.f_frsize


def mounted_paths() -> set[str]:
    with open("/proc/mounts") as mounts:
        return {line.split()[1] for line in mounts}


def described(client: KafkaClusterClient, broker_id: int) -> dict[str, tuple[int, int]]:
    """{log dir: (total bytes, usable bytes)} of one broker, through the exporter's client."""
    answer = client.describe_log_dirs([broker_id])[broker_id]
    assert not isinstance(answer, Exception), answer
    assert all(d.error_code == 0 for d in answer)
    return {d.log_dir: (d.total_bytes, d.usable_bytes) for d in answer}
