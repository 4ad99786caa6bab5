"""What a throttle means for every client, checked with Kafka's own resolution (KIP-55) over
generated quota sets: the bounds docs/enforcer.md states; and that any sequence of factors,
with the journal lost on the way, ends in a byte-exact restore."""

from __future__ import annotations

import math
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from devkit.memory_quotas import InMemoryQuotas
from enforcer.applier import Applier
from enforcer.journal import Journal
from enforcer.metrics import EnforcerMetrics
from enforcer.quota_plan import UNLIMITED, QuotaPolicy, plan, tracked_originals
from kvq.kafka.quota_entity import QuotaEntity
from kvq.settings.config import CLUSTER_LABEL_DEFAULT
from tests.enforcer.applier_support import apply_step

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
    """The limit Kafka applies to (user, client-id): None when no entity holds the key, inf for
    an explicit 'no limit' (NaN never throttles; 2^63-ish is beyond any rate)."""
    for entity in chain(user, client):
        value = snapshot.get(entity, {}).get(P)
        if value is not None:
            return math.inf if math.isnan(value) or value >= UNLIMITED else value
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

quota_values = st.one_of(
    st.integers(min_value=1, max_value=100_000).map(float),
    st.sampled_from([math.nan, 2.0**63]),
)
snapshots = st.dictionaries(
    st.sampled_from(ENTITIES), quota_values.map(lambda v: {P: v}), max_size=8
)


@settings(max_examples=400, deadline=None)
@given(
    snapshot=snapshots,
    excluded=st.sets(st.sampled_from(USERS), max_size=2),
    factor=st.sampled_from([0.0, 0.1, 0.5, 0.99]),
    base=st.sampled_from([None, 1000.0]),
    floor=st.sampled_from([1.0, 8192.0]),
)
def test_every_client_is_limited_to_its_original_times_factor_and_excluded_users_keep_theirs(
    snapshot, excluded, factor, base, floor
):
    policy = QuotaPolicy((P,), {P: base}, frozenset(excluded), byte_rate_floor=floor)
    throttled = applied(snapshot, plan(policy, tracked_originals(policy, snapshot), factor))
    for user in (*USERS, "someone"):
        for client in (*CLIENTS, "other"):
            before = effective(snapshot, user, client)
            after = effective(throttled, user, client)
            where = f"user={user} client-id={client}: {before} -> {after}"
            if user in excluded:
                assert _unlimited(after) == _unlimited(before), "excluded keeps its limit: " + where
                continue
            if before is None:
                before = base  # nothing applied: the default user gets the base
            lowest = floor if before is None else min(floor, before)  # below the floor: kept
            if factor == 0.0:
                assert after == lowest, where
            elif before is None or before == math.inf:
                continue  # unlimited x factor is unlimited
            else:
                assert after is not None, where
                assert after <= max(math.floor(before * factor), lowest), where


def _unlimited(value: float | None) -> float:
    return math.inf if value is None else value


def _same(a: dict, b: dict) -> bool:
    """Equal quota sets byte for byte, but for a NaN the restore may write back as UNLIMITED
    (Kafka 4.4 refuses NaN; brokers enforce both as no limit)."""
    return {e: {k: _exact(v) for k, v in vs.items()} for e, vs in a.items()} == {
        e: {k: _exact(v) for k, v in vs.items()} for e, vs in b.items()
    }


def _exact(value: float) -> str:
    return repr(UNLIMITED) if math.isnan(value) else repr(value)


def c1_metrics() -> EnforcerMetrics:
    """The metrics of a (re)started enforcer managing cluster c1."""
    return EnforcerMetrics(("c1",), CLUSTER_LABEL_DEFAULT)


@settings(max_examples=60, deadline=None)
@given(
    snapshot=snapshots,
    excluded=st.sets(st.sampled_from(USERS), max_size=1),
    factors=st.lists(st.sampled_from([0.0, 0.1, 0.5, 0.99]), min_size=1, max_size=3),
    lose_journal_after=st.one_of(st.none(), st.integers(min_value=0, max_value=2)),
    base=st.sampled_from([None, 1000.0]),
)
def test_any_sequence_of_factors_and_a_lost_journal_restore_exactly(
    snapshot, excluded, factors, lose_journal_after, base
):
    policy = QuotaPolicy((P,), {P: base}, frozenset(excluded))
    kafka = InMemoryQuotas(snapshot)
    with tempfile.TemporaryDirectory() as work:
        journal = Journal(Path(work) / "j.sqlite3")
        try:
            applier = Applier("c1", policy, kafka, journal, c1_metrics())
            for step, factor in enumerate(factors):
                apply_step(applier, factor)
                if step == lose_journal_after:
                    journal.close()
                    journal = Journal(Path(work) / f"fresh-{step}.sqlite3")
                    applier = Applier("c1", policy, kafka, journal, c1_metrics())
            apply_step(applier, 1.0)
        finally:
            journal.close()
    assert _same(kafka.describe(), snapshot)
