"""The series the exporter publishes, as plain data: built from the policy state at a given time.

Names, types, help texts and label names come from `kvq.contract.metric_families`; this module
fills them with values. Shared by the live collector and the plain-Python replay of the backfill,
so both publish exactly the same series.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from operator import attrgetter

from kvq.contract import metric_families as mf
from kvq.contract.cluster_identity import ClusterIdentity
from kvq.model.limits import Limit
from kvq.model.observation import STAGES
from kvq.model.throttle_factor_source import ThrottleFactorSource, ThrottleState
from kvq.model.volume import UNUSABLE_REASONS, Volume


@dataclass(slots=True)
class Family:
    """One metric family of the table with its labelled samples."""

    family: mf.MetricFamily
    samples: list[tuple[dict[str, str], float]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.family.name

    @property
    def type(self) -> str:
        return self.family.type

    @property
    def help(self) -> str:
        return self.family.help

    def add(self, value: float, **labels: str) -> Family:
        self.samples.append((labels, float(value)))
        return self


def families(
    source: ThrottleFactorSource,
    now: float,
    cluster: ClusterIdentity,
    limit: Limit,
    check_interval: float,
) -> Iterator[Family]:
    """Every family the exporter computes from the policy state at `now`, in table order, each
    sample labelled with the cluster's name.

    Reading the factor applies due expiry. The live-only poll duration histogram is not here.
    """
    yield from cluster_families(source, now, cluster, limit, check_interval)
    yield from volume_families(source, cluster)


def cluster_families(
    source: ThrottleFactorSource,
    now: float,
    cluster: ClusterIdentity,
    limit: Limit,
    check_interval: float,
) -> Iterator[Family]:
    """The families about the cluster as a whole (a few samples each), in table order."""
    factor = source.factor_at(now)
    state = source.state
    c = cluster.labels

    yield Family(mf.THROTTLE_FACTOR).add(factor.value, **c)
    yield Family(mf.FALLBACK_APPLIED).add(state.fallback_applied_total, **c)
    yield Family(mf.LIMIT_VIOLATED).add(state.limit_violated_total, **c)
    yield Family(mf.ACTIVE_BROKERS).add(state.active_brokers, **c)
    yield Family(mf.ACTIVE_LOG_DIRS).add(len(state.volumes), **c)
    yield Family(mf.FALLBACK_ACTIVE).add(1 if factor.fallback else 0, **c)
    yield Family(mf.CACHED_LOG_DIRS).add(len(state.cached), **c)
    yield Family(mf.LOG_DIR_EVICTIONS).add(state.evictions_total, **c)
    yield Family(mf.HELD_LOG_DIRS).add(len(state.held), **c)
    yield Family(mf.VIOLATION_HOLD_EXPIRED).add(len(state.hold_expired), **c)

    unusable = Family(mf.UNUSABLE_LOG_DIRS)
    for reason in UNUSABLE_REASONS:
        count = sum(1 for d in state.unusable if d.unusable_reason == reason)
        unusable.add(count, reason=reason, **c)
    yield unusable

    failures = Family(mf.POLL_FAILURES)
    for stage in STAGES:
        failures.add(state.failures_by_stage.get(stage, 0), stage=stage, **c)
    yield failures

    if state.last_success is not None:
        yield Family(mf.LAST_SUCCESSFUL_POLL).add(state.last_success, **c)
    yield Family(mf.limit_family(limit)).add(limit.threshold, **c)
    yield Family(mf.CHECK_INTERVAL).add(check_interval, **c)


@dataclass(frozen=True, slots=True)
class VolumeColumn:
    """One per-volume family and the value a judged volume gives it (`violating`: whether the
    volume violated the limit in the last calculation)."""

    family: mf.MetricFamily
    value: Callable[[Volume, bool], float]


VOLUME_COLUMNS = (
    VolumeColumn(mf.LOG_DIR_TOTAL_BYTES, lambda volume, violating: volume.total_bytes),
    VolumeColumn(mf.LOG_DIR_AVAILABLE_BYTES, lambda volume, violating: volume.available_bytes),
    VolumeColumn(mf.LOG_DIR_AVAILABLE_RATIO, lambda volume, violating: volume.available_ratio),
    VolumeColumn(mf.LOG_DIR_VIOLATING, lambda volume, violating: 1 if violating else 0),
)
"""The per-volume families (`mf.PER_VOLUME_FAMILIES`) in table order, with their values: the one
declaration behind both `volume_families` and the exporter's fast `exporter.exposition`."""


def volume_families(source: ThrottleFactorSource, cluster: ClusterIdentity) -> Iterator[Family]:
    """The per-volume families (`VOLUME_COLUMNS`, then the policy's: `policy_columns`), one
    sample per judged volume each, labelled with the cluster's name."""
    c = cluster.labels
    state = source.state
    violating_keys = {v.key for v in state.violating}
    volumes = judged_volumes(state)
    columns = [
        (column.family, [column.value(v, v.key in violating_keys) for v in volumes])
        for column in VOLUME_COLUMNS
    ]
    for metric_family, values in columns + policy_columns(source, volumes):
        family = Family(metric_family)
        for volume, value in zip(volumes, values, strict=True):
            family.add(value, broker_id=str(volume.broker_id), log_dir=volume.log_dir, **c)
        yield family


def policy_columns(
    source: ThrottleFactorSource, volumes: list[Volume]
) -> list[tuple[mf.MetricFamily, list[float]]]:
    """The policy's per-volume families (`mf.policy_families`: its gauges, then each volume's
    factor) with the value of each of `volumes`, as last observed; none for the proposal's."""
    families = mf.policy_families(source.policy.gauges)
    observed = source.run.columns
    return [(f, [observed[v.key][i] for v in volumes]) for i, f in enumerate(families)]


def judged_volumes(state: ThrottleState) -> list[Volume]:
    """The volumes of the last calculation (observed and cached), sorted by (broker, log dir)."""
    volumes = state.volumes + tuple(entry.volume for entry in state.cached)
    return sorted(volumes, key=attrgetter("broker_id", "log_dir"))
