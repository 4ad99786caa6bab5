"""ThrottleFactorSource: observations in, the throttle factor valid *now* out.

The proposal's validity and fallback rules: a calculated factor stays in force for the validity
duration; failed observations change nothing until it has expired; then the fallback factor applies
(counted once) until the next successful observation. Expiry is judged whenever the factor is read,
so a hung poll can never keep a stale factor alive. Pure: the caller passes the time in.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from kvq.model.observation import STAGE_DESCRIBE_CLUSTER, Observation
from kvq.model.policy_run import PolicyRun
from kvq.model.throttle_factor_policy import UNTHROTTLED, ThrottleFactorPolicy
from kvq.model.volume import LogDirDescription, Volume
from kvq.model.volume_cache import CachedVolume, VolumeCache


@dataclass(frozen=True, slots=True)
class ThrottleFactor:
    """The factor in force, whether it is the fallback, and since when it has been."""

    value: float
    fallback: bool
    since: float
    """When this value (or the fallback) came into force."""
    calculated_at: float | None
    """Time of the observation the last calculated factor came from (None: none yet)."""
    expires_at: float | None
    """When the calculated factor stops being valid (None while the fallback applies)."""


@dataclass(slots=True)
class ThrottleState:
    """Everything the metrics and /status show, as of the latest observation."""

    limit_violated_total: int = 0
    fallback_applied_total: int = 0
    evictions_total: int = 0
    observations_total: int = 0
    failures_by_stage: Counter = field(default_factory=Counter)
    active_brokers: int = 0
    volumes: tuple[Volume, ...] = ()
    """Observed volumes of the last successful observation."""
    cached: tuple[CachedVolume, ...] = ()
    """Volumes not observed with sizes in the last successful observation, judged from cache
    (held included)."""
    held: tuple[CachedVolume, ...] = ()
    """Kept violating by the hold: offline since, or their broker away beyond the validity."""
    hold_expired: tuple[CachedVolume, ...] = ()
    """Released after the violation hold expired; not seen again since."""
    violating: tuple[Volume, ...] = ()
    unusable: tuple[LogDirDescription, ...] = ()
    last_success: float | None = None
    last_failure: Observation | None = None


class ThrottleFactorSource:
    """Turns observations into the throttle factor, with validity, fallback and the volume cache."""

    def __init__(
        self,
        policy: ThrottleFactorPolicy,
        validity_seconds: float,
        fallback_factor: float,
        start_time: float,
        checking: bool = True,
        hold_seconds: float = 0.0,
    ) -> None:
        """`checking=False` (storage.check.interval=PT0S) disables the check: the factor is 1.0
        for good, the fallback never applies, nothing throttles (the plugin's behaviour).
        `hold_seconds`: how long a volume violating when last seen keeps violating while its
        broker stays away or its log dir is offline (see `VolumeCache`)."""
        self.policy = policy
        self.run = PolicyRun(policy)
        self.checking = checking
        self.validity_seconds = validity_seconds
        self.fallback_factor = fallback_factor
        self.cache = VolumeCache(validity_seconds, hold_seconds, policy.limit.violated_by)
        self.state = ThrottleState()
        # Before any observation the factor is 1.0, valid from start: without any answer from the
        # cluster the fallback applies once the validity duration has passed.
        self._valid_factor = UNTHROTTLED
        self._valid_from = start_time
        self._value_since = start_time
        self._calculated_at: float | None = None
        self._fallback_since: float | None = None

    def observe(self, observation: Observation) -> None:
        """Take one poll's result (the proposal's VolumeObserver)."""
        state = self.state
        state.observations_total += 1
        self.factor_at(observation.time)
        if observation.failure_stage != STAGE_DESCRIBE_CLUSTER:
            # The brokers this poll considered: known once DescribeCluster answered.
            state.active_brokers = len(observation.active_brokers)
        if not observation.succeeded:
            state.failures_by_stage[observation.failure_stage] += 1
            state.last_failure = observation
            return
        merge = self.cache.merge(observation.time, observation.log_dirs)
        cached = (entry.volume for entry in merge.cached)
        calculation = self.run.calculate(merge.observed, cached, observation.time)
        state.limit_violated_total += len(calculation.violating)
        state.evictions_total += len(merge.evicted)
        state.volumes = merge.observed
        state.cached = merge.cached
        state.held = merge.held
        state.hold_expired = merge.hold_expired
        state.violating = calculation.violating
        state.unusable = observation.unusable_log_dirs
        state.last_success = observation.time
        if self._fallback_since is not None or calculation.factor != self._valid_factor:
            self._value_since = observation.time
        self._valid_factor = calculation.factor
        self._valid_from = observation.time
        self._calculated_at = observation.time
        self._fallback_since = None

    def decisive(self, observation: Observation) -> bool:
        """Whether a check made between polls must be taken in as a poll (`observe`): it
        succeeded and shows a volume past its limit, a throttled volume's space freed or a
        volume closing on its limit fast (`PolicyRun.decisive`)."""
        if not observation.succeeded:
            return False
        volumes = (v for v in map(LogDirDescription.to_volume, observation.log_dirs) if v)
        return self.run.decisive(volumes, observation.time)

    def factor_at(self, now: float) -> ThrottleFactor:
        """The factor in force at `now`; applies (and counts) the fallback once it is due.

        The fallback starts the moment the calculated factor expires (`valid_from + validity`),
        however late it is noticed, so the history does not depend on how often it is read.
        """
        if not self.checking:
            return ThrottleFactor(UNTHROTTLED, False, self._value_since, None, None)
        expires_at = self._valid_from + self.validity_seconds
        if self._fallback_since is None and now > expires_at:
            self._fallback_since = expires_at
            self.state.fallback_applied_total += 1
        if self._fallback_since is not None:
            return ThrottleFactor(
                self.fallback_factor, True, self._fallback_since, self._calculated_at, None
            )
        return ThrottleFactor(
            self._valid_factor, False, self._value_since, self._calculated_at, expires_at
        )
