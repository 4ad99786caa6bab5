"""Apache Kafka's own ClientQuotasRequestTest (core/src/test/.../ClientQuotasRequestTest.scala),
ported case by case, plus the controller's rules (ClientQuotaControlManager, QuorumController) a
client can observe: the 10,000-record bound, NaN and 2^63 values, an entity naming a type twice.
Each case runs on devcluster and on real Kafka (the `backend` parameter) over the wire with
kafka-python; Kafka's cluster is shared by the run, so a case sees the quotas other tests left
(`quota_baseline`, normally none) and puts back what it changed."""

import math

import pytest

from devcluster.kafka_version import FINITE_QUOTAS
from devcluster.quota_store import java_hash_map_order, java_order
from tests.differential.backends import (
    Quotas,
    alter,
    alter_many,
    describe,
    describe_raw,
    eventually,
    same_quotas,
)

pytestmark = pytest.mark.integration

EXACT, DEFAULT, SPECIFIED = 0, 1, 2
UNSUPPORTED_VERSION, INVALID_REQUEST, POLICY_VIOLATION = 35, 42, 44
PRODUCER, CONSUMER, REQUEST_PCT = "producer_byte_rate", "consumer_byte_rate", "request_percentage"
CONNECTIONS = "connection_creation_rate"


def described(admin, baseline: Quotas, components=(), strict=False) -> Quotas:
    """What a describe answers, less the entities other tests had set before this one."""
    found = describe(admin, components, strict)
    return {e: v for e, v in found.items() if e not in baseline}


def settled(admin, baseline: Quotas, expected: Quotas, components=(), strict=False) -> Quotas:
    """The describe's answer once it shows `expected` (a broker applies a commit a moment
    after the controller made it), or the last answer after SETTLE_S."""
    return eventually(
        lambda: described(admin, baseline, components, strict),
        lambda found: same_quotas(found, expected),
    )


def entity_quotas(admin, pairs):
    """verifyDescribeEntityQuotas: the exact, strict match of one entity."""
    components = [(t, EXACT if n is not None else DEFAULT, n) for t, n in pairs]
    found = describe(admin, components, strict=True)
    assert len(found) <= 1
    return found.get(frozenset(pairs), {})


def entity_settled(admin, pairs, expected):
    """entity_quotas once it shows `expected` (Kafka's test retries the same way)."""
    return eventually(lambda: entity_quotas(admin, pairs), lambda found: found == expected)


USER_CLIENT = (("user", "user"), ("client-id", "client-id"))


def test_alter_client_quotas_request(admin):
    assert entity_quotas(admin, USER_CLIENT) == {}
    steps = [
        ({PRODUCER: 10000.0, CONSUMER: 20000.0}, {PRODUCER: 10000.0, CONSUMER: 20000.0}),
        ({PRODUCER: 15000.0}, {PRODUCER: 15000.0, CONSUMER: 20000.0}),
        ({PRODUCER: None}, {CONSUMER: 20000.0}),
        ({REQUEST_PCT: None}, {CONSUMER: 20000.0}),  # removing an unset key changes nothing
        ({PRODUCER: 5000.0}, {PRODUCER: 5000.0, CONSUMER: 20000.0}),
        (
            {PRODUCER: 20000.0, CONSUMER: None, REQUEST_PCT: 12.3},
            {PRODUCER: 20000.0, REQUEST_PCT: 12.3},
        ),
    ]
    for changes, expected in steps:
        assert alter(admin, USER_CLIENT, changes) == (0, None)
        assert entity_settled(admin, USER_CLIENT, expected) == expected


def test_alter_client_quotas_request_validate_only(admin):
    user = (("user", "user"),)
    assert alter(admin, user, {PRODUCER: 20000.0, REQUEST_PCT: 23.45}) == (0, None)
    original = {PRODUCER: 20000.0, REQUEST_PCT: 23.45}
    assert entity_settled(admin, user, original) == original
    for changes in [
        {CONSUMER: 50000.0},
        {PRODUCER: 10000.0},
        {REQUEST_PCT: None},
        {PRODUCER: 10000.0, CONSUMER: 50000.0, REQUEST_PCT: None},
    ]:
        assert alter(admin, user, changes, validate_only=True) == (0, None)
        assert entity_quotas(admin, user) == original


def test_alter_ip_quotas_request(admin, quota_baseline):
    ip, default_ip = (("ip", "1.2.3.4"),), (("ip", None),)
    all_ips = [("ip", SPECIFIED, None)]
    assert described(admin, quota_baseline, all_ips, strict=True) == {}
    assert alter(admin, ip, {CONNECTIONS: 100.0}) == (0, None)
    assert entity_settled(admin, ip, {CONNECTIONS: 100.0}) == {CONNECTIONS: 100.0}
    assert alter(admin, ip, {CONNECTIONS: 150.0}) == (0, None)
    assert entity_settled(admin, ip, {CONNECTIONS: 150.0}) == {CONNECTIONS: 150.0}
    assert alter(admin, default_ip, {CONNECTIONS: 200.0}) == (0, None)
    assert entity_settled(admin, default_ip, {CONNECTIONS: 200.0}) == {CONNECTIONS: 200.0}
    both = {frozenset(ip): {CONNECTIONS: 150.0}, frozenset(default_ip): {CONNECTIONS: 200.0}}
    assert settled(admin, quota_baseline, both, all_ips, strict=True) == both
    assert alter(admin, ip, {CONNECTIONS: None}) == (0, None)
    assert entity_settled(admin, ip, {}) == {}
    assert alter(admin, default_ip, {CONNECTIONS: None}) == (0, None)
    assert settled(admin, quota_baseline, {}, all_ips, strict=True) == {}


@pytest.mark.parametrize(
    "pairs, changes, message",
    [
        ((("user", ""),), {REQUEST_PCT: 12.34}, "Empty user not supported"),
        ((("client-id", ""),), {REQUEST_PCT: 12.34}, "Empty client-id not supported"),
        ((("", "name"),), {REQUEST_PCT: 12.34}, "Unhandled client quota entity type: "),
        ((), {PRODUCER: 10000.5}, "Invalid empty client quota entity"),
        ((("user", "user"),), {"bad": 1.0}, "Invalid configuration key bad"),
        ((("user", "user"),), {PRODUCER: 10000.5}, "producer_byte_rate cannot be a fractional"),
        # testAlterClientQuotasInvalidEntityCombination
        ((("user", "user"), ("ip", "1.2.3.4")), {REQUEST_PCT: 12.34}, "Invalid quota entity "),
        ((("client-id", "c"), ("ip", "1.2.3.4")), {REQUEST_PCT: 12.34}, "Invalid quota entity "),
        # testAlterClientQuotasBadIp
        (
            (("ip", "not a valid host because it has spaces"),),
            {CONNECTIONS: 50.0},
            "not a valid IP",
        ),
        ((("ip", "RFC2606.invalid"),), {CONNECTIONS: 50.0}, "not a valid IP"),
    ],
)
def test_alter_client_quotas_invalid_requests(admin, pairs, changes, message):
    code, text = alter(admin, pairs, changes, validate_only=True)
    assert code == INVALID_REQUEST and message in text, text


@pytest.mark.parametrize("other", ["user", "client-id"])
def test_describe_client_quotas_invalid_filter_combination(admin, other):
    response = describe_raw(admin, [("ip", SPECIFIED, None), (other, SPECIFIED, None)], False)
    assert response.error_code == INVALID_REQUEST
    assert "Invalid entity filter component combination" in response.error_message


def client_entity(user, client_id):
    """Kafka's toClientEntity: ``...`` means the type is absent, None the default entity."""
    return tuple((t, n) for t, n in (("user", user), ("client-id", client_id)) if n is not ...)


MATCH_USER_CLIENT = [
    (client_entity(u, c), v)
    for u, c, v in [
        ("user-1", "client-id-1", 50.50),
        ("user-2", "client-id-1", 51.51),
        ("user-3", "client-id-2", 52.52),
        (None, "client-id-1", 53.53),
        ("user-1", None, 54.54),
        ("user-3", None, 55.55),
        ("user-1", ..., 56.56),
        ("user-2", ..., 57.57),
        ("user-3", ..., 58.58),
        (None, ..., 59.59),
        (..., "client-id-2", 60.60),
    ]
]
MATCH_IP = [((("ip", "1.2.3.4"),), 10.0), ((("ip", "2.3.4.5"),), 20.0)]


@pytest.fixture
def match_setup(admin, quota_baseline):
    request = [(e, {REQUEST_PCT: v}) for e, v in MATCH_USER_CLIENT]
    request += [(e, {CONNECTIONS: v}) for e, v in MATCH_IP]
    assert {code for code, _, _ in alter_many(admin, request)} == {0}
    everything = {frozenset(e): {REQUEST_PCT: v} for e, v in MATCH_USER_CLIENT}
    everything.update({frozenset(e): {CONNECTIONS: v} for e, v in MATCH_IP})
    assert same_quotas(settled(admin, quota_baseline, everything), everything)


def test_describe_client_quotas_match_exact(admin, match_setup):
    for pairs, value in MATCH_USER_CLIENT:
        assert entity_quotas(admin, pairs) == {REQUEST_PCT: value}
    for u, c in [
        ("user-1", "client-id-2"),
        ("user-3", "client-id-1"),
        ("user-2", None),
        ("user-4", ...),
        (None, "client-id-2"),
        (..., "client-id-1"),
        (..., "client-id-3"),
    ]:
        assert entity_quotas(admin, client_entity(u, c)) == {}


@pytest.mark.parametrize(
    "components, strict, size, expected",
    [
        ([("user", EXACT, "user-1")], False, 3, lambda e: e.get("user", ...) == "user-1"),
        ([("user", EXACT, "unknown")], False, 0, lambda e: False),
        (
            [("client-id", EXACT, "client-id-2")],
            False,
            2,
            lambda e: e.get("client-id") == "client-id-2",
        ),
        ([("user", DEFAULT, None)], False, 2, lambda e: "user" in e and e["user"] is None),
        ([("user", EXACT, "user-2")], True, 1, lambda e: e.get("user") == "user-2" and len(e) == 1),
        ([("client-id", EXACT, "client-id-1")], True, 0, lambda e: False),
        ([("user", SPECIFIED, None)], True, 4, lambda e: "user" in e and "client-id" not in e),
        ([("user", SPECIFIED, None)], False, 10, lambda e: "user" in e),
        ([("client-id", SPECIFIED, None)], True, 1, lambda e: "client-id" in e and "user" not in e),
        ([("client-id", SPECIFIED, None)], False, 7, lambda e: "client-id" in e),
        ([("ip", SPECIFIED, None)], False, 2, lambda e: "ip" in e),
        ([], False, 13, lambda e: True),
        ([], True, 0, lambda e: False),
    ],
)
def test_describe_client_quotas_match_partial(
    admin, quota_baseline, match_setup, components, strict, size, expected
):
    everything = dict(MATCH_USER_CLIENT + MATCH_IP)
    wanted = {frozenset(e): v for e, v in everything.items() if expected(dict(e))}
    assert len(wanted) == size  # Kafka's count, checking the predicate
    found = described(admin, quota_baseline, components, strict)
    assert {e: next(iter(v.values())) for e, v in found.items()} == wanted


def test_client_quotas_unsupported_entity_types(admin):
    response = describe_raw(admin, [("other", EXACT, "name")], True)
    assert response.error_code == UNSUPPORTED_VERSION


@pytest.mark.parametrize("pairs", [(("user", "user with spaces"),), (("client-id", "<default>"),)])
def test_client_quotas_sanitized_and_with_default_name(admin, quota_baseline, pairs):
    assert alter(admin, pairs, {PRODUCER: 20000.0}) == (0, None)
    assert entity_settled(admin, pairs, {PRODUCER: 20000.0}) == {PRODUCER: 20000.0}
    # A client id literally named "<default>" is not the default entity.
    assert described(admin, quota_baseline, [("client-id", DEFAULT, None)], strict=True) == {}


# ---- the controller's rules beyond ClientQuotasRequestTest -------------------------------------
def test_ten_thousand_records_pass_one_more_fails_every_entry_and_applies_nothing(
    admin, quota_baseline
):
    users = [(("user", f"u{i}"),) for i in range(10_001)]
    results = alter_many(admin, [(e, {PRODUCER: 1.0}) for e in users], validate_only=True)
    assert {(code, message) for code, message, _ in results} == {
        (POLICY_VIOLATION, "Request parameters do not satisfy the configured policy.")
    }
    assert len(results) == 10_001
    assert {code for code, _, _ in alter_many(admin, [(e, {PRODUCER: 1.0}) for e in users])} == {
        POLICY_VIOLATION
    }
    assert described(admin, quota_baseline) == {}
    assert {
        code for code, _, _ in alter_many(admin, [(e, {PRODUCER: 1.0}) for e in users[1:]])
    } == {0}
    stored = {frozenset(e): {PRODUCER: 1.0} for e in users[1:]}
    assert len(settled(admin, quota_baseline, stored)) == 10_000


def test_nan_and_long_max_are_stored_and_described_until_4_4_refuses_non_finite(backend, admin):
    """Up to Kafka 4.3 every comparison is in double: NaN passes them all and is stored for any
    key, +inf for the double keys; 4.4 checks `Double.isFinite` first and refuses both (and -inf,
    until then "must be greater than 0"). 2^63 - 1 is 2^63 as a double: not "too large"."""
    alice = (("user", "alice"),)
    long_max = {CONSUMER: 9223372036854775807.0}
    non_finite = {PRODUCER: math.nan, REQUEST_PCT: math.inf}
    if backend.kafka_version >= FINITE_QUOTAS:
        for key, value in [*non_finite.items(), (CONSUMER, -math.inf)]:
            refused = (INVALID_REQUEST, f"Quota {key} must be a finite number")
            assert alter(admin, alice, {key: value}) == refused
        assert alter(admin, alice, long_max) == (0, None)
        found = eventually(lambda: entity_quotas(admin, alice), lambda found: len(found) == 1)
        assert found == {CONSUMER: 2.0**63}
        return
    negative = (INVALID_REQUEST, f"Quota {CONSUMER} must be greater than 0")
    assert alter(admin, alice, {CONSUMER: -math.inf}) == negative
    assert alter(admin, alice, {**non_finite, **long_max}) == (0, None)
    found = eventually(lambda: entity_quotas(admin, alice), lambda found: len(found) == 3)
    assert math.isnan(found[PRODUCER]) and found[REQUEST_PCT] == math.inf
    assert found[CONSUMER] == 2.0**63


def test_an_entity_naming_a_type_twice_is_its_last_name(admin, quota_baseline):
    [(code, _, answered)] = alter_many(
        admin, [((("user", "bob"), ("user", "alice")), {PRODUCER: 5.0})]
    )
    assert code == 0 and answered == (("user", "alice"),)
    alice = {frozenset({("user", "alice")}): {PRODUCER: 5.0}}
    assert settled(admin, quota_baseline, alice) == alice


def test_response_entities_are_in_kafkas_map_order(admin):
    [(_, _, answered)] = alter_many(admin, [((("user", "u"), ("client-id", "c")), {PRODUCER: 5.0})])
    assert answered == (("client-id", "c"), ("user", "u"))


@pytest.mark.parametrize(
    "pairs, changes, message",
    [
        ((("user", "bob"),), {PRODUCER: 0.0}, "Quota producer_byte_rate must be greater than 0"),
        ((("user", "bob"),), {PRODUCER: -1.0}, "Quota producer_byte_rate must be greater than 0"),
        ((("user", "bob"),), {PRODUCER: 1.5}, "producer_byte_rate cannot be a fractional value."),
        (
            (("user", "bob"),),
            {CONSUMER: 1e19},
            "Proposed value for consumer_byte_rate is too large for a LONG.",
        ),
        (
            (("ip", "10.0.0.1"),),
            {CONNECTIONS: 3e9},
            "Proposed value for connection_creation_rate is too large for an INT.",
        ),
        (
            (("user", "bob"),),
            {"bytes_per_fortnight": 5.0},
            "Invalid configuration key bytes_per_fortnight",
        ),
        ((("ip", "10.0.0.1"),), {PRODUCER: 5.0}, "Invalid configuration key producer_byte_rate"),
        ((("group", "g"),), {PRODUCER: 5.0}, "Unhandled client quota entity type: group"),
    ],
)
def test_bad_values_and_keys_are_invalid_request_with_kafka_s_message(
    admin, quota_baseline, pairs, changes, message
):
    for validate_only in (True, False):
        assert alter(admin, pairs, changes, validate_only) == (INVALID_REQUEST, message)
    assert described(admin, quota_baseline) == {}


def test_a_bad_entry_does_not_stop_the_good_ones(admin, quota_baseline):
    good = ((("ip", None),), {CONNECTIONS: 30.0})
    bad = ((("user", "eve"),), {CONSUMER: 0.0})
    answered = {pairs: code for code, _, pairs in alter_many(admin, [bad, good])}
    assert answered == {bad[0]: INVALID_REQUEST, good[0]: 0}
    stored = {frozenset(good[0]): {CONNECTIONS: 30.0}}
    assert settled(admin, quota_baseline, stored) == stored


def test_a_filter_naming_no_user_for_an_exact_match_is_a_top_level_error(admin):
    response = describe_raw(admin, [("user", EXACT, None)], strict=False)
    assert response.error_code == INVALID_REQUEST and response.entries is None


def test_answers_come_in_the_order_of_kafka_s_result_hash_map(admin):
    """The controller collects one result per entity in a java.util.HashMap and answers in its
    iteration order, not the request's (AlterClientQuotasResponse.fromQuotaEntities)."""
    request = [((("user", f"order-{i}"),), {PRODUCER: 1000.0 + i}) for i in range(40)]
    request += [((("user", "order-bad"), ("client-id", "c")), {PRODUCER: 0.0})]
    answered = [pairs for _, _, pairs in alter_many(admin, request, validate_only=True)]
    expected = [java_order(e) for e in java_hash_map_order([pairs for pairs, _ in request])]
    assert answered == expected
    assert answered != [java_order(pairs) for pairs, _ in request]  # not the request's order
