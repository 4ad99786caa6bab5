"""The devcluster's quota store against Kafka's KRaft semantics (ClientQuotaControlManager)."""

import pytest

from devcluster.quota_store import (
    INVALID_REQUEST,
    MATCH_DEFAULT,
    MATCH_EXACT,
    MATCH_SPECIFIED,
    UNSUPPORTED_VERSION,
    Alteration,
    FilterComponent,
    Op,
    QuotaError,
    QuotaStore,
)

ALICE = (("user", "alice"),)
ALICE_APP = (("user", "alice"), ("client-id", "app"))
DEFAULT_USER = (("user", None),)
APP = (("client-id", "app"),)
DEFAULT_CLIENT = (("client-id", None),)


def alter(store, entity, *ops, validate_only=False):
    [result] = store.alter([Alteration(entity, tuple(ops))], validate_only=validate_only)
    return result


def set_(key, value):
    return Op(key, value)


def remove(key):
    return Op(key, 0.0, remove=True)


def everything(store):
    return {e: v for e, v in store.describe([])}


def test_set_describe_and_remove_down_to_nothing():
    store = QuotaStore()
    assert alter(store, ALICE, set_("producer_byte_rate", 1024), set_("request_percentage", 12.5))
    assert everything(store) == {ALICE: {"producer_byte_rate": 1024.0, "request_percentage": 12.5}}
    assert alter(store, ALICE, remove("request_percentage")).error_code == 0
    assert everything(store) == {ALICE: {"producer_byte_rate": 1024.0}}
    # Removing a key that is not set is a no-op, not an error.
    assert alter(store, ALICE, remove("consumer_byte_rate")).error_code == 0
    assert alter(store, ALICE, remove("producer_byte_rate")).error_code == 0
    assert everything(store) == {}


def test_default_entities_are_null_names_and_distinct_from_named_ones():
    store = QuotaStore()
    alter(store, DEFAULT_USER, set_("producer_byte_rate", 100))
    alter(store, ALICE, set_("producer_byte_rate", 200))
    alter(store, (("user", None), ("client-id", None)), set_("producer_byte_rate", 300))
    assert everything(store) == {
        DEFAULT_USER: {"producer_byte_rate": 100.0},
        ALICE: {"producer_byte_rate": 200.0},
        (("user", None), ("client-id", None)): {"producer_byte_rate": 300.0},
    }


def test_entity_order_in_the_request_does_not_matter():
    store = QuotaStore()
    alter(store, (("client-id", "app"), ("user", "alice")), set_("producer_byte_rate", 5))
    alter(store, ALICE_APP, set_("consumer_byte_rate", 6))
    assert everything(store) == {ALICE_APP: {"producer_byte_rate": 5.0, "consumer_byte_rate": 6.0}}


def test_validate_only_reports_but_stores_nothing():
    store = QuotaStore()
    ok = alter(store, ALICE, set_("producer_byte_rate", 1), validate_only=True)
    bad = alter(store, ALICE, set_("producer_byte_rate", 0), validate_only=True)
    assert (ok.error_code, bad.error_code) == (0, INVALID_REQUEST)
    assert everything(store) == {}


@pytest.mark.parametrize(
    "entity, ops, message",
    [
        (ALICE, [set_("producer_byte_rate", 0)], "Quota producer_byte_rate must be greater than 0"),
        (ALICE, [set_("producer_byte_rate", -5)], "must be greater than 0"),
        (ALICE, [set_("request_percentage", 0.0)], "must be greater than 0"),
        (ALICE, [set_("producer_byte_rate", 10.5)], "producer_byte_rate cannot be a fractional"),
        (ALICE, [set_("producer_byte_rate", 2.0**64)], "too large for a LONG"),
        (ALICE, [set_("no_such_quota", 1)], "Invalid configuration key no_such_quota"),
        (ALICE, [set_("connection_creation_rate", 1)], "Invalid configuration key"),
        ((("ip", "10.0.0.1"),), [set_("producer_byte_rate", 1)], "Invalid configuration key"),
        (
            (("ip", "10.0.0.1"),),
            [set_("connection_creation_rate", 2.0**40)],
            "too large for an INT",
        ),
        ((("ip", "not-an-ip"),), [set_("connection_creation_rate", 1)], "not a valid IP"),
        ((("ip", "10.0.0.1"), ("user", "a")), [set_("producer_byte_rate", 1)], "IP entity"),
        ((), [set_("producer_byte_rate", 1)], "Invalid empty client quota entity"),
        ((("group", "g"),), [set_("producer_byte_rate", 1)], "Unhandled client quota entity type"),
        ((("user", ""),), [set_("producer_byte_rate", 1)], "Empty user not supported"),
        ((("user", "a"), ("user", "b")), [set_("producer_byte_rate", 1)], "duplicate entity"),
        (ALICE, [set_("producer_byte_rate", 1), set_("producer_byte_rate", 2)], "Duplicate quota"),
    ],
)
def test_rejections_are_invalid_request_with_kafkas_message(entity, ops, message):
    store = QuotaStore()
    result = alter(store, entity, *ops)
    assert result.error_code == INVALID_REQUEST
    assert message in result.error_message
    assert everything(store) == {}


def test_an_invalid_entry_changes_nothing_of_its_entity_but_others_apply():
    store = QuotaStore()
    results = store.alter(
        [
            Alteration(ALICE, (set_("producer_byte_rate", 7), set_("consumer_byte_rate", 0))),
            Alteration(APP, (set_("producer_byte_rate", 9),)),
        ]
    )
    assert [r.error_code for r in results] == [INVALID_REQUEST, 0]
    assert everything(store) == {APP: {"producer_byte_rate": 9.0}}


def test_the_same_entity_twice_in_one_request_applies_once():
    store = QuotaStore()
    results = store.alter(
        [
            Alteration(ALICE, (set_("producer_byte_rate", 1),)),
            Alteration(ALICE, (set_("producer_byte_rate", 2),)),
        ]
    )
    assert len(results) == 1 and results[0].error_code == INVALID_REQUEST
    assert "Ignoring duplicate entity user=alice" in results[0].error_message
    assert everything(store) == {ALICE: {"producer_byte_rate": 1.0}}


def test_ip_quotas_for_an_address_and_the_default_ip():
    store = QuotaStore()
    assert (
        alter(store, (("ip", "127.0.0.1"),), set_("connection_creation_rate", 10)).error_code == 0
    )
    assert alter(store, (("ip", None),), set_("connection_creation_rate", 5)).error_code == 0
    assert len(everything(store)) == 2


@pytest.fixture
def populated():
    store = QuotaStore()
    for entity in [
        ALICE,
        ALICE_APP,
        DEFAULT_USER,
        APP,
        DEFAULT_CLIENT,
        (("user", None), ("client-id", None)),
    ]:
        alter(store, entity, set_("producer_byte_rate", 1000))
    return store


def matching(store, *components, strict=False):
    return [e for e, _ in store.describe([FilterComponent(*c) for c in components], strict)]


def test_filter_exact_name_non_strict_includes_wider_entities(populated):
    assert matching(populated, ("user", MATCH_EXACT, "alice")) == [ALICE, ALICE_APP]


def test_filter_exact_name_strict_is_only_that_entity(populated):
    assert matching(populated, ("user", MATCH_EXACT, "alice"), strict=True) == [ALICE]


def test_filter_default_name(populated):
    assert matching(populated, ("user", MATCH_DEFAULT, None), strict=True) == [DEFAULT_USER]
    assert matching(populated, ("client-id", MATCH_DEFAULT, None)) == [
        (("user", None), ("client-id", None)),
        DEFAULT_CLIENT,
    ]


def test_filter_specified_matches_any_entity_with_the_type_default_included(populated):
    # KRaft's ClientQuotaControlManager: a "specified" component only requires the type.
    assert matching(populated, ("client-id", MATCH_SPECIFIED, None), strict=True) == [
        DEFAULT_CLIENT,
        APP,
    ]
    assert matching(
        populated, ("user", MATCH_SPECIFIED, None), ("client-id", MATCH_SPECIFIED, None)
    ) == [(("user", None), ("client-id", None)), ALICE_APP]


def test_empty_filter_lists_everything_and_empty_strict_filter_nothing(populated):
    assert len(matching(populated)) == 6
    assert matching(populated, strict=True) == []


@pytest.mark.parametrize(
    "components, code, message",
    [
        ([("", MATCH_EXACT, "x")], INVALID_REQUEST, "Invalid empty entity type"),
        ([("user", MATCH_EXACT, "a"), ("user", MATCH_DEFAULT, None)], INVALID_REQUEST, "more than"),
        ([("group", MATCH_EXACT, "g")], UNSUPPORTED_VERSION, "Unsupported entity type group"),
        ([("user", MATCH_EXACT, None)], INVALID_REQUEST, "MATCH_TYPE_EXACT"),
        ([("user", MATCH_DEFAULT, "a")], INVALID_REQUEST, "MATCH_TYPE_DEFAULT"),
        ([("user", MATCH_SPECIFIED, "a")], INVALID_REQUEST, "MATCH_TYPE_SPECIFIED"),
        ([("user", 7, None)], INVALID_REQUEST, "match type"),
        ([("ip", MATCH_SPECIFIED, None), ("user", MATCH_SPECIFIED, None)], INVALID_REQUEST, "IP"),
    ],
)
def test_bad_filters_fail_the_whole_request(populated, components, code, message):
    with pytest.raises(QuotaError) as err:
        matching(populated, *components)
    assert err.value.code == code and message in err.value.message


def test_quotas_survive_a_restart_through_the_data_dir(tmp_path):
    path = tmp_path / "quotas.json"
    store = QuotaStore(path)
    alter(store, ALICE_APP, set_("producer_byte_rate", 2048))
    alter(store, DEFAULT_USER, set_("request_percentage", 50.5))
    assert everything(QuotaStore(path)) == everything(store)
    alter(store, ALICE_APP, remove("producer_byte_rate"))
    assert everything(QuotaStore(path)) == {DEFAULT_USER: {"request_percentage": 50.5}}
