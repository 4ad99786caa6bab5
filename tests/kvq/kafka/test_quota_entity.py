"""Quota entities and Kafka's KIP-55 precedence."""

import pytest

from kvq.kafka.quota_entity import QuotaEntity, parse_principal


def E(**parts):  # noqa: N802 - reads like a constructor
    return QuotaEntity.of({k.replace("_", "-"): v for k, v in parts.items()})


def test_precedence_follows_kip55_from_most_to_least_specific():
    ordered = [
        E(user="u", client_id="c"),
        E(user="u", client_id=None),
        E(user="u"),
        E(user=None, client_id="c"),
        E(user=None, client_id=None),
        E(user=None),
        E(client_id="c"),
        E(client_id=None),
    ]
    assert [e.precedence for e in ordered] == [1, 2, 3, 4, 5, 6, 7, 8]


def test_component_order_does_not_matter_and_labels_match_kafka():
    a = QuotaEntity.of([("client-id", None), ("user", "alice")])
    b = QuotaEntity.of([("user", "alice"), ("client-id", None)])
    assert a == b and hash(a) == hash(b)
    assert a.label() == "user=alice,client-id=<default>"


def test_json_round_trip_keeps_defaults_and_commas():
    entity = E(user="CN=a,O=b", client_id=None)
    assert QuotaEntity.from_json(entity.to_json()) == entity


def test_ip_entities_are_not_user_or_client_entities():
    assert not QuotaEntity.of([("ip", "10.0.0.1")]).is_user_or_client


def test_principal_names_become_user_entity_names():
    assert parse_principal("User:CN=a,O=b") == "CN=a,O=b"
    with pytest.raises(ValueError, match="User:<name>"):
        parse_principal("Group:x")


def test_repeated_types_are_refused():
    with pytest.raises(ValueError, match="repeats a type"):
        QuotaEntity.of([("user", "a"), ("user", "b")])
