"""Observation: what one poll of the cluster saw (DescribeCluster, then DescribeLogDirs to all)."""

from __future__ import annotations

from dataclasses import dataclass

from kvq.model.volume import LogDirDescription, Volume

STAGE_DESCRIBE_CLUSTER = "describe_cluster"
STAGE_DESCRIBE_LOG_DIRS = "describe_log_dirs"
STAGES = (STAGE_DESCRIBE_CLUSTER, STAGE_DESCRIBE_LOG_DIRS)


@dataclass(frozen=True, slots=True)
class Observation:
    """One poll. It succeeded only if every active broker described its log dirs.

    `time` is in seconds since the epoch. A failed observation names the stage that failed and
    carries whatever it saw before failing (for the archive), which the policy never uses.
    """

    time: float
    active_brokers: tuple[int, ...] = ()
    log_dirs: tuple[LogDirDescription, ...] = ()
    failure_stage: str | None = None
    error: str | None = None

    def __post_init__(self) -> None:
        if self.failure_stage is not None and self.failure_stage not in STAGES:
            raise ValueError(f"unknown failure stage {self.failure_stage!r}; allowed: {STAGES}")

    @property
    def succeeded(self) -> bool:
        return self.failure_stage is None

    @property
    def volumes(self) -> tuple[Volume, ...]:
        return tuple(v for v in (d.to_volume() for d in self.log_dirs) if v is not None)

    @property
    def unusable_log_dirs(self) -> tuple[LogDirDescription, ...]:
        return tuple(d for d in self.log_dirs if d.unusable_reason is not None)

    @classmethod
    def failed(cls, time: float, stage: str, error: str, **seen) -> Observation:
        return cls(time=time, failure_stage=stage, error=error, **seen)
