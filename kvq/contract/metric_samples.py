"""The series the exporter publishes, as plain data: built from the policy state at a given time.

One definition shared by the live Collector (which adds the poll-duration histogram) and the
plain-Python replay of the backfill, so both publish exactly the same names, labels and values.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from kvq.model.limits import Limit, MinAvailableBytes
from kvq.model.observation import STAGES
from kvq.model.throttle_factor_source import ThrottleFactorSource
from kvq.model.volume import UNUSABLE_ERROR, UNUSABLE_NO_KIP827

NAMESPACE = "kafka_volume_quota"
GAUGE = "gauge"
COUNTER = "counter"
UNUSABLE_REASONS = (UNUSABLE_ERROR, UNUSABLE_NO_KIP827)


@dataclass(slots=True)
class Family:
    """One metric family: full name (counters without `_total`), type, help, labelled samples."""

    name: str
    type: str
    help: str
    samples: list[tuple[dict[str, str], float]] = field(default_factory=list)

    def add(self, value: float, **labels: str) -> Family:
        self.samples.append((labels, float(value)))
        return self


def families(
    source: ThrottleFactorSource, now: float, cluster: str, limit: Limit, check_interval: float
) -> Iterator[Family]:
    """Every family the exporter publishes at `now` (reading the factor applies due expiry)."""
    factor = source.factor_at(now)
    state = source.state
    c = {"cluster": cluster}

    def fam(name: str, kind: str, help_text: str) -> Family:
        return Family(f"{NAMESPACE}_{name}", kind, help_text)

    yield fam("throttle_factor", GAUGE, "Throttle factor in force (Strimzi ThrottleFactor).").add(
        factor.value, **c
    )
    yield fam(
        "fallback_throttle_factor_applied",
        COUNTER,
        "Times the fallback factor was applied (Strimzi FallbackThrottleFactorApplied).",
    ).add(state.fallback_applied_total, **c)
    yield fam(
        "limit_violated",
        COUNTER,
        "Violating volumes summed over calculations (Strimzi LimitViolated).",
    ).add(state.limit_violated_total, **c)
    yield fam("active_brokers", GAUGE, "Brokers considered most recently (ActiveBrokers).").add(
        state.active_brokers, **c
    )
    yield fam(
        "active_log_dirs", GAUGE, "Volumes observed in the last calculation (ActiveLogDirs)."
    ).add(len(state.volumes), **c)
    yield fam("fallback_active", GAUGE, "1 while the fallback factor applies.").add(
        1 if factor.fallback else 0, **c
    )
    yield fam(
        "cached_log_dirs", GAUGE, "Volumes missing from the last observation, judged from cache."
    ).add(len(state.cached), **c)
    yield fam(
        "log_dir_evictions", COUNTER, "Cached volumes dropped after the validity duration."
    ).add(state.evictions_total, **c)

    unusable = fam("unusable_log_dirs", GAUGE, "Log dirs that cannot be judged, by reason.")
    for reason in UNUSABLE_REASONS:
        count = sum(1 for d in state.unusable if d.unusable_reason == reason)
        unusable.add(count, reason=reason, **c)
    yield unusable

    failures = fam("poll_failures", COUNTER, "Failed observations by the stage that failed.")
    for stage in STAGES:
        failures.add(state.failures_by_stage.get(stage, 0), stage=stage, **c)
    yield failures

    if state.last_success is not None:
        yield fam(
            "last_successful_poll_timestamp_seconds", GAUGE, "When the last observation succeeded."
        ).add(state.last_success, **c)
    if isinstance(limit, MinAvailableBytes):
        yield fam("limit_bytes", GAUGE, "Configured min available bytes per volume.").add(
            limit.threshold, **c
        )
    else:
        yield fam("limit_ratio", GAUGE, "Configured min available ratio per volume.").add(
            limit.threshold, **c
        )
    yield fam("check_interval_seconds", GAUGE, "Configured poll interval.").add(check_interval, **c)

    total = fam("log_dir_total_bytes", GAUGE, "Total bytes of the volume.")
    available = fam("log_dir_available_bytes", GAUGE, "Available (usable) bytes of the volume.")
    ratio = fam("log_dir_available_ratio", GAUGE, "Available bytes / total bytes.")
    violating = fam("log_dir_violating", GAUGE, "1 if the volume violates the limit.")
    violating_keys = {v.key for v in state.violating}
    volumes = state.volumes + tuple(entry.volume for entry in state.cached)
    for volume in sorted(volumes, key=lambda v: v.key):
        labels = {"broker_id": str(volume.broker_id), "log_dir": volume.log_dir, **c}
        total.add(volume.total_bytes, **labels)
        available.add(volume.available_bytes, **labels)
        ratio.add(volume.available_ratio, **labels)
        violating.add(1 if volume.key in violating_keys else 0, **labels)
    yield from (total, available, ratio, violating)
