"""The quota plan: which (entity, key) values to set for a throttle factor. Pure, no I/O.

Three kinds of tracked values (a *pair* is one entity and one quota key):
- throttled: every user/client-id entity that holds a managed key, plus the configured default
  entity (default user) for every managed key. Value = max(original x factor, minimum), rounded
  down for the byte-rate keys (Kafka stores them as longs and rejects 0); the minimum is the
  byte-rate floor (8 KiB/s by default, see BYTE_RATE_FLOOR) for the byte-rate keys and 1 for the
  others, and never above the original. Where the original is unset the configured base
  (`produce`, `fetch`, `request`) stands in; with no base either, the quota is unlimited and
  only factor 0 limits it (to the minimum). With a *reference* for the pair (the rate its entity
  was seen producing when the episode started, observed_rates.py) the factor scales
  min(original or base, reference) instead, never below the minimum (a reference below the
  original or base by its sustained share, `sustained_share`, with a burst ratio set); with a
  longest throttle time T set, the minimum of such a pair is its own (`entity_minimum`):
  reference x W / (W + T), the quota at which Kafka's throttle time for a jump from the rate it
  was seen writing is T.
  With a request size S and a longest throttle time T per request, no such minimum is below
  2 x S / T (`request_minimum`): the quota at which no request of S bytes gets a longer throttle.
  An entity Kafka answers with longer throttle times (its requests carry more than its quota
  x T / 2) is raised towards the request minimum of its own request size, within a share of
  what the throttle allows in all (`request_raises`, request_sizes.py). A user the default
  user's quota holds is raised alone: the episode gives it a producer quota of its own
  (`separated_user`), at the default user's value until raised, removed at the restore.
- exempt: overrides that keep each excluded principal X at its original limits while the
  default-user side (levels 4-6, which also apply to X) is throttled: `user=X` keeps its own value
  or gets the default user's original (unlimited when it had none); where X has no quota of its
  own at `user=X` or `user=X,client-id=<default>`, every throttled `user=<default>,client-id=C`
  and `user=<default>,client-id=<default>` gets its counterpart `user=X,client-id=C` /
  `user=X,client-id=<default>` at the unthrottled value (for a mirror: the client-id original).
- entities an excluded user holds itself are never changed.
At factor 1.0 every pair gets its original back, and pairs that had no value are removed.

Odd values Kafka may hold: up to Kafka 4.3 NaN passes Kafka's validation and is stored (and
+inf for the double keys). A broker never throttles against either: `rate <= NaN` fails, but the
throttle time (rate - NaN) / NaN x window rounds to 0 ms (QuotaUtils.throttleTime), and nothing
exceeds +inf; the entity's own non-finite value still shadows the less specific quotas (KIP-55).
So a non-finite original is *no effective limit*: like an unset quota it stays as it is above
factor 0 (unlimited x factor is unlimited) and becomes the minimum at factor 0. Kafka 4.4 refuses
to store a non-finite value ("must be a finite number"), and one stored before an upgrade stays:
so wherever the plan would write one back it writes UNLIMITED instead, on every Kafka version,
which brokers enforce the same way (no rate reaches it; it shadows the same quotas). Removing the
key would not: the entity would fall under the less specific quotas, which may be throttled.
`same_value` takes a non-finite value and UNLIMITED as the same. 2^63 (what `kafka-configs`
stores for "unlimited" on the long keys) is an ordinary large number: it is scaled and restored
exactly.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kvq.kafka.quota_entity import QuotaEntity

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
KNOWN_KEYS = (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE, CONTROLLER_MUTATION_RATE)
INTEGRAL_KEYS = frozenset({PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE})
MINIMUM = 1.0
BYTE_RATE_FLOOR = 8192.0
"""Lowest byte rate a throttle sets. Kafka narrows the throttle time, (rate - quota) / quota x the
~11 s quota window in ms, to a 32-bit int (ClientQuotaManager: `throttleTime(e, timeMs).toInt`)
and throttles only when it is > 0: past 2^31 ms it wraps and the producer is not throttled at all.
A quota Q is therefore only safe for rates below Q x 195,225; at 1 B/s a producer writing more
than ~195 kB/s to one broker is never throttled. 8 KiB/s holds rates up to ~1.6 GB/s per quota
entity and broker."""
KAFKA_QUOTA_WINDOW_SECONDS = 11.0
"""The window Kafka measures a quota's rate over, with its defaults (quota.window.num 11 samples
of quota.window.size.seconds 1 s; Rate.windowSize): the W in its throttle time
(rate - quota) / quota x W (QuotaUtils.throttleTime). What a plan counts on until the brokers'
own window is read (`QuotaPolicy.quota_window_seconds`)."""
KAFKA_QUOTA_SAMPLE_SECONDS = 1.0
"""Kafka's quota.window.size.seconds (its default): the rate of a request that meets no other
bytes in the window is measured over the window less one sample (Rate.windowSize). What a plan
counts on until the brokers' own is read (`QuotaPolicy.quota_sample_seconds`)."""
KAFKA_THROTTLE_AVERAGE_SECONDS = 60.0
"""How far back Kafka's average throttle time of each quota entity reaches with its defaults
(metrics.num.samples 2 x metrics.sample.window.ms 30 s): what the request sizes read from it
count on until the brokers' own is read (`QuotaPolicy.throttle_average_seconds`)."""
BURST_RATIO_MOST = 10.0
"""The highest kvq.enforcer.throttle.observed.rate.burst.ratio: beyond it the reference says
little about what the entity writes sustained."""
KAFKA_LONGEST_THROTTLE_MS = 2**31 - 1
"""ClientQuotaManager narrows the throttle time to an int (`.toInt`): past this many ms it wraps
and the client is not throttled, or briefly."""
UNLIMITED = 9223372036854774784.0
"""The largest double not above Long.MAX_VALUE: Kafka's 'no limit', accepted for every key by
every Kafka version; what the plan writes for a non-finite value (see the module docstring)."""

Pair = tuple[QuotaEntity, str]
Snapshot = Mapping[QuotaEntity, Mapping[str, float]]


@dataclass(frozen=True, slots=True)
class QuotaPolicy:
    """What the enforcer manages on one cluster."""

    keys: tuple[str, ...]
    bases: Mapping[str, float | None]
    """Configured unthrottled value per key for the default entity; None = unlimited."""
    excluded_users: frozenset[str] = frozenset()
    default_entity: QuotaEntity = QuotaEntity.default_user()
    byte_rate_floor: float = MINIMUM
    """The lowest value a throttle sets for the byte-rate keys; kvq-enforcer sets BYTE_RATE_FLOOR
    (kvq.enforcer.throttle.byte.rate.floor). With `longest_throttle_seconds`, only for the pairs
    without a reference: an entity kvq has not seen writing may write at any rate."""
    longest_throttle_seconds: float | None = None
    """kvq.enforcer.throttle.longest.throttle.time: the byte-rate minimum of a pair with a
    reference follows from its own rate (`entity_minimum`); None: the floor for every pair."""
    request_bytes: float | None = None
    """kvq.enforcer.throttle.request.bytes: what a throttled producer sends to a broker in one
    request: the minimum of a pair with a reference is at least `request_minimum`; None, or no
    `request_throttle_seconds`: no such minimum."""
    request_throttle_seconds: float | None = None
    """kvq.enforcer.throttle.request.throttle.time: the longest throttle time one request of
    `request_bytes` may get at the minimum."""
    burst_ratio: float = 1.0
    """kvq.enforcer.throttle.observed.rate.burst.ratio: how far an entity's reference (the
    highest rate Kafka's sensor showed) sits above what it writes sustained; a factor scales the
    reference by `sustained_share` of it (1.0: by the factor itself)."""
    request_share: float = 0.0
    """kvq.enforcer.throttle.request.share: how much more than the throttled writers' quotas in
    all the raises of entities seen sending large requests may add (`request_raises`); 0: none."""
    quota_window_seconds: float = KAFKA_QUOTA_WINDOW_SECONDS
    """The W of Kafka's throttle time on the cluster: the longest window its brokers measure a
    quota's rate over (`BrokerQuotaSettings.longest_window`), Kafka's default until read. An
    entity's own minimum follows it: the same quota hands out throttle times W long per unit of
    overshoot, so a longer window needs a higher minimum for the same longest throttle time."""
    quota_sample_seconds: float = KAFKA_QUOTA_SAMPLE_SECONDS
    """The brokers' longest quota.window.size.seconds (`BrokerQuotaSettings.longest_sample`),
    Kafka's default until read: what Kafka leaves out of the window for a request that meets
    it empty (`request_sizes.emptied_window`)."""
    throttle_average_seconds: float = KAFKA_THROTTLE_AVERAGE_SECONDS
    """How far back the brokers average each entity's throttle times
    (`BrokerQuotaSettings.longest_average`), Kafka's default until read: the requests and quotas
    a throttle time read now is the average of (`request_sizes.request_size`)."""

    @property
    def raised_requests(self) -> tuple[float, float] | None:
        """(the largest request size, its throttle time) entities seen sending large requests
        are raised for (`request_raises`); None when they are not (no share to raise them
        with, or either unset)."""
        if self.request_share <= 0.0 or self.request_bytes is None:
            return None
        if self.request_throttle_seconds is None:
            return None
        return self.request_bytes, self.request_throttle_seconds

    def __post_init__(self) -> None:
        # Properties give whole numbers as ints (`produce=2000`): every value the plan computes
        # must be a float (Change.describe, Kafka's doubles), so they are converted once here.
        bases = {key: quota_value(value) for key, value in self.bases.items()}
        object.__setattr__(self, "bases", bases)
        object.__setattr__(self, "byte_rate_floor", float(self.byte_rate_floor))
        if not 0.0 <= self.request_share <= 1.0:
            raise ValueError(f"request share {self.request_share!r}: must be from 0 to 1")
        if not 1.0 <= self.burst_ratio <= BURST_RATIO_MOST:
            raise ValueError(
                f"burst ratio {self.burst_ratio!r}: must be from 1 to {BURST_RATIO_MOST:g}"
            )
        unknown = [k for k in self.keys if k not in KNOWN_KEYS]
        if unknown or PRODUCER_BYTE_RATE not in self.keys:
            raise ValueError(
                f"quota keys {list(self.keys)!r}: must include {PRODUCER_BYTE_RATE} and may add "
                f"{', '.join(KNOWN_KEYS[1:])}"
            )

    def minimum(self, key: str, reference: float | None = None, factor: float = 0.0) -> float:
        """The lowest value a throttle at `factor` sets for `key`; 1 for the keys other than
        byte rates. For a byte-rate key, of an entity seen writing at `reference`: the higher
        of its own minimum (`entity_minimum`, with a longest throttle time) and, with a request
        size, `factor` x the quota at which no request of it gets a longer throttle time than
        allowed (`request_minimum`). Else (no reference, or an entity idle over the lookback,
        which may write at any rate) the byte-rate floor: what Kafka's int throttle time needs.

        The request minimum is scaled by the factor, not held whatever the factor: an entity
        writing less than it is slowed last, but every lower factor still slows it. Held as a
        constant, it kept the throttle from binding where many principals each write a few
        kB/s per broker (40 at 6-12 kB/s: every quota at 8,192 B/s from factor 0.64 down, and
        the volume went past its limit under either policy)."""
        if key not in INTEGRAL_KEYS:
            return MINIMUM
        if reference is None or reference <= 0.0 or self.longest_throttle_seconds is None:
            return self.byte_rate_floor
        own = entity_minimum(reference, self.longest_throttle_seconds, self.quota_window_seconds)
        if self.request_bytes is None or self.request_throttle_seconds is None:
            return own
        requests = request_minimum(self.request_bytes, self.request_throttle_seconds)
        return max(own, float(math.floor(max(factor, 0.0) * requests)))

    def exempt(self, entity: QuotaEntity) -> bool:
        """The override entity of an excluded principal."""
        return entity.types == ("user",) and entity.name("user") in self.excluded_users

    def override_source(self, entity: QuotaEntity) -> QuotaEntity | None:
        """For an entity of an excluded principal, the default-user entity it stands in for."""
        if "user" not in entity.types or entity.name("user") not in self.excluded_users:
            return None
        return QuotaEntity.of([(t, None if t == "user" else n) for t, n in entity.components])

    def untouched(self, entity: QuotaEntity) -> bool:
        """Entities the enforcer never changes: non user/client-id ones and excluded users' own."""
        if not entity.is_user_or_client or entity.is_originals_record:
            return True
        owned = "user" in entity.types and entity.name("user") in self.excluded_users
        return owned and not self.exempt(entity)


def entity_minimum(
    rate: float, longest_throttle_seconds: float, window_seconds: float = KAFKA_QUOTA_WINDOW_SECONDS
) -> float:
    """The lowest byte rate for an entity seen writing at `rate`: the quota at which Kafka's
    throttle time for that rate, (rate - quota) / quota x W, is `longest_throttle_seconds`, so
    that a quota lowered at once from the rate to it (factor 0 from 1.0, the 0/1 policy) mutes
    a producer for no longer (graceful-slowdown lowers it in paced steps, each a few seconds'
    throttle). Whole bytes, at least 1 (Kafka rejects 0). At this quota Kafka's int throttle
    time holds for rates up to (1 + 2^31 ms / T) times it: 2^31 ms / W x (W / (W + T)) times the
    observed rate (about 30,000 times with a minute and Kafka's 11 s), so a burst does not
    wrap it. W is `window_seconds`, the brokers' quota window: with 3 s (quota.window.num=3) the
    minimum is 4.8 % of the rate for a minute, against 15.5 % with 11 s."""
    share = window_seconds / (window_seconds + longest_throttle_seconds)
    return max(float(math.floor(rate * share)), MINIMUM)


def sustained_share(factor: float, burst_ratio: float) -> float:
    """The share of an entity's reference a throttle at `factor` sets its quota to, where the
    reference is `burst_ratio` times what the entity writes sustained: factor x (1 / ratio +
    (1 - 1 / ratio) x factor^3). The reference is the highest rate Kafka's sensor showed over
    the lookback, and a sensor over a short quota window swings with the producers' batches (on
    bench/slowdown with quota.window.num=3: 1.26-1.50 times each entity's highest 30 s average).
    Scaled by the factor alone, a factor f lets an entity write f x that, up to 1.5 f of what it
    wrote: graceful slowdown's level, which plans the disk's rate as f x its peak, is overrun,
    catches up with lower factors at the end of its approach, and those quotas hand a Java
    producer's request throttle times of over 10 s (docs/enforcer.md). So a low factor scales
    the sustained rate (reference / ratio), and near 1 the quota keeps the allowance for the
    bursts (all of it at 1, 73 % at 0.9, half near 0.8, an eighth at 0.5). Faded in proportion
    to the factor instead, the approach still ended low enough for an 11 s stall in one run of
    three. Never above factor x the reference."""
    if burst_ratio <= 1.0 or factor >= 1.0:
        return factor
    factor = max(factor, 0.0)
    sustained = 1.0 / burst_ratio
    return factor * (sustained + (1.0 - sustained) * factor**3)


def request_minimum(request_bytes: float, longest_throttle_seconds: float) -> float:
    """The lowest byte rate at which no request of `request_bytes` gets a throttle time longer
    than `longest_throttle_seconds`: 2 x request_bytes / longest_throttle_seconds, in whole
    bytes (rounded up). Kafka records a request's bytes, then answers with (rate - quota) /
    quota x W (QuotaUtils.throttleTime), the rate being the bytes in its window of W seconds,
    this request's included, over W: (B - quota x W) / quota. A producer held at its quota sends
    its next request when its throttle ends (KIP-219): most requests of S bytes find the window
    at about the quota and get S / quota, but one sent before an earlier request left the
    window finds up to about S more: up to twice that, and up to 2.5 s more as Kafka drops its
    window's 1 s samples whole (devcluster's copy of Kafka's window, in the unit tests). Its
    producer waits that long for its next acknowledgement, and after a restore waits out the
    last one. A throttled producer's requests carry what it buffered while it waited, up
    to its buffer or request size (librdkafka's queue and message.max.bytes, Java's
    buffer.memory and batch.size per partition): below this quota some throttle time is longer
    than allowed, however slowly the quota was lowered to it."""
    return float(math.ceil(2.0 * request_bytes / longest_throttle_seconds))


def tracked_originals(
    policy: QuotaPolicy, snapshot: Snapshot, known: Mapping[Pair, float | None] | None = None
) -> dict[Pair, float | None]:
    """The pairs a throttle manages, with their values in `snapshot` (None: unset).

    `known` are the originals already journaled (mid-throttle the snapshot holds our own values,
    so the shadowing decision below must use the originals).
    """
    known = known or {}
    pairs = _set_pairs(policy, snapshot)
    pairs.update(_always_tracked(policy, snapshot))
    pairs.update(_shadow_mirrors(policy, pairs, known))
    for user in sorted(policy.excluded_users):
        for key in policy.keys:
            pairs.update(_counterparts(user, key, pairs, snapshot, known))
    return pairs


def _set_pairs(policy: QuotaPolicy, snapshot: Snapshot) -> dict[Pair, float | None]:
    """Every managed key the snapshot holds, on every entity the policy may touch."""
    pairs: dict[Pair, float | None] = {}
    for entity, values in snapshot.items():
        if policy.untouched(entity):
            continue
        for key in policy.keys:
            if key in values:
                pairs[(entity, key)] = quota_value(values[key])
    return pairs


def _always_tracked(policy: QuotaPolicy, snapshot: Snapshot) -> dict[Pair, float | None]:
    """The default entity and each excluded user, set or not: a throttle may set them."""
    always = [policy.default_entity] + [QuotaEntity.user(u) for u in sorted(policy.excluded_users)]
    return {
        (entity, key): current_value(snapshot, (entity, key))
        for entity in always
        for key in policy.keys
    }


def _shadow_mirrors(
    policy: QuotaPolicy, pairs: Mapping[Pair, float | None], known: Mapping[Pair, float | None]
) -> dict[Pair, float | None]:
    """The default-user mirror of each client-id entity (shadow_mirror), for each key whose
    default user and default-user-default-client were unset originally: setting the default
    user would shadow those clients otherwise."""

    def original(pair: Pair) -> float | None:
        return known[pair] if pair in known else pairs.get(pair)

    mirrors: dict[Pair, float | None] = {}
    for key in policy.keys:
        if original((policy.default_entity, key)) is not None:
            continue
        if original((DEFAULT_USER_DEFAULT_CLIENT, key)) is not None:
            continue
        for entity, _ in [p for p in pairs if p[1] == key]:
            mirror = shadow_mirror(entity)
            if mirror is not None and (mirror, key) not in pairs:
                mirrors[(mirror, key)] = None
    return mirrors


def _counterparts(
    user: str,
    key: str,
    pairs: Mapping[Pair, float | None],
    snapshot: Snapshot,
    known: Mapping[Pair, float | None],
) -> dict[Pair, float | None]:
    """`user=X,client-id=C` for every tracked `user=<default>,client-id=C` (C may be the default),
    unless X holds the key itself at `user=X` or `user=X,client-id=<default>` (they outrank
    every default-user entity) or at that very entity."""

    def own(entity: QuotaEntity) -> bool:
        """X's own value (originals first: mid-throttle Kafka holds our overrides)."""
        if (entity, key) in known:
            return known[(entity, key)] is not None
        return snapshot.get(entity, {}).get(key) is not None

    x_any = QuotaEntity.of({"user": user, "client-id": None})
    if own(x_any) or own(QuotaEntity.user(user)):
        return {}
    out: dict[Pair, float | None] = {}
    for entity, pair_key in list(pairs):
        if pair_key != key or entity.types != ("user", "client-id"):
            continue
        if entity.name("user") is not None:
            continue
        counterpart = QuotaEntity.of({"user": user, "client-id": entity.name("client-id")})
        if (counterpart, key) not in pairs and not own(counterpart):
            out[(counterpart, key)] = quota_value(known.get((counterpart, key)))
    return out


DEFAULT_USER_DEFAULT_CLIENT = QuotaEntity.of({"user": None, "client-id": None})


def shadow_mirror(entity: QuotaEntity) -> QuotaEntity | None:
    """For a client-id entity, the default-user entity that outranks the default user.

    Setting the default user (KIP-55 level 6) where it was unset would shadow every client-id
    quota (levels 7, 8) and lift those clients to the default's value. Mirroring `client-id=C`
    into `user=<default>,client-id=C` (level 4) and `client-id=<default>` into
    `user=<default>,client-id=<default>` (level 5), throttled from the client-id original, keeps
    every such client at its own quota x factor. The mirrors are removed on restore.
    """
    if entity.types != ("client-id",):
        return None
    return QuotaEntity.of({"user": None, "client-id": entity.name("client-id")})


def _mirror_source(entity: QuotaEntity) -> QuotaEntity | None:
    if entity.types != ("user", "client-id") or entity.name("user") is not None:
        return None
    return QuotaEntity.of({"client-id": entity.name("client-id")})


def desired_value(
    policy: QuotaPolicy,
    pair: Pair,
    original: float | None,
    factor: float,
    originals: Mapping[Pair, float | None] | None = None,
    reference: float | None = None,
) -> float | None:
    """The value one pair should have at `factor` (None: no value), always a float.

    `reference`: the rate the pair's entity was seen producing when the episode started
    (kvq.enforcer.throttle.reference=observed-rate); the factor then scales the lower of it and
    the original (or base), so a quota far above what its clients write still slows them."""
    return writable(
        quota_value(
            _desired(policy, pair, quota_value(original), factor, originals or {}, reference)
        )
    )


def writable(value: float | None) -> float | None:
    """`value` as Kafka 4.4+ accepts it: a non-finite one (NaN, +inf: no limit) as UNLIMITED."""
    return UNLIMITED if value is not None and not math.isfinite(value) else value


def _desired(
    policy: QuotaPolicy,
    pair: Pair,
    original: float | None,
    factor: float,
    originals: Mapping[Pair, float | None],
    reference: float | None = None,
) -> float | None:
    if factor >= 1.0:
        return original
    pair, original = _quota_of(policy, pair, original, originals)
    entity, key = pair
    source = policy.override_source(entity)
    if source is not None:
        if original is not None:
            return original
        unthrottled = originals.get((source, key))
        mirrored = _mirror_source(source)
        if unthrottled is None and mirrored is not None:
            unthrottled = originals.get((mirrored, key))
        return UNLIMITED if unthrottled is None else unthrottled
    ceiling = _ceiling(policy, pair, original, originals)
    if reference is not None and reference < ceiling:
        # The reference stands in for a higher (or no) base: the result is never above the base
        # and never below the minimum the base allows (a base below the floor stays as it is);
        # factor 0 holds the pair at its own minimum (or the floor without a reference).
        lowest = policy.minimum(key, reference, factor)
        share = sustained_share(factor, policy.burst_ratio)
        return max(scaled(reference, share, key, MINIMUM), min(lowest, ceiling))
    if ceiling == math.inf:
        # Unlimited x factor is unlimited: only factor 0 limits it.
        return policy.minimum(key) if factor <= 0.0 else original
    return scaled(ceiling, factor, key, policy.minimum(key))


def _ceiling(
    policy: QuotaPolicy, pair: Pair, original: float | None, originals: Mapping[Pair, float | None]
) -> float:
    """The most a throttle sets for a (not exempt) pair: its original, the configured base for
    the default entity, a mirror's client-id original; an unset or non-finite one is no limit
    at all (inf: any reference is below it)."""
    entity, key = pair
    base = original
    if base is None and entity == policy.default_entity:
        base = policy.bases.get(key)
    mirrored = _mirror_source(entity)
    if base is None and mirrored is not None and originals:
        base = originals.get((mirrored, key))
    return base if base is not None and math.isfinite(base) else math.inf


def scaled(base: float, factor: float, key: str, minimum: float = MINIMUM) -> float:
    """max(base x factor, minimum), rounded down for long keys, never above the base itself."""
    value = float(base) * factor
    if key in INTEGRAL_KEYS:
        value = float(math.floor(value))
    return max(value, float(min(minimum, base)))


def plan(
    policy: QuotaPolicy,
    originals: Mapping[Pair, float | None],
    factor: float,
    frozen: Iterable[Pair] = (),
    references: Mapping[Pair, float] | None = None,
    requests: Requests | None = None,
) -> dict[Pair, float | None]:
    """Desired value of every tracked pair except the `frozen` ones (operator drift); pairs
    with a `references` rate are scaled from min(original or base, reference), and those with
    a request size in `requests` raised towards their request minimum (`request_raises`)."""
    skip = set(frozen)
    references = held_references(policy, originals, references or {})
    desired = {
        pair: desired_value(policy, pair, original, factor, originals, references.get(pair))
        for pair, original in originals.items()
        if pair not in skip
    }
    if requests is not None and requests.sizes and factor < 1.0:
        desired.update(_raised(policy, originals, desired, references, requests))
    return desired


def separated_user(policy: QuotaPolicy, pair: Pair, original: float | None) -> bool:
    """A user's producer quota that only the episode set (no original at `user=U`, U not
    excluded): a user the default user's quota held, whose requests are too large for it, is
    raised alone by a quota of its own, at the default user's value until raised. KIP-55's
    `user=U` (level 3) outranks the default user (6) for U alone, and Kafka measures U on the
    same sensor under either (tagged user=U, client-id=""), so its rate and throttle times
    carry over. At the restore the original, none, removes it."""
    entity, key = pair
    return (
        key == PRODUCER_BYTE_RATE
        and original is None
        and entity.types == ("user",)
        and entity.name("user") is not None
        and not policy.exempt(entity)
    )


def held_references(
    policy: QuotaPolicy, pairs: Mapping[Pair, float | None], references: Mapping[Pair, float]
) -> dict[Pair, float]:
    """`references`, and for each separated user of `pairs` (pair: original) the default
    user's: it was held to that quota, scaled from the busiest user under it."""
    default = (policy.default_entity, PRODUCER_BYTE_RATE)
    out = dict(references)
    if default in references:
        for pair, original in pairs.items():
            if separated_user(policy, pair, original):
                out[pair] = references[default]
    return out


def _quota_of(
    policy: QuotaPolicy, pair: Pair, original: float | None, originals: Mapping[Pair, float | None]
) -> tuple[Pair, float | None]:
    """The pair whose quota `pair` holds unraised, and its original: the default user's for a
    separated user (or one about to be), else `pair` itself."""
    if not separated_user(policy, pair, original):
        return pair, original
    default = (policy.default_entity, pair[1])
    return default, originals.get(default)


def _raised(
    policy: QuotaPolicy,
    originals: Mapping[Pair, float | None],
    desired: Mapping[Pair, float | None],
    references: Mapping[Pair, float],
    requests: Requests,
) -> dict[Pair, float]:
    """The raises of `request_raises`, where a sized user the default user's quota holds
    (not separated yet) is raised alone: separated, and only if raised."""
    default = (policy.default_entity, PRODUCER_BYTE_RATE)
    candidates = []
    if desired.get(default) is not None and default in references:
        candidates = [
            pair
            for pair in requests.sizes
            if pair not in originals and separated_user(policy, pair, None)
        ]
    held = {**desired, **{pair: desired[default] for pair in candidates}}
    references = {**references, **{pair: references[default] for pair in candidates}}
    ceilings = {
        pair: _ceiling(policy, *_quota_of(policy, pair, originals.get(pair), originals), originals)
        for pair in requests.sizes
        if pair in held
    }
    raised = request_raises(policy, held, references, requests, ceilings)
    return {
        pair: value
        for pair, value in raised.items()
        if pair in desired or value > (held[pair] or 0.0)
    }


@dataclass(frozen=True, slots=True)
class Requests:
    """What a throttle knows of its entities' produce requests (request_sizes.py)."""

    sizes: Mapping[Pair, float]
    """Each pair's request size estimate (bytes)."""
    budgets: Mapping[Pair, int] = field(default_factory=dict)
    """How many clients' budgets each pair's quota is (1 when absent): a default-user quota
    holds each user it covers to it (what the throttle allows counts it once per user)."""

    def budget(self, pair: Pair) -> int:
        return max(self.budgets.get(pair, 1), 1)


def request_raises(
    policy: QuotaPolicy,
    desired: Mapping[Pair, float | None],
    references: Mapping[Pair, float],
    requests: Requests,
    ceilings: Mapping[Pair, float],
) -> dict[Pair, float]:
    """The producer quotas of entities seen sending large requests, raised towards the quota
    at which none of their requests gets a longer throttle time than allowed:
    `request_minimum` of each entity's own request size (`requests`, estimated from the
    throttle times Kafka answered it with, request_sizes.py; at most `request_bytes`), never
    above the rate it was seen writing nor its original or base.

    The raises together take no more than `request_share` of what the throttled writers are
    allowed in all (each raise cut in proportion when they would), both counted per budget (a
    default-user quota counts once per user it holds; `plan` raises such a user alone, by a
    quota of its own: `separated_user`): a few entities sending large requests (a Java
    producer's 16 KiB batches at a quota of 1.5 kB/s: 11 s throttle times, twice that for
    some) are spared long stalls at little cost to the disk, which the factor makes up for,
    while many of them (librdkafka producers sending what they buffered, up to a megabyte)
    cannot lift the throttle off the volume: held at their own request minimum, 40 such
    producers kept the volume from being held above its limit."""
    if policy.raised_requests is None:
        return {}
    largest, throttle_seconds = policy.raised_requests
    writers = {
        pair: value
        for pair, value in desired.items()
        if pair[1] == PRODUCER_BYTE_RATE and pair in references and value is not None
    }
    wanted: dict[Pair, float] = {}
    for pair, size in requests.sizes.items():
        if pair not in writers:
            continue
        needed = request_minimum(min(size, largest), throttle_seconds)
        target = min(needed, references[pair], ceilings.get(pair, math.inf))
        if target > writers[pair]:
            wanted[pair] = target - writers[pair]
    if not wanted:
        return {}
    allowed = policy.request_share * sum(v * requests.budget(p) for p, v in writers.items())
    cut = min(1.0, allowed / sum(more * requests.budget(p) for p, more in wanted.items()))
    return {pair: float(math.floor(writers[pair] + more * cut)) for pair, more in wanted.items()}


@dataclass(frozen=True, slots=True, order=True)
class Change:
    """Set `key` of `entity` to `value`, or remove it when value is None."""

    entity: QuotaEntity
    key: str
    value: float | None
    stands_for: float | None = field(default=None, compare=False)
    """The non-finite original this value (UNLIMITED) is written in place of, else None."""

    def describe(self) -> str:
        what = "remove" if self.value is None else f"= {_number(self.value)}"
        if self.stands_for is not None:
            what += f" (no limit, in place of the original {self.stands_for!r})"
        return f"{self.entity.label()} {self.key} {what}"


def changes(
    desired: Mapping[Pair, float | None],
    snapshot: Snapshot,
    originals: Mapping[Pair, float | None] | None = None,
) -> list[Change]:
    """What must change in Kafka to reach `desired`, most specific entities first; a change that
    writes UNLIMITED for a non-finite original in `originals` says so (`stands_for`)."""
    originals = originals or {}
    out = [
        Change(entity, key, value, _stands_for(originals.get((entity, key)), value))
        for (entity, key), value in desired.items()
        if not same_value(current_value(snapshot, (entity, key)), value)
    ]
    return sorted(out, key=lambda c: (c.entity.precedence, c.entity.label(), c.key))


def _stands_for(original: float | None, value: float | None) -> float | None:
    if original is None or math.isfinite(original) or value != UNLIMITED:
        return None
    return original


def current_value(snapshot: Snapshot, pair: Pair) -> float | None:
    return quota_value(snapshot.get(pair[0], {}).get(pair[1]))


def quota_value(value: float | None) -> float | None:
    """A quota value as the float Kafka stores (a double): ints from properties, from JSON or
    from a caller become floats; None (unset) stays None."""
    return None if value is None else float(value)


def same_value(a: float | None, b: float | None) -> bool:
    """Equal quota values (what Kafka holds is compared with what we set): NaN equal to NaN, and
    every value without effect that Kafka may hold (NaN, +inf) equal to UNLIMITED, which the plan
    writes in their place."""
    if a is None or b is None:
        return a is b
    return a == b or (_no_limit(a) and _no_limit(b))


def _no_limit(value: float) -> bool:
    return value == UNLIMITED or math.isnan(value) or value == math.inf


def _number(value: float) -> str:
    """A whole value without a fraction, as kafka-configs shows it; others as repr. An int is
    accepted too (`int.is_integer` only exists from Python 3.12)."""
    value = float(value)
    return str(int(value)) if value.is_integer() and abs(value) < 2**63 else repr(value)
