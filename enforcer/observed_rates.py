"""Reference rates for `kvq.enforcer.throttle.reference=observed-rate`: what each throttled
producer quota entity was actually writing when the episode started.

A factor scaling the quota alone slows only entities whose quota is near their rate: a principal
with a 2 MB/s quota writing 300 kB/s is not slowed at all by factor 0.5. So when an episode
starts (its first factor below 1) the enforcer asks Prometheus for Kafka's own per-quota-entity
produce rates (the broker's ClientQuotaManager sensors, JMX
`kafka.server:type=Produce,user=U,client-id=C` attribute `byte-rate`, exported by the Prometheus
JMX exporter) on each entity's busiest broker (Kafka enforces quotas per broker), and every step of
the episode scales min(original or base, that rate) (quota_plan.py). The references are captured
once and journaled with the originals: rates seen while throttled are never taken as new
references (they would ratchet the throttle down step after step).

Kafka tags each sensor with the entity that governs the client (ClientQuotaManager's
DefaultQuotaCallback.quotaMetricTags): `user` is set when a user-level quota governs (the
default user's too: one sensor per user), `client-id` when a client-id (or user and client-id)
quota does; an empty tag is left out of the MBean name. Kafka records the sensors only while some
quota exists on the broker. A series' tags are resolved against the quotas the throttle sets
(KIP-55 order, below) to the entity whose budget it will be held to; that entity's reference is
the highest such rate (a default-user quota is a budget per user: its reference is the busiest
user it covers).

Kafka's sensor is a rate over its last quota window (~11 s): read just after a throttle was
lifted it is still the throttled rate, and an episode starting then (another broker near its
limit) would hold the entity at that rate for the whole episode. Two things keep a stale,
throttled rate from becoming a reference: the reference is the highest rate over a lookback
before the episode starts (the query now and `max_over_time` of it as a subquery), and the
references of the cluster's previous episode, if it ended less than the lookback ago, are a
lower bound of the new ones (`carried_over`).

The highest rate over the lookback also holds a load step that came just before the episode (the
step is what fills the disk): the first slowdown comes seconds after it, and a reference taken
then scales the step's rate, so the first factors barely slow it and each entity's own minimum
lets it through at factor 0. So with a step window D the lookback ends D before the episode
starts as well, and each reference is the lower of the highest rates over the two (`before_step`):
a rate that rose above everything the lookback saw within the last D seconds is taken for a step,
and the entity is scaled from what it wrote before it. An entity seen only within those D seconds
keeps its rate now.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TypeVar
from urllib.parse import unquote

from enforcer.log_lists import first_few
from enforcer.prometheus_check import PrometheusFactor
from enforcer.quota_plan import PRODUCER_BYTE_RATE, Pair, QuotaPolicy, plan
from kvq.kafka.quota_entity import QuotaEntity

log = logging.getLogger("kvq.enforcer")

BASE = "base"
OBSERVED_RATE = "observed-rate"
REFERENCES = (BASE, OBSERVED_RATE)
"""kvq.enforcer.throttle.reference: what a factor scales (`base`: the original or base)."""
USER_LABEL = "user"
CLIENT_ID_LABEL = "clientId"
"""The labels the query's series carry (the JMX exporter rules in deploy/jmx-exporter/ name
them so); a missing label is an empty Kafka tag."""
DEFAULT_QUERY = (
    f'max by ({USER_LABEL}, {CLIENT_ID_LABEL}) (kafka_server_quota_byte_rate{{resource="Produce"}})'
)
"""Each quota entity's produce rate on its busiest broker (bytes/s)."""
DEFAULT_LOOKBACK = timedelta(minutes=5)
"""How far before an episode's start its references look (and how recent a previous episode
must be for its references to carry over): longer than an episode that ends and gives way to the
next one within seconds, so the rate before the first of them is still in view."""
DEFAULT_STEP_WINDOW = timedelta(seconds=30)
"""How long before an episode's start a rise of an entity's rate is taken for a load step, not
its rate (`before_step`): as long as the default response time of graceful slowdown
(kvq.throttle.slowdown.response.time), the longest a step that fills the disk goes unslowed."""
LONGEST_LOOKBACK = timedelta(hours=1)
"""Beyond an hour the highest rate says little about what an entity writes now, and a
subquery over it costs Prometheus more than one instant query should."""
K = TypeVar("K")
_HOLDS_PROBE_FACTOR = 0.5
"""A factor strictly between 0 and 1: the pairs that hold a value at it are the quotas the
throttle sets (an unlimited default user counts too: it gets a value from its reference)."""


@dataclass(frozen=True, slots=True)
class ObservedRate:
    """One series: the sensor's tags (`""`: tag absent) and its rate in bytes/s."""

    user: str
    client_id: str
    rate: float


def parse_vector(result: Iterable[object]) -> list[ObservedRate]:
    """The series of an instant query's vector; malformed samples and non-finite or negative
    rates are left out. Kafka URL-encodes user names in the tag (Sanitizer): decoded here."""
    rates = []
    for sample in result:
        try:
            labels = sample["metric"]  # type: ignore[index]
            rate = float(sample["value"][1])  # type: ignore[index]
        except (KeyError, IndexError, TypeError, ValueError):
            continue
        if not isinstance(labels, dict) or not math.isfinite(rate) or rate < 0:
            continue
        user = unquote(str(labels.get(USER_LABEL, "")))
        rates.append(ObservedRate(user, str(labels.get(CLIENT_ID_LABEL, "")), rate))
    return rates


def governing(holding: Iterable[QuotaEntity], user: str, client_id: str) -> QuotaEntity | None:
    """The entity (of `holding`) whose budget traffic tagged (user, client_id) is held to, in
    KIP-55 order. An empty user tag means a user with no quota of its own, an empty client-id
    tag one with no client-specific quota (the tags Kafka gave the sensor say so)."""
    held = set(holding)
    candidates = []
    if user:
        if client_id:
            candidates.append(QuotaEntity.of({"user": user, "client-id": client_id}))
            candidates.append(QuotaEntity.of({"user": user, "client-id": None}))
        candidates.append(QuotaEntity.user(user))
    if client_id:
        candidates.append(QuotaEntity.of({"user": None, "client-id": client_id}))
        candidates.append(QuotaEntity.of({"user": None, "client-id": None}))
    candidates.append(QuotaEntity.default_user())
    if client_id:
        candidates.append(QuotaEntity.of({"client-id": client_id}))
        candidates.append(QuotaEntity.of({"client-id": None}))
    return next((entity for entity in candidates if entity in held), None)


def lookback_query(query: str, lookback: timedelta) -> str:
    """`query` as the highest value of each of its series over the `lookback` before now: a
    subquery at Prometheus' default resolution (its evaluation interval). Its steps are aligned
    to that interval, so it does not see samples newer than the last step (up to one interval
    old, 15 s at the recommended 15 s): it is asked together with `query` itself."""
    return f"max_over_time(({query})[{promql_duration(lookback)}:])"


def lookback_before(query: str, lookback: timedelta, step_window: timedelta) -> str:
    """`lookback_query` over the lookback that ends `step_window` before now (the offset
    modifies the subquery: PromQL refuses it on the function's result)."""
    return (
        f"max_over_time(({query})[{promql_duration(lookback)}:] "
        f"offset {promql_duration(step_window)})"
    )


def before_step(recent: Mapping[K, float], earlier: Mapping[K, float]) -> dict[K, float]:
    """Per key of `recent` (the highest rates over the lookback ending now), the lower of it and
    its highest rate over the lookback ending the step window earlier (`earlier`), if seen
    then: a rate that rose above all the lookback saw within the step window is a load step's,
    and the reference is what the entity wrote before it. The cost, where the load is
    legitimately higher (it stepped up for good within the step window): the entity is scaled
    from its lower rate before, so each factor slows it that much more than it says, and its
    own minimum (`quota_plan.entity_minimum`) mutes it for longer than the longest throttle
    time; the factor, which follows the disk, rises to make up for it."""
    return {key: min(rate, earlier.get(key, rate)) for key, rate in recent.items()}


def promql_duration(duration: timedelta) -> str:
    """A duration as PromQL writes it: whole seconds, or milliseconds when it has a fraction."""
    milliseconds = duration // timedelta(milliseconds=1)
    if milliseconds % 1000:
        return f"{milliseconds}ms"
    return f"{milliseconds // 1000}s"


def carried_over(
    observed: Mapping[Pair, float], previous: Mapping[Pair, float], pairs: Collection[Pair]
) -> dict[Pair, float]:
    """The references of a new episode: per pair, the higher of what was observed now and its
    reference in the previous episode (`previous`, when that ended recently enough), among the
    pairs the new episode throttles. Right after a throttle the observed rates are what it let
    through: never below the previous episode's reference."""
    references = dict(observed)
    for pair, rate in previous.items():
        if pair in pairs and rate > references.get(pair, -math.inf):
            references[pair] = rate
    return references


def select_references(
    policy: QuotaPolicy, originals: Mapping[Pair, float | None], observed: Iterable[ObservedRate]
) -> dict[Pair, float]:
    """Per throttled producer_byte_rate pair, the highest observed rate of the traffic its
    entity will govern while throttled; pairs nobody was seen using get none (they keep their
    original or base). Excluded principals' traffic and their overrides are left out."""
    desired = plan(policy, originals, _HOLDS_PROBE_FACTOR)
    holding = {e for (e, k), v in desired.items() if k == PRODUCER_BYTE_RATE and v is not None}
    holding.add(policy.default_entity)
    references: dict[Pair, float] = {}
    for seen in observed:
        if seen.user in policy.excluded_users:
            continue
        entity = governing(holding, seen.user, seen.client_id)
        if entity is None or policy.override_source(entity) is not None:
            continue
        pair = (entity, PRODUCER_BYTE_RATE)
        if pair in originals:
            references[pair] = max(references.get(pair, 0.0), seen.rate)
    return references


class ObservedRates:
    """The Prometheus side: instant queries when an episode starts."""

    def __init__(
        self,
        prometheus: PrometheusFactor,
        query: str = DEFAULT_QUERY,
        lookback: timedelta = DEFAULT_LOOKBACK,
        step_window: timedelta = DEFAULT_STEP_WINDOW,
    ) -> None:
        self.prometheus = prometheus
        self.query = query
        """The user's query (kvq.enforcer.throttle.observed.rate.query): the rate now."""
        self.lookback = lookback
        """kvq.enforcer.throttle.observed.rate.lookback: the highest rate over this long before
        the episode starts is its reference; a previous episode that ended less than this ago
        carries its references over."""
        self.step_window = step_window
        """kvq.enforcer.throttle.observed.rate.step.window: with a lookback, each reference is
        no higher than the highest rate over the lookback ending this long before the episode
        starts (`before_step`); 0: off."""

    def queries(self) -> list[str]:
        """The instant queries of an episode's start: the user's (the rate now) and, with a
        lookback, the same over the lookback (which misses the newest samples)."""
        if self.lookback <= timedelta(0):
            return [self.query]
        return [self.query, lookback_query(self.query, self.lookback)]

    def before_step_query(self) -> str | None:
        """The query over the lookback ending the step window before now (None: either is 0)."""
        if self.lookback <= timedelta(0) or self.step_window <= timedelta(0):
            return None
        return lookback_before(self.query, self.lookback, self.step_window)

    def references(
        self,
        cluster: str,
        policy: QuotaPolicy,
        originals: Mapping[Pair, float | None],
        previous: Mapping[Pair, float] | None = None,
    ) -> dict[Pair, float]:
        """The references of a new episode throttling `originals`: the highest rates observed
        over the lookback, never below `previous` (the references of an episode that ended less
        than the lookback ago). Without observations (logged once: Prometheus cannot answer or
        has no series) only `previous` remains; pairs with neither scale their original or
        base, as without this."""
        observed = self._observed(cluster, policy, originals)
        references = carried_over(observed, previous or {}, originals)
        kept = {p: r for p, r in references.items() if observed.get(p) != r}
        if kept:
            log.info(
                "cluster %s: %d reference(s) kept from the episode that ended less than %s ago "
                "(above what was observed since: rates it throttled, or none seen): %s",
                cluster,
                len(kept),
                promql_duration(self.lookback),
                _first_few(kept),
            )
        return references

    def as_of(
        self,
        cluster: str,
        policy: QuotaPolicy,
        originals: Mapping[Pair, float | None],
        started: datetime,
    ) -> dict[Pair, float]:
        """The references of an episode that started at `started` without any (Prometheus did
        not answer, or had no series yet), asked again as of that moment: what the episode's
        start would have found, never a rate the throttle held. None (at debug) while there
        are still none."""
        return self._observed(cluster, policy, originals, at=started)

    def _observed(
        self,
        cluster: str,
        policy: QuotaPolicy,
        originals: Mapping[Pair, float | None],
        at: datetime | None = None,
    ) -> dict[Pair, float]:
        """The highest rate of each throttled pair's traffic over the lookback (ending `at`,
        default now), from the instant queries (`queries`: select_references keeps each pair's
        highest), no higher than over the lookback ending the step window earlier
        (`before_step`); none (logged; at debug when asked again `at` an episode's start) when
        Prometheus cannot answer or has no series."""
        results = [self.prometheus.instant(cluster, query, at) for query in self.queries()]
        observed = [rate for result in results for rate in parse_vector(result or [])]
        earlier_query = self.before_step_query()
        if not observed and at is not None:
            log.debug("cluster %s: still no observed produce rates for the episode", cluster)
            return {}
        if not observed:
            if any(result is not None for result in results):
                log.warning(
                    "cluster %s: no observed produce rates (query %s returned no series; is the "
                    "JMX exporter scraped and some quota set?); throttling from the originals",
                    cluster,
                    " nor ".join(self.queries()),
                )
            else:
                log.warning(
                    "cluster %s: no observed produce rates (Prometheus not usable, above); "
                    "throttling from the originals",
                    cluster,
                )
            return {}
        found = select_references(policy, originals, observed)
        if earlier_query is not None:
            earlier = parse_vector(self.prometheus.instant(cluster, earlier_query, at) or [])
            stepped = before_step(found, select_references(policy, originals, earlier))
            lowered = {p: r for p, r in stepped.items() if r < found[p]}
            if lowered:
                log.info(
                    "cluster %s: %d reference(s) from before a rise within the last %s (a load "
                    "step): %s",
                    cluster,
                    len(lowered),
                    promql_duration(self.step_window),
                    _first_few(lowered),
                )
            found = stepped
        log.info(
            "cluster %s: episode %s the highest produce rates over the %s of %d "
            "quota entit%s (%d series): %s",
            cluster,
            "starts from" if at is None else "(begun without them) now scales",
            f"last {promql_duration(self.lookback)}"
            if at is None
            else f"{promql_duration(self.lookback)} before its start at {at.isoformat()}",
            len(found),
            "y" if len(found) == 1 else "ies",
            len(observed),
            _first_few(found),
        )
        return found


def _first_few(references: Mapping[Pair, float]) -> str:
    """The first few references by entity, then how many more there are."""
    shown = sorted((entity.label(), rate) for (entity, _), rate in references.items())
    return first_few(f"{label} {rate:.0f} B/s" for label, rate in shown)
