"""The pure planner: base x factor for every entity that could let a client bypass the throttle."""

import pytest

from enforcer.quota_plan import (
    UNLIMITED,
    Change,
    QuotaPolicy,
    changes,
    plan,
    scaled,
    tracked_originals,
)
from kvq.kafka.quota_entity import QuotaEntity

P = "producer_byte_rate"
C = "consumer_byte_rate"
R = "request_percentage"
DEFAULT = QuotaEntity.default_user()
ALICE = QuotaEntity.user("alice")
ALICE_APP = QuotaEntity.of({"user": "alice", "client-id": "app"})
ADMIN = QuotaEntity.user("admin")
ADMIN_APP = QuotaEntity.of({"user": "admin", "client-id": "tool"})
CLIENT = QuotaEntity.of({"client-id": "batch"})
IP = QuotaEntity.of({"ip": "10.0.0.1"})
DEFAULT_BATCH = QuotaEntity.of({"user": None, "client-id": "batch"})
ANY_CLIENT = QuotaEntity.of({"client-id": None})
DEFAULT_ANY = QuotaEntity.of({"user": None, "client-id": None})


def policy(keys=(P,), produce=1000, fetch=None, request=None, excluded=()):
    return QuotaPolicy(keys, {P: produce, C: fetch, R: request}, frozenset(excluded))


def planned(pol, snapshot, factor):
    return plan(pol, tracked_originals(pol, snapshot), factor)


def test_defaults_only_throttles_the_default_user_from_the_configured_base():
    assert planned(policy(), {}, 0.5) == {(DEFAULT, P): 500.0}


def test_every_entity_holding_a_managed_key_is_throttled_at_every_precedence_level():
    snapshot = {ALICE: {P: 800.0}, ALICE_APP: {P: 300.0, C: 50.0}, CLIENT: {P: 90.0}}
    result = planned(policy(), snapshot, 0.5)
    assert result == {
        (DEFAULT, P): 500.0,
        (ALICE, P): 400.0,
        (ALICE_APP, P): 150.0,
        (CLIENT, P): 45.0,
        (DEFAULT_BATCH, P): 45.0,
    }, "consumer_byte_rate is not managed unless configured"


def test_original_value_of_the_default_entity_wins_over_the_configured_base():
    assert planned(policy(produce=1000), {DEFAULT: {P: 400.0}}, 0.5) == {(DEFAULT, P): 200.0}


def test_factor_zero_clamps_to_one_because_kafka_rejects_zero():
    result = planned(policy(), {ALICE: {P: 800.0}}, 0.0)
    assert set(result.values()) == {1.0}


def test_unlimited_default_is_limited_only_at_factor_zero():
    assert planned(policy(produce=None), {}, 0.0) == {(DEFAULT, P): 1.0}
    assert planned(policy(produce=None), {}, 0.5) == {(DEFAULT, P): None}


def test_long_keys_round_down_double_keys_do_not():
    assert scaled(1001.0, 0.5, P) == 500.0
    assert scaled(33.0, 0.5, R) == 16.5
    assert scaled(0.5, 0.1, R) == 0.5, "never raise a value above its original"


def test_excluded_principal_gets_an_unlimited_override_and_its_own_entities_stay():
    snapshot = {ADMIN_APP: {P: 77.0}}
    result = planned(policy(excluded={"admin"}), snapshot, 0.0)
    assert result[(ADMIN, P)] == UNLIMITED
    assert (ADMIN_APP, P) not in result


def test_excluded_principal_with_its_own_quota_keeps_it():
    result = planned(policy(excluded={"admin"}), {ADMIN: {P: 5000.0}}, 0.0)
    assert result[(ADMIN, P)] == 5000.0


def test_factor_one_restores_originals_and_removes_what_was_unset():
    pol = policy(excluded={"admin"})
    originals = tracked_originals(pol, {ALICE: {P: 800.0}})
    assert plan(pol, originals, 1.0) == {(DEFAULT, P): None, (ALICE, P): 800.0, (ADMIN, P): None}


def test_configured_extra_keys_are_scaled_too_and_ip_entities_are_left_alone():
    pol = policy(keys=(P, C, R), fetch=2000, request=50.0)
    result = planned(pol, {IP: {"connection_creation_rate": 5.0}}, 0.5)
    assert result == {(DEFAULT, P): 500.0, (DEFAULT, C): 1000.0, (DEFAULT, R): 25.0}


def test_frozen_pairs_are_left_out_of_the_plan():
    pol = policy()
    originals = tracked_originals(pol, {ALICE: {P: 800.0}})
    assert (ALICE, P) not in plan(pol, originals, 0.5, frozen={(ALICE, P)})


def test_planning_from_originals_never_compounds():
    pol = policy()
    originals = tracked_originals(pol, {ALICE: {P: 800.0}})
    assert plan(pol, originals, 0.5) == plan(pol, originals, 0.5)


def test_changes_only_list_differences_most_specific_first():
    desired = {(DEFAULT, P): 500.0, (ALICE_APP, P): 150.0, (ALICE, P): 800.0, (CLIENT, P): None}
    snapshot = {ALICE: {P: 800.0}, CLIENT: {P: 90.0}}
    assert changes(desired, snapshot) == [
        Change(ALICE_APP, P, 150.0),
        Change(DEFAULT, P, 500.0),
        Change(CLIENT, P, None),
    ]


def test_policy_requires_producer_byte_rate_and_known_keys():
    with pytest.raises(ValueError, match="must include producer_byte_rate"):
        QuotaPolicy((C,), {})
    with pytest.raises(ValueError, match="may add"):
        QuotaPolicy((P, "bogus_rate"), {})


def test_client_id_quotas_are_mirrored_so_the_new_default_user_cannot_lift_them():
    """Setting user=<default> (level 6) would outrank client-id quotas (levels 7, 8)."""
    snapshot = {CLIENT: {P: 90.0}, ANY_CLIENT: {P: 60.0}}
    result = planned(policy(produce=1000), snapshot, 0.5)
    assert result[(DEFAULT_BATCH, P)] == 45.0
    assert result[(DEFAULT_ANY, P)] == 30.0
    assert result[(DEFAULT, P)] == 500.0


def test_no_mirrors_when_a_default_user_quota_already_shadowed_client_ids():
    snapshot = {CLIENT: {P: 90.0}, DEFAULT: {P: 700.0}}
    assert (DEFAULT_BATCH, P) not in planned(policy(), snapshot, 0.5)
    snapshot = {CLIENT: {P: 90.0}, DEFAULT_ANY: {P: 700.0}}
    assert (DEFAULT_BATCH, P) not in planned(policy(), snapshot, 0.5)


def test_mirrors_are_removed_on_restore():
    pol = policy()
    originals = tracked_originals(pol, {CLIENT: {P: 90.0}})
    restored = plan(pol, originals, 1.0)
    assert restored[(DEFAULT_BATCH, P)] is None and restored[(CLIENT, P)] == 90.0


def test_client_id_created_mid_throttle_is_mirrored_using_the_journaled_originals():
    pol = policy()
    known = tracked_originals(pol, {})
    live = {DEFAULT: {P: 500.0}, CLIENT: {P: 90.0}}  # our own default-user value is in Kafka now
    discovered = tracked_originals(pol, live, known)
    assert (DEFAULT_BATCH, P) in discovered


def test_an_excluded_user_keeps_its_original_limits_not_unlimited():
    """admin was limited by the default user (and by user=<default>,client-id=batch for batch);
    while everyone else is throttled, admin keeps exactly those limits."""
    pol = policy(excluded={"admin"})
    snapshot = {DEFAULT: {P: 800.0}, DEFAULT_BATCH: {P: 300.0}}
    result = planned(pol, snapshot, 0.5)
    assert result[(DEFAULT, P)] == 400.0 and result[(DEFAULT_BATCH, P)] == 150.0
    assert result[(ADMIN, P)] == 800.0
    assert result[(QuotaEntity.of({"user": "admin", "client-id": "batch"}), P)] == 300.0
    restored = planned(pol, snapshot, 1.0)
    assert restored[(ADMIN, P)] is None, "the overrides go with the restore"


def test_an_excluded_user_with_its_own_user_quota_needs_no_other_override():
    pol = policy(excluded={"admin"})
    snapshot = {ADMIN: {P: 50.0}, DEFAULT_BATCH: {P: 300.0}}
    result = planned(pol, snapshot, 0.5)
    assert result[(ADMIN, P)] == 50.0
    assert all(
        entity.types != ("user", "client-id") or entity.name("user") != "admin"
        for entity, _ in result
    )


def test_counterparts_of_default_user_entities_found_mid_throttle_use_the_originals():
    pol = policy(excluded={"admin"})
    first = tracked_originals(pol, {DEFAULT: {P: 800.0}})
    throttled = {DEFAULT: {P: 400.0}, ADMIN: {P: 800.0}}
    throttled[QuotaEntity.of({"user": None, "client-id": "late"})] = {P: 90.0}
    found = tracked_originals(pol, throttled, first)
    late_admin = QuotaEntity.of({"user": "admin", "client-id": "late"})
    assert (late_admin, P) in found
    assert plan(pol, {**found, **first}, 0.5)[(late_admin, P)] == 90.0


# Issue 24 item 1: whole numbers arrive as ints (properties such as `produce=2000`, JSON, callers)
# and once reached `float.is_integer()` (`int.is_integer` only exists from Python 3.12).
FLOOR = 8192
OPS = QuotaEntity.user("ops")
OPS_ANY = QuotaEntity.of({"user": "ops", "client-id": None})
AROUND_THE_FLOOR = [  # (original, factor, expected throttled value)
    (20000, 0.0, 8192.0),
    (20000, 0.5, 10000.0),
    (20000, 0.25, 8192.0),
    (8192, 0.0, 8192.0),
    (8192, 0.5, 8192.0),
    (1000, 0.0, 1000.0),
    (1000, 0.5, 1000.0),
]
WHOLE_NUMBER_TYPES = pytest.mark.parametrize("kind", [int, float], ids=["int", "float"])


def floored(produce=None, excluded=(), floor=FLOOR) -> QuotaPolicy:
    return QuotaPolicy((P,), {P: produce}, frozenset(excluded), byte_rate_floor=floor)


def described(result: dict) -> list[str]:
    """What the enforcer logs and answers for a plan (once an AttributeError for an int)."""
    return sorted(Change(entity, key, value).describe() for (entity, key), value in result.items())


@WHOLE_NUMBER_TYPES
@pytest.mark.parametrize(("original", "factor", "expected"), AROUND_THE_FLOOR)
def test_the_floor_path_gives_floats_around_the_floor(kind, original, factor, expected):
    pol = floored(floor=kind(FLOOR))
    result = plan(pol, {(ALICE, P): kind(original), (DEFAULT, P): None}, factor)
    assert result[(ALICE, P)] == expected and type(result[(ALICE, P)]) is float
    assert f"user=alice producer_byte_rate = {int(expected)}" in described(result)


@WHOLE_NUMBER_TYPES
@pytest.mark.parametrize(("base", "factor", "expected"), AROUND_THE_FLOOR)
def test_the_configured_base_path_gives_floats_around_the_floor(kind, base, factor, expected):
    result = planned(floored(produce=kind(base)), {}, factor)
    assert result == {(DEFAULT, P): expected} and type(result[(DEFAULT, P)]) is float
    assert described(result) == [f"user=<default> producer_byte_rate = {int(expected)}"]


@WHOLE_NUMBER_TYPES
@pytest.mark.parametrize(("original", "factor", "expected"), AROUND_THE_FLOOR)
def test_the_exclusion_path_keeps_the_default_users_original_as_a_float(
    kind, original, factor, expected
):
    """The excluded user gets the default user's unthrottled value (and a counterpart of the
    default client-id entity), whatever side of the floor it is on."""
    snapshot = {DEFAULT: {P: kind(original)}, DEFAULT_ANY: {P: kind(original)}}
    result = planned(floored(excluded=["ops"]), snapshot, factor)
    assert result[(DEFAULT, P)] == expected
    assert result[(OPS, P)] == float(original) and result[(OPS_ANY, P)] == float(original)
    assert all(type(v) is float for v in result.values())
    assert described(result) == sorted(
        [
            f"user=<default> producer_byte_rate = {int(expected)}",
            f"user=<default>,client-id=<default> producer_byte_rate = {int(expected)}",
            f"user=ops producer_byte_rate = {original}",
            f"user=ops,client-id=<default> producer_byte_rate = {original}",
        ]
    )


@WHOLE_NUMBER_TYPES
@pytest.mark.parametrize("original", [20000, 8192, 1000])
def test_an_excluded_users_own_whole_number_quota_is_kept_as_a_float(kind, original):
    pol = floored(produce=kind(2000), excluded=["ops"])
    result = planned(pol, {OPS: {P: kind(original)}}, 0.0)
    assert result == {(DEFAULT, P): 2000.0, (OPS, P): float(original)}
    assert all(type(v) is float for v in result.values())
    assert changes(result, {OPS: {P: kind(original)}}) == [Change(DEFAULT, P, 2000.0)]


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (2000, "2000"),
        (2000.0, "2000"),
        (UNLIMITED, "9223372036854774784"),
        (2.0**63, repr(2.0**63)),
        (0.5, "0.5"),
        (2**63, repr(2.0**63)),
    ],
)
def test_a_change_describes_ints_and_floats_alike(value, text):
    assert Change(ALICE, P, value).describe() == f"user=alice producer_byte_rate = {text}"


@pytest.mark.parametrize(("minimum", "expected"), [(1, 1.0), (FLOOR, 1000.0), (8192.0, 1000.0)])
def test_scaled_gives_a_float_for_int_inputs(minimum, expected):
    value = scaled(1000, 0.0, P, minimum)
    assert value == expected and type(value) is float
