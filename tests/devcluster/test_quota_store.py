"""The devcluster's quota store against Kafka's KRaft semantics (ClientQuotaControlManager)."""

import pytest

from devcluster.quota_store import (
    INVALID_REQUEST,
    MATCH_DEFAULT,
    MATCH_EXACT,
    MATCH_SPECIFIED,
    MAX_RECORDS_PER_USER_OP,
    POLICY_VIOLATION,
    UNSUPPORTED_VERSION,
    Alteration,
    FilterComponent,
    Op,
    QuotaError,
    QuotaStore,
    entity_key,
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
        (
            ALICE_APP,
            [set_("producer_byte_rate", 1), set_("producer_byte_rate", 2)],
            # Kafka overwrites its "Duplicate quota key" result with this one.
            "Ignoring duplicate entity ClientQuotaEntity(entries={client-id=app, user=alice})",
        ),
        ((("user", ""), ("user", None)), [remove("bogus")], None),
    ],
)
def test_rejections_are_invalid_request_with_kafkas_message(entity, ops, message):
    store = QuotaStore()
    result = alter(store, entity, *ops)
    if message is None:  # the last name of a type wins: ("user", "") then ("user", None) is valid
        assert result.error_code == 0
    else:
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
    assert results[0].error_message == (
        "Ignoring duplicate entity ClientQuotaEntity(entries={user=alice})"
    )
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


# ---- values, as ClientQuotaControlManager.validateQuotaKeyValue decides them (all in double) ----
IP_1 = (("ip", "10.0.0.1"),)


@pytest.mark.parametrize(
    "entity, key, value",
    [
        (ALICE, "producer_byte_rate", 9223372036854775807),  # kafka-configs' "unlimited"
        (ALICE, "producer_byte_rate", 2.0**63),  # the same double
        (ALICE, "consumer_byte_rate", 1000.0000001),  # within the 1e-6 tolerance
        (ALICE, "request_percentage", float("inf")),  # double keys have no upper bound
        (ALICE, "controller_mutation_rate", 0.5),
        (IP_1, "connection_creation_rate", 2**31 - 1),
    ],
)
def test_values_kafka_accepts(entity, key, value):
    store = QuotaStore()
    assert alter(store, entity, set_(key, value)).error_code == 0
    assert everything(store) == {entity: {key: float(value)}}


@pytest.mark.parametrize(
    "entity, key, value, message",
    [
        (ALICE, "producer_byte_rate", 2.0**64, "too large for a LONG"),
        (ALICE, "producer_byte_rate", float("inf"), "too large for a LONG"),
        (ALICE, "consumer_byte_rate", 1000.00001, "cannot be a fractional value"),
        (ALICE, "request_percentage", -0.0, "must be greater than 0"),
        (ALICE, "request_percentage", float("-inf"), "must be greater than 0"),
        (IP_1, "connection_creation_rate", 2**31, "too large for an INT"),
    ],
)
def test_values_kafka_rejects(entity, key, value, message):
    store = QuotaStore()
    result = alter(store, entity, set_(key, value))
    assert result.error_code == INVALID_REQUEST and message in result.error_message


@pytest.mark.parametrize(
    "entity, key",
    [
        (ALICE, "producer_byte_rate"),
        (ALICE, "consumer_byte_rate"),
        (ALICE, "request_percentage"),
        (ALICE, "controller_mutation_rate"),
        (IP_1, "connection_creation_rate"),
    ],
)
def test_nan_passes_every_check_and_is_stored_for_every_key(entity, key):
    store = QuotaStore()
    assert alter(store, entity, set_(key, float("nan"))).error_code == 0
    [stored] = everything(store)[entity].values()
    assert stored != stored  # NaN
    # A NaN equals the stored NaN (Double.equals): no record, so it does not count in a batch.
    assert _records(store, [Alteration(entity, (set_(key, float("nan")),))]) == 0


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_imitating_kafka_4_4_every_non_finite_value_is_refused_and_a_stored_nan_stays(
    tmp_path, value
):
    path = tmp_path / "quotas.json"
    alter(QuotaStore(path), ALICE, set_("producer_byte_rate", float("nan")))  # under 4.1
    upgraded = QuotaStore(path, kafka_version=(4, 4, 0))
    for key in ("producer_byte_rate", "request_percentage"):
        refused = alter(upgraded, ALICE_APP, set_(key, value))
        assert (refused.error_code, refused.error_message) == (
            INVALID_REQUEST,
            f"Quota {key} must be a finite number",
        )
    assert ALICE_APP not in everything(upgraded)
    [kept] = everything(upgraded)[ALICE].values()
    assert kept != kept, "a NaN stored before the upgrade is still described"
    assert alter(upgraded, ALICE, set_("producer_byte_rate", 9.2e18)).error_code == 0


def test_nan_survives_a_restart(tmp_path):
    path = tmp_path / "quotas.json"
    alter(QuotaStore(path), ALICE, set_("producer_byte_rate", float("nan")))
    [value] = everything(QuotaStore(path))[ALICE].values()
    assert value != value


def test_removals_are_never_validated_but_the_entity_is():
    store = QuotaStore()
    assert alter(store, ALICE, remove("no_such_key")).error_code == 0
    assert alter(store, IP_1, remove("producer_byte_rate")).error_code == 0
    bad = alter(store, (("group", "g"),), remove("producer_byte_rate"))
    assert bad.error_code == INVALID_REQUEST


def test_an_entity_naming_a_type_twice_keeps_the_last_name():
    store = QuotaStore()
    result = alter(store, (("user", "bob"), ("user", "alice")), set_("producer_byte_rate", 5))
    assert result.error_code == 0 and result.entity == ALICE
    assert everything(store) == {ALICE: {"producer_byte_rate": 5.0}}
    # Read as a map, it is the same entity as a later entry naming alice once.
    results = store.alter(
        [
            Alteration((("user", "x"), ("user", "alice")), (set_("producer_byte_rate", 6),)),
            Alteration(ALICE, (set_("producer_byte_rate", 7),)),
        ]
    )
    assert [r.error_code for r in results] == [INVALID_REQUEST]
    assert everything(store) == {ALICE: {"producer_byte_rate": 6.0}}


# ---- the controller's bound on the records of one request ----------------------------------------
def users(n, start=0):
    return [(("user", f"u{i}"),) for i in range(start, start + n)]


def _records(store, alterations):
    """How many records a request would make: validate_only never changes the store."""
    return sum(len(store._check(entity_key(dict(a.entity)), a.ops)[1]) for a in alterations)


def test_ten_thousand_records_pass_and_one_more_fails_the_whole_request():
    store = QuotaStore()
    ok = [Alteration(e, (set_("producer_byte_rate", 1),)) for e in users(MAX_RECORDS_PER_USER_OP)]
    assert {r.error_code for r in store.alter(ok)} == {0}
    assert len(everything(store)) == MAX_RECORDS_PER_USER_OP
    too_many = [
        Alteration(e, (set_("producer_byte_rate", 2),)) for e in users(MAX_RECORDS_PER_USER_OP + 1)
    ]
    for validate_only in (True, False):
        results = store.alter(too_many, validate_only=validate_only)
        assert len(results) == len(too_many)
        assert {(r.error_code, r.error_message) for r in results} == {
            (POLICY_VIOLATION, "Request parameters do not satisfy the configured policy.")
        }
    assert {v["producer_byte_rate"] for v in everything(store).values()} == {1.0}


def test_the_bound_counts_records_not_entries():
    """Unchanged values, removals of unset keys and rejected entries make no record; a removal
    of a stored key and each changed key make one."""
    store = QuotaStore()
    half = MAX_RECORDS_PER_USER_OP // 2
    store.alter([Alteration(e, (set_("producer_byte_rate", 1),)) for e in users(half)])
    request = [
        # half unchanged values, half removals of stored keys: half records
        *(Alteration(e, (set_("producer_byte_rate", 1),)) for e in users(half // 2)),
        *(
            Alteration(e, (remove("producer_byte_rate"),))
            for e in users(half - half // 2, half // 2)
        ),
        # removals of unset keys and a rejected entry: none
        *(Alteration(e, (remove("consumer_byte_rate"),)) for e in users(100, half)),
        Alteration(ALICE, (set_("producer_byte_rate", 0),)),
        # two changed keys each: the rest of the bound
        *(
            Alteration(e, (set_("producer_byte_rate", 3), set_("consumer_byte_rate", 3)))
            for e in users((MAX_RECORDS_PER_USER_OP - half // 2) // 2, 2 * half)
        ),
    ]
    assert _records(store, request) == MAX_RECORDS_PER_USER_OP
    assert POLICY_VIOLATION not in {r.error_code for r in store.alter(request)}
    one_more = [*request, Alteration(APP, (set_("producer_byte_rate", 1),))]
    store2 = QuotaStore()
    store2.alter([Alteration(e, (set_("producer_byte_rate", 1),)) for e in users(half)])
    assert {r.error_code for r in store2.alter(one_more)} == {POLICY_VIOLATION}


def test_a_failed_batch_answers_each_entry_with_its_entity_as_sent():
    store = QuotaStore()
    sent = (("user", "a"), ("user", "b"))
    request = [Alteration(sent, (set_("producer_byte_rate", 1),))] + [
        Alteration(e, (set_("producer_byte_rate", 1),)) for e in users(MAX_RECORDS_PER_USER_OP)
    ]
    results = store.alter(request)
    assert len(results) == MAX_RECORDS_PER_USER_OP + 1
    assert results[0].entity == sent and results[0].error_code == POLICY_VIOLATION
    assert everything(store) == {}


def test_a_lagging_view_undoes_the_changes_it_has_not_seen():
    store = QuotaStore()
    alter(store, ALICE, set_("producer_byte_rate", 100))
    alter(store, APP, set_("producer_byte_rate", 5))
    store._history = type(store._history)(
        (when - 60, *rest) for when, *rest in store._history
    )  # both changes a minute old
    alter(store, ALICE, set_("producer_byte_rate", 50), set_("consumer_byte_rate", 9))
    alter(store, APP, remove("producer_byte_rate"))
    alter(store, DEFAULT_USER, set_("request_percentage", 10))
    lagging = {e: v for e, v in store.describe([], lag_s=30)}
    assert lagging == {ALICE: {"producer_byte_rate": 100.0}, APP: {"producer_byte_rate": 5.0}}
    assert everything(store) == {
        ALICE: {"producer_byte_rate": 50.0, "consumer_byte_rate": 9.0},
        DEFAULT_USER: {"request_percentage": 10.0},
    }
    assert {e: v for e, v in store.describe([], lag_s=120)} == {}


# ---- Kafka's ClientQuotaControlManagerTest, ported ----------------------------------------------
@pytest.mark.parametrize(
    "entity",
    [
        (("user", "user-1"), ("foo", "bar")),  # valid + unknown combo
        (("foo", "bar"), ("ip", "1.2.3.4")),
        (("user", "user-1"), ("ip", "1.2.3.4")),  # invalid combinations
        (("client-id", "user-1"), ("ip", "1.2.3.4")),
        (),  # empty
        (("null", "null"),),
    ],
)
def test_invalid_entities_make_no_record(entity):
    store = QuotaStore()
    alteration = Alteration(entity, (set_("producer_byte_rate", 10000.0),))
    [result] = store.alter([alteration])
    assert result.error_code == INVALID_REQUEST and everything(store) == {}


@pytest.mark.parametrize(
    "ops",
    [
        (set_("not.a.quota.key", 0.0), set_("request_percentage", 99.9)),
        (set_("request_percentage", 99.9), set_("not.a.quota.key", 0.0)),
    ],
)
def test_an_invalid_key_next_to_a_valid_one_makes_no_record(ops):
    store = QuotaStore()
    assert alter(store, (("user", "user-1"),), *ops).error_code == INVALID_REQUEST
    assert everything(store) == {}


def test_alter_and_remove_as_kafkas_test_does():
    store = QuotaStore()
    user = (("user", "user-1"),)
    steps = [
        ([set_("producer_byte_rate", 10000.0)], {"producer_byte_rate": 10000.0}),
        (
            [set_("producer_byte_rate", 10001.0), set_("consumer_byte_rate", 20000.0)],
            {"producer_byte_rate": 10001.0, "consumer_byte_rate": 20000.0},
        ),
        ([remove("producer_byte_rate")], {"consumer_byte_rate": 20000.0}),
        ([remove("request_percentage")], {"consumer_byte_rate": 20000.0}),
        ([remove("consumer_byte_rate")], None),  # all quotas removed: the entity is gone
        ([remove("consumer_byte_rate")], None),
        (
            [
                set_("request_percentage", 99.0),
                remove("controller_mutation_rate"),
                set_("producer_byte_rate", 10002.0),
                set_("consumer_byte_rate", 20001.0),
            ],
            {
                "request_percentage": 99.0,
                "producer_byte_rate": 10002.0,
                "consumer_byte_rate": 20001.0,
            },
        ),
    ]
    for ops, expected in steps:
        assert alter(store, user, *ops).error_code == 0
        assert everything(store).get(user) == expected
