"""Checks and preparations before a DevCluster starts: arguments, cluster id, open files."""

from __future__ import annotations

import base64
import logging
import resource
import uuid
from pathlib import Path

log = logging.getLogger(__name__)


def check_arguments(
    brokers: int,
    log_dirs_per_broker: int,
    base_port: int,
    control_port: int | None,
    capacity_bytes: int | None,
) -> None:
    if not isinstance(brokers, int) or brokers < 1:
        raise ValueError(f"brokers must be an integer >= 1, got {brokers!r}")
    if not isinstance(log_dirs_per_broker, int) or log_dirs_per_broker < 1:
        raise ValueError(
            f"log_dirs_per_broker must be an integer >= 1, got {log_dirs_per_broker!r}"
        )
    if base_port and not 0 < base_port <= 65536 - brokers:
        raise ValueError(
            f"base_port {base_port}: {brokers} brokers need ports up to "
            f"{base_port + brokers - 1}, above 65535"
        )
    if control_port is not None and not 0 <= control_port <= 65535:
        raise ValueError(f"control_port must be 0-65535 (0: a free port), got {control_port}")
    if control_port and base_port and base_port <= control_port < base_port + brokers:
        raise ValueError(
            f"control port {control_port} is one of the broker ports "
            f"{base_port}-{base_port + brokers - 1}"
        )
    if capacity_bytes is not None and capacity_bytes <= 0:
        raise ValueError(f"capacity_bytes must be > 0, got {capacity_bytes}")


def new_cluster_id() -> str:
    """A Kafka-style cluster id: 16 random bytes, URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def cluster_id_for(meta: Path, wanted: str | None) -> str:
    """The id recorded in the data dir, else the one asked for, else a new one; recorded."""
    existing = None
    if meta.exists():
        for line in meta.read_text().splitlines():
            if line.startswith("cluster.id="):
                existing = line.split("=", 1)[1].strip()
    if existing and wanted and existing != wanted:
        raise ValueError(
            f"cluster id {wanted!r} does not match {existing!r} recorded in {meta}; "
            "use another data dir"
        )
    cluster_id = wanted or existing or new_cluster_id()
    if not existing:
        meta.parent.mkdir(parents=True, exist_ok=True)
        meta.write_text(f"# written by kvq-devcluster\ncluster.id={cluster_id}\n")
    return cluster_id


def raise_open_files_limit(brokers: int) -> None:
    """Each broker needs a listening socket plus one per client connection."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
    if soft < wanted and soft < 16 * brokers + 1024:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
        except (ValueError, OSError):
            log.warning("cannot raise the open files limit above %d", soft)
