"""ThrottleFactorPolicy: how each volume's state becomes the throttle factor producers are held to.

A policy is declared once and evaluated in two places: on plain numbers by the exporter, one
observation at a time (`PolicyRun`, inside `kvq.model.throttle_factor_source`), and on Spark
Columns by the backfill, every success of the archive at once (`spark.volume_history`). So its
`volume_factor` uses only arithmetic, comparisons, `&`/`|` and the operations of the
`Expressions` it is handed (`choose`, `least`, `greatest`), never an `if` on its inputs, as
`Limit.is_violated` does.

Each judged volume (observed now, or cached) asks for a factor in [0, 1]; the cluster's factor is
the smallest of them, 1.0 without any volume (`cluster_factor`): the volume closest to its limit
decides. A cached volume keeps the factor it got when it was last observed. A policy that needs
a volume's history says so (`needs_history`) and gets that volume's previous usable reading
(None at its first), which `PolicyRun` keeps in the exporter and a window over the volume's
descriptions gives in the backfill. Both branches of `choose` are evaluated on numbers: a
declaration keeps each one defined (divide by `greatest(elapsed, 1.0)`, not by `elapsed`).

The limit stays the limit whatever the policy: violations are counted and published
(`log_dir_violating`, `limit_violated_total`) and decide the violation hold.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple, Protocol

from kvq.model.limits import Limit
from kvq.model.volume import Volume

THROTTLED = 0.0
UNTHROTTLED = 1.0


class VolumeReading(NamedTuple):
    """One volume at one successful observation, as a policy reads it: plain numbers in the
    exporter, Spark Columns in the backfill. `time`: the observation's, seconds since the epoch;
    `available_ratio` as `Volume.available_ratio` (0.0 for a volume of 0 bytes). A tuple: the
    exporter makes one per volume and poll."""

    time: Any
    total_bytes: Any
    available_bytes: Any
    available_ratio: Any


class Expressions(Protocol):
    """What a policy may do beyond operators: plain Python (`PLAIN`) or Spark's functions
    (`spark.volume_history.SPARK_EXPRESSIONS`)."""

    def choose(self, condition: Any, if_true: Any, if_false: Any) -> Any: ...

    def least(self, *values: Any) -> Any: ...

    def greatest(self, *values: Any) -> Any: ...


class PlainExpressions:
    """`Expressions` on plain numbers and booleans."""

    def choose(self, condition: Any, if_true: Any, if_false: Any) -> Any:
        return if_true if condition else if_false

    def least(self, *values: Any) -> Any:
        return min(values)

    def greatest(self, *values: Any) -> Any:
        return max(values)


PLAIN = PlainExpressions()


class ThrottleFactorPolicy(Protocol):
    """A rule from one volume's reading (and, if it needs it, its previous one) to the factor
    that volume asks for. See the module's docstring for what a declaration may use."""

    @property
    def limit(self) -> Limit: ...

    needs_history: ClassVar[bool]
    """Whether `volume_factor` reads `previous` or `reading.time` (the backfill then carries the
    success times and looks up each volume's previous reading)."""

    def volume_factor(
        self, reading: VolumeReading, previous: VolumeReading | None, ops: Expressions
    ) -> Any: ...


@dataclass(frozen=True, slots=True)
class StopOnViolation:
    """The proposal's rule: message production stops (factor 0.0) while any volume violates the
    limit, else it runs unthrottled (1.0)."""

    limit: Limit
    needs_history: ClassVar[bool] = False

    def volume_factor(
        self, reading: VolumeReading, previous: VolumeReading | None, ops: Expressions
    ) -> Any:
        violated = self.limit.is_violated(reading.available_bytes, reading.available_ratio)
        return ops.choose(violated, THROTTLED, UNTHROTTLED)


def cluster_factor(volume_factors: Iterable[float]) -> float:
    """The cluster's factor: the smallest any judged volume asks for, 1.0 without any volume."""
    return min(volume_factors, default=UNTHROTTLED)


@dataclass(frozen=True, slots=True)
class FactorCalculation:
    """The factor computed from one set of volumes and the volumes that violated the limit."""

    factor: float
    violating: tuple[Volume, ...]


class PolicyRun:
    """A policy applied to successive observations (the exporter's side of the seam): keeps the
    factor each volume got when last observed (a cached volume keeps it) and, for a policy that
    needs history, each volume's last usable reading."""

    def __init__(self, policy: ThrottleFactorPolicy) -> None:
        self.policy = policy
        self._factors: dict[tuple[int, str], float] = {}
        self._readings: dict[tuple[int, str], VolumeReading] = {}

    def calculate(
        self, observed: Iterable[Volume], cached: Iterable[Volume] = (), time: float = 0.0
    ) -> FactorCalculation:
        """The factor of `observed` (read at `time`) and `cached` (judged as last observed)."""
        observed, cached = tuple(observed), tuple(cached)
        policy, limit, history = self.policy, self.policy.limit, self.policy.needs_history
        known, self._factors = self._factors, {}
        factors: list[float] = []
        violating: list[Volume] = []
        for volume in observed:
            key = volume.key
            ratio = volume.available_ratio
            reading = VolumeReading(time, volume.total_bytes, volume.available_bytes, ratio)
            factor = float(policy.volume_factor(reading, self._readings.get(key), PLAIN))
            if history:
                self._readings[key] = reading
            factors.append(factor)
            self._factors[key] = factor
            if limit.is_violated(volume.available_bytes, ratio):
                violating.append(volume)
        for volume in cached:  # cached volumes were observed earlier, by this run
            key = volume.key
            factors.append(known[key])
            self._factors[key] = known[key]
            if limit.violated_by(volume):
                violating.append(volume)
        return FactorCalculation(cluster_factor(factors), tuple(violating))
