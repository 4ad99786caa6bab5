"""ClusterVolumeSource: one poll of the cluster turned into an Observation.

DescribeCluster, then DescribeLogDirs to every active broker. The observation succeeds only if
every active broker answered; otherwise it fails at the stage that failed, keeping what it saw.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Protocol

from exporter.cluster_client import Broker, ClusterError
from exporter.replica_growth import ReplicaGrowth
from kvq.model.observation import STAGE_DESCRIBE_CLUSTER, STAGE_DESCRIBE_LOG_DIRS, Observation
from kvq.model.volume import LogDirDescription

log = logging.getLogger("kvq.exporter")


class ClusterClient(Protocol):
    def active_brokers(self) -> list[Broker]: ...

    def describe_log_dirs(
        self, broker_ids, partition_sizes: bool = False
    ) -> dict[int, list[LogDirDescription] | ClusterError]: ...

    def broker_configs(self, broker_ids, key: str) -> dict[int, str | ClusterError]: ...


class Forecaster(Protocol):
    def forecast(
        self, log_dirs: Sequence[LogDirDescription]
    ) -> dict[tuple[int, str], tuple[int, ...]]: ...


class ClusterVolumeSource:
    """Polls a cluster through a ClusterClient; `clock` gives seconds since the epoch.

    With `partition_sizes` it asks for every partition replica's size too and sets each log
    dir's `grown_bytes` (`exporter.replica_growth`); whoever takes an observation in (as a poll)
    says so (`taken_in`), so that the growth of the reads it dropped goes with the next one.
    With a `forecaster` too (`exporter.retention_forecast_source`), a poll's log dirs carry
    what retention frees in them by the times ahead (`retention_freed`); a check's do not: the
    forecast's requests are many."""

    def __init__(
        self,
        client: ClusterClient,
        clock: Callable[[], float],
        partition_sizes: bool = False,
        forecaster: Forecaster | None = None,
    ) -> None:
        self.client = client
        self.clock = clock
        self.partition_sizes = partition_sizes
        self.growth = ReplicaGrowth()
        self.forecaster = forecaster if partition_sizes else None

    def taken_in(self, observation: Observation) -> None:
        """`observation` was taken in: its log dirs' growth is handed out."""
        if self.partition_sizes:
            self.growth.taken_in(observation)

    def observe(self, poll: bool = False) -> Observation:
        """One observation; a `poll`'s (not a check's) with the forecast, if any."""
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
        if poll and not errors and self.forecaster is not None:
            described = self._foreseen(log_dirs, described, self.forecaster)
        if errors:
            return Observation.failed(
                self.clock(),
                STAGE_DESCRIBE_LOG_DIRS,
                "; ".join(errors),
                active_brokers=broker_ids,
                log_dirs=described,
            )
        return Observation(self.clock(), active_brokers=broker_ids, log_dirs=described)

    @staticmethod
    def _foreseen(
        read: list[LogDirDescription],
        described: tuple[LogDirDescription, ...],
        forecaster: Forecaster,
    ) -> tuple[LogDirDescription, ...]:
        """The log dirs `described` with what retention frees in them by the times ahead, from
        their replicas' sizes as `read` (those with sizes), computed before the observation's
        time is taken: foreseen from a moment earlier, it holds by each time ahead of it."""
        try:
            freed = forecaster.forecast(read)
        except Exception:  # noqa: BLE001 - a forecast must never cost the poll its factor
            log.exception("retention forecast failed; the poll goes on without it")
            return described
        return tuple(
            replace(d, retention_freed=freed[d.key]) if d.key in freed else d for d in described
        )
