"""Log dirs as brokers describe them, and the Volumes the proposal reasons about.

`has_error` and `lacks_size` decide whether a described log dir is a volume. They use only
comparison and `|` operators, so the same functions judge plain numbers in the live exporter and
Spark Columns in the backfill (as `Limit.is_violated` does): one definition of "unusable".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

NO_ERROR = 0
UNUSABLE_ERROR = "error"
"""The broker reported an error code for this log dir (e.g. KAFKA_STORAGE_ERROR, 56)."""
UNUSABLE_UNKNOWN_SIZE = "unknown_size"
"""Total or usable bytes of -1 (Kafka's UNKNOWN_VOLUME_BYTES): a broker older than KIP-827
(Kafka < 3.3) or a DescribeLogDirs version before 4 carries no sizes."""
UNUSABLE_REASONS = (UNUSABLE_ERROR, UNUSABLE_UNKNOWN_SIZE)


def has_error(error_code: Any) -> Any:
    """True when the broker reported an error code for the log dir."""
    return error_code != NO_ERROR


def lacks_size(total_bytes: Any, usable_bytes: Any) -> Any:
    """True when the broker reported no sizes (-1) for the log dir.

    A log dir reporting total 0 / usable 0 has sizes: it is a volume with nothing available.
    """
    return (total_bytes < 0) | (usable_bytes < 0)


@dataclass(frozen=True, slots=True)
class Volume:
    """One log dir of one broker with its space, as the proposal's **Volume**."""

    broker_id: int
    log_dir: str
    total_bytes: int
    available_bytes: int
    grown_bytes: int | None = None
    """What its partition replicas grew by since its previous reading (`LogDirDescription`)."""
    retention_freed: tuple[int, ...] | None = None
    """What retention frees in it by each of the forecast's times ahead (`LogDirDescription`)."""

    @property
    def used_bytes(self) -> int:
        return self.total_bytes - self.available_bytes

    @property
    def available_ratio(self) -> float:
        """available / total; 0.0 for a volume of 0 bytes (as the Strimzi plugin's VolumeUsage)."""
        return self.available_bytes / self.total_bytes if self.total_bytes else 0.0

    @property
    def key(self) -> tuple[int, str]:
        return (self.broker_id, self.log_dir)


@dataclass(frozen=True, slots=True)
class LogDirDescription:
    """One entry of a DescribeLogDirs (v4+) answer: a log dir with its total and usable bytes."""

    broker_id: int
    log_dir: str
    total_bytes: int
    usable_bytes: int
    error_code: int = NO_ERROR
    grown_bytes: int | None = None
    """The sum of its partition replicas' growth (each max(size now - size before, 0)) since the
    last observation the exporter took in that described it with sizes, over every read in
    between (checks it dropped included); None when the partitions' sizes were not read then and
    since (`exporter.replica_growth`). A replica new to the dir counts from its first size."""
    replica_sizes: Mapping[tuple[str, int, bool], int] | None = field(
        default=None, compare=False, repr=False
    )
    """(topic, partition, future) -> bytes of each partition replica in the dir, as the broker
    answered (only when asked for; never archived): what `grown_bytes` is computed from."""
    retention_freed: tuple[int, ...] | None = None
    """The bytes retention frees in it by each of `kvq.model.retention_forecast.AHEAD_SECONDS`
    after the observation's time at least, as Kafka foresees them
    (`exporter.retention_forecast_source`); None when not asked (a check between polls, or the
    forecast not read)."""

    @property
    def key(self) -> tuple[int, str]:
        return (self.broker_id, self.log_dir)

    @property
    def unusable_reason(self) -> str | None:
        """Why this log dir is not a Volume, or None when it is one.

        A log dir with an error code, or without sizes (total/usable of -1), is counted and
        exposed but can never violate a limit.
        """
        if has_error(self.error_code):
            return UNUSABLE_ERROR
        if lacks_size(self.total_bytes, self.usable_bytes):
            return UNUSABLE_UNKNOWN_SIZE
        return None

    def to_volume(self) -> Volume | None:
        if self.unusable_reason is not None:
            return None
        return Volume(
            self.broker_id,
            self.log_dir,
            self.total_bytes,
            self.usable_bytes,
            self.grown_bytes,
            self.retention_freed,
        )
