"""What a throttle means for every client, checked with Kafka's own resolution (KIP-55) over
generated quota sets: the bounds the enforcer README states."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from enforcer.quota_entity import QuotaEntity
from enforcer.quota_plan import UNLIMITED, QuotaPolicy, plan, tracked_originals

P = "producer_byte_rate"
USERS = ("alice", "bob", "admin")
CLIENTS = ("app", "batch")


def chain(user: str, client: str) -> list[QuotaEntity]:
    """The entities Kafka consults for (user, client-id), most specific first (KIP-55)."""
    return [
        QuotaEntity.of({"user": user, "client-id": client}),
        QuotaEntity.of({"user": user, "client-id": None}),
        QuotaEntity.user(user),
        QuotaEntity.of({"user": None, "client-id": client}),
        QuotaEntity.of({"user": None, "client-id": None}),
        QuotaEntity.user(None),
        QuotaEntity.of({"client-id": client}),
        QuotaEntity.of({"client-id": None}),
    ]


def effective(snapshot, user: str, client: str) -> float | None:
    """The limit Kafka applies to (user, client-id): None for none (or 'unlimited')."""
    for entity in chain(user, client):
        value = snapshot.get(entity, {}).get(P)
        if value is not None:
            return None if value >= UNLIMITED else value
    return None


def applied(snapshot, desired):
    out = {e: dict(v) for e, v in snapshot.items()}
    for (entity, key), value in desired.items():
        values = out.setdefault(entity, {})
        if value is None:
            values.pop(key, None)
        else:
            values[key] = value
    return out


ENTITIES = (
    [
        e
        for user in (*USERS, None)
        for client in (*CLIENTS, None)
        for e in {QuotaEntity.of({"user": user, "client-id": client})}
    ]
    + [QuotaEntity.user(u) for u in (*USERS, None)]
    + [QuotaEntity.of({"client-id": c}) for c in (*CLIENTS, None)]
)

snapshots = st.dictionaries(
    st.sampled_from(ENTITIES),
    st.integers(min_value=1, max_value=100_000).map(lambda v: {P: float(v)}),
    max_size=8,
)


@settings(max_examples=400, deadline=None)
@given(
    snapshot=snapshots,
    excluded=st.sets(st.sampled_from(USERS), max_size=2),
    factor=st.sampled_from([0.0, 0.1, 0.5, 0.99]),
    base=st.sampled_from([None, 1000.0]),
)
def test_every_client_is_limited_to_its_original_times_factor_and_excluded_users_keep_theirs(
    snapshot, excluded, factor, base
):
    policy = QuotaPolicy((P,), {P: base}, frozenset(excluded))
    throttled = applied(snapshot, plan(policy, tracked_originals(policy, snapshot), factor))
    for user in (*USERS, "someone"):
        for client in (*CLIENTS, "other"):
            before = effective(snapshot, user, client)
            after = effective(throttled, user, client)
            where = f"user={user} client-id={client}: {before} -> {after}"
            if user in excluded:
                assert after == before, "an excluded user keeps its original limit: " + where
                continue
            if before is None:
                before = base
            if before is None:
                expected = 1.0 if factor == 0.0 else None
                assert after == expected, where
            else:
                assert after is not None, where
                assert after <= max(math.floor(before * factor), 1.0), where
