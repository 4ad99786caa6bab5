"""ThrottleFactorPolicy: volumes in, throttle factor out (0.0 if any volume violates, else 1.0)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kvq.model.limits import Limit
from kvq.model.volume import Volume

THROTTLED = 0.0
UNTHROTTLED = 1.0


@dataclass(frozen=True, slots=True)
class FactorCalculation:
    """The factor computed from one set of volumes and the volumes that violated the limit."""

    factor: float
    violating: tuple[Volume, ...]


class ThrottleFactorPolicy:
    """The proposal's rule: message production stops (factor 0.0) when any volume violates."""

    def __init__(self, limit: Limit) -> None:
        self.limit = limit

    def calculate(self, volumes: Iterable[Volume]) -> FactorCalculation:
        violating = tuple(v for v in volumes if self.limit.violated_by(v))
        return FactorCalculation(THROTTLED if violating else UNTHROTTLED, violating)
