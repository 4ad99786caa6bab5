"""ClusterVolumeSource: one poll of the cluster turned into an Observation.

DescribeCluster, then DescribeLogDirs to every active broker. The observation succeeds only if
every active broker answered; otherwise it fails at the stage that failed, keeping what it saw.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from exporter.cluster_client import Broker, ClusterError
from exporter.replica_growth import ReplicaGrowth
from kvq.model.observation import STAGE_DESCRIBE_CLUSTER, STAGE_DESCRIBE_LOG_DIRS, Observation
from kvq.model.volume import LogDirDescription


class ClusterClient(Protocol):
    def active_brokers(self) -> list[Broker]: ...

    def describe_log_dirs(
        self, broker_ids, partition_sizes: bool = False
    ) -> dict[int, list[LogDirDescription] | ClusterError]: ...

    def broker_configs(self, broker_ids, key: str) -> dict[int, str | ClusterError]: ...


class ClusterVolumeSource:
    """Polls a cluster through a ClusterClient; `clock` gives seconds since the epoch.

    With `partition_sizes` it asks for every partition replica's size too and sets each log
    dir's `grown_bytes` (`exporter.replica_growth`); whoever takes an observation in (as a poll)
    says so (`taken_in`), so that the growth of the reads it dropped goes with the next one."""

    def __init__(
        self, client: ClusterClient, clock: Callable[[], float], partition_sizes: bool = False
    ) -> None:
        self.client = client
        self.clock = clock
        self.partition_sizes = partition_sizes
        self.growth = ReplicaGrowth()

    def taken_in(self, observation: Observation) -> None:
        """`observation` was taken in: its log dirs' growth is handed out."""
        if self.partition_sizes:
            self.growth.taken_in(observation)

    def observe(self) -> Observation:
        try:
            brokers = self.client.active_brokers()
        except ClusterError as exc:
            return Observation.failed(self.clock(), STAGE_DESCRIBE_CLUSTER, str(exc))
        broker_ids = tuple(b.broker_id for b in brokers)
        if not broker_ids:
            return Observation.failed(
                self.clock(), STAGE_DESCRIBE_CLUSTER, "the cluster reported no active brokers"
            )
        results = (
            self.client.describe_log_dirs(broker_ids, partition_sizes=True)
            if self.partition_sizes
            else self.client.describe_log_dirs(broker_ids)
        )
        log_dirs: list[LogDirDescription] = []
        errors: list[str] = []
        for broker_id in broker_ids:
            result = results.get(broker_id)
            if result is None:
                errors.append(f"broker {broker_id}: no answer")
            elif isinstance(result, ClusterError):
                errors.append(f"broker {broker_id}: {result}")
            else:
                log_dirs.extend(result)
        described = self.growth.read(log_dirs) if self.partition_sizes else tuple(log_dirs)
        if errors:
            return Observation.failed(
                self.clock(),
                STAGE_DESCRIBE_LOG_DIRS,
                "; ".join(errors),
                active_brokers=broker_ids,
                log_dirs=described,
            )
        return Observation(self.clock(), active_brokers=broker_ids, log_dirs=described)
