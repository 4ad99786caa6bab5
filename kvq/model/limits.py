"""The two per-volume limits of the proposal: throttle when available <= threshold on any volume.

`is_violated(available_bytes, available_ratio)` uses only comparison operators, so the same method
evaluates plain numbers in the live exporter and Spark Columns in the backfill: one definition of a
violation. The ratio is the volume's (`Volume.available_ratio`: 0 for a volume of 0 bytes, as in
the Strimzi plugin), so a volume reporting total 0 / usable 0 violates either limit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from kvq.model.volume import Volume

PREFIX = "client.quota.callback.static."
MIN_AVAILABLE_BYTES = PREFIX + "storage.per.volume.limit.min.available.bytes"
MIN_AVAILABLE_RATIO = PREFIX + "storage.per.volume.limit.min.available.ratio"


class Limit(Protocol):
    """A per-volume limit: exactly one is configured."""

    @property
    def property_name(self) -> str: ...

    @property
    def threshold(self) -> float: ...

    def is_violated(self, available_bytes: Any, available_ratio: Any) -> Any: ...

    def violated_by(self, volume: Volume) -> bool: ...


@dataclass(frozen=True, slots=True)
class MinAvailableBytes:
    """Violated when a volume's available bytes are less than or equal to `min_bytes`."""

    min_bytes: int
    property_name: str = MIN_AVAILABLE_BYTES

    @property
    def threshold(self) -> float:
        return self.min_bytes

    def is_violated(self, available_bytes: Any, available_ratio: Any) -> Any:
        return available_bytes <= self.min_bytes

    def violated_by(self, volume: Volume) -> bool:
        return self.is_violated(volume.available_bytes, volume.available_ratio)


@dataclass(frozen=True, slots=True)
class MinAvailableRatio:
    """Violated when a volume's available ratio (available / total) is <= `min_ratio`."""

    min_ratio: float
    property_name: str = MIN_AVAILABLE_RATIO

    @property
    def threshold(self) -> float:
        return self.min_ratio

    def is_violated(self, available_bytes: Any, available_ratio: Any) -> Any:
        return available_ratio <= self.min_ratio

    def violated_by(self, volume: Volume) -> bool:
        return self.is_violated(volume.available_bytes, volume.available_ratio)
