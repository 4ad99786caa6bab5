"""Request sizes: how large the produce requests of each throttled quota entity are, from the
throttle times Kafka answers them with (observed-rate references only).

A producer held at its quota q sends its next request when its throttle time ends (KIP-219), and
Kafka answers a request of S bytes with about S / q (quota_plan.request_minimum): an entity whose
requests are large for its quota goes that long without an acknowledgement. Which entities those
are is not known in advance (a Java producer sends 16 KiB per partition, librdkafka what it
buffered), but Kafka says it: each quota entity's sensors include `throttle-time`, the average
throttle time of its throttled requests over the broker's metrics window (an `Avg` over
`metrics.num.samples` 2 x `metrics.sample.window.ms` 30 s: up to the last minute), which the JMX
exporter rules in deploy/jmx-exporter/ export as `kafka_server_quota_throttle_time` (ms).

So during an episode the enforcer asks Prometheus for it (at most every `ASK_SECONDS`) and
estimates each entity's request size as its throttle time x the quota it held. Two things keep
the estimate from growing with anything but the requests (`request_size`):
- a quota lowered within the window hands out a throttle time of its own: the bytes written at
  the higher quota still count in Kafka's window of W seconds, (earlier / later - 1) x W for the
  largest such drop (from the rate the entity was seen writing before the episode, at its
  start). That much is taken off the average, which can only make the estimate smaller;
- the lowest quota the entity held within the window is the one multiplied.
An episode keeps each entity's largest estimate (the requests do not shrink because one window
had fewer throttled ones); a restore or a new episode forgets them, as does a restart (the next
asks find them again within a minute, from Kafka's window).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from enforcer.observed_rates import (
    CLIENT_ID_LABEL,
    USER_LABEL,
    ObservedRate,
    governing,
    parse_vector,
)
from enforcer.prometheus_check import PrometheusFactor
from enforcer.quota_plan import PRODUCER_BYTE_RATE, Pair, QuotaPolicy

log = logging.getLogger("kvq.enforcer")

DEFAULT_THROTTLE_QUERY = (
    f"max by ({USER_LABEL}, {CLIENT_ID_LABEL}) "
    '(kafka_server_quota_throttle_time{resource="Produce"})'
)
"""Each quota entity's average produce throttle time (ms) on the broker that throttles it most."""
HELD_SECONDS = 90.0
"""How far back the quotas an entity held count for a throttle time read now: Kafka's average
covers up to a minute (two samples of 30 s by default), and the series is up to one scrape
interval old (30 s at most in the recommended setups)."""
ASK_SECONDS = 5.0
"""How often an episode asks for the throttle times: one instant query every few of graceful
slowdown's steps at most; Kafka's average moves little faster."""
GROWTH_LOGGED = 1.5
"""An entity's estimate is logged when first found and when it grows by this much."""


def largest_drop(held: Iterable[float]) -> float:
    """The largest ratio of a quota to a later, lower one in `held` (in the order held); 1.0
    when none was lowered."""
    drop, highest = 1.0, 0.0
    for value in held:
        highest = max(highest, value)
        if value > 0.0:
            drop = max(drop, highest / value)
    return drop


def request_size(throttle_seconds: float, held: Iterable[float], window_seconds: float) -> float:
    """The least request size (bytes) that explains an average throttle time of
    `throttle_seconds` for an entity that held the quotas `held` (oldest first) over Kafka's
    averaging window: (throttle time - (largest drop - 1) x W) x the lowest quota held, W the
    brokers' quota window. 0 when the drops explain it all."""
    values = [value for value in held if value > 0.0]
    if not values:
        return 0.0
    of_requests = throttle_seconds - (largest_drop(values) - 1.0) * window_seconds
    return max(of_requests, 0.0) * min(values)


@dataclass
class RequestSizes:
    """One cluster's estimates for its active episode."""

    prometheus: PrometheusFactor
    query: str = DEFAULT_THROTTLE_QUERY
    """kvq.enforcer.throttle.observed.throttle.query: each entity's throttle time in ms."""
    monotonic: Callable[[], float] = time.monotonic
    ask_seconds: float = ASK_SECONDS
    held_seconds: float = HELD_SECONDS
    _held: dict[Pair, deque[tuple[float, float]]] = field(default_factory=dict, init=False)
    """Per producer pair of the episode, (when, quota) it was planned at, oldest first; the
    first is the rate it was seen writing before the episode (its reference)."""
    _sizes: dict[Pair, float] = field(default_factory=dict, init=False)
    _asked: float | None = field(default=None, init=False)

    def forget(self) -> None:
        """The episode ended (or a new one starts): its estimates and quotas no longer hold."""
        self._held.clear()
        self._sizes.clear()
        self._asked = None

    def sizes(self, cluster: str, policy: QuotaPolicy, window_seconds: float) -> dict[Pair, float]:
        """Each pair's largest request size estimate of the episode, asking Prometheus again
        when the last ask is `ask_seconds` old (nothing new when it cannot answer)."""
        now = self.monotonic()
        if self._held and (self._asked is None or now - self._asked >= self.ask_seconds):
            self._asked = now
            result = self.prometheus.instant(cluster, self.query)
            self._estimate(cluster, policy, parse_vector(result or []), window_seconds)
        return dict(self._sizes)

    def held(self, desired: Mapping[Pair, float | None], references: Mapping[Pair, float]) -> None:
        """The quotas a plan of the episode sets (the producer pairs with a reference)."""
        now = self.monotonic()
        for pair, value in desired.items():
            if pair[1] != PRODUCER_BYTE_RATE or pair not in references or value is None:
                continue
            values = self._held.get(pair)
            if values is None:
                values = self._held[pair] = deque([(now, references[pair])])
            values.append((now, value))
            while len(values) > 1 and now - values[1][0] > self.held_seconds:
                values.popleft()

    def _estimate(
        self, cluster: str, policy: QuotaPolicy, seen: Iterable[ObservedRate], window_seconds: float
    ) -> None:
        """Each series' throttle time (ms) as the request size of the pair that governs it."""
        holding = {entity for entity, _ in self._held}
        for series in seen:
            if series.user in policy.excluded_users:
                continue
            entity = governing(holding, series.user, series.client_id)
            pair = (entity, PRODUCER_BYTE_RATE)
            if entity is None or pair not in self._held:
                continue
            # parse_vector names the sample's value a rate: here it is a time in ms.
            held = [value for _, value in self._held[pair]]
            size = request_size(series.rate / 1000.0, held, window_seconds)
            before = self._sizes.get(pair, 0.0)
            if size > before:
                self._sizes[pair] = size
            if size >= GROWTH_LOGGED * before and size > 0.0:
                log.info(
                    "cluster %s: %s sends produce requests of about %.0f B (throttle times "
                    "averaging %.1f s at %.0f B/s)",
                    cluster,
                    entity.label(),
                    size,
                    series.rate / 1000.0,
                    min(held),
                )
