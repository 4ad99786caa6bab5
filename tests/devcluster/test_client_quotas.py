"""DescribeClientQuotas / AlterClientQuotas through kafka-python: quotas are cluster-wide (any
broker describes what another stored), the control API's view, request counts. Kafka's own cases,
validation and messages run on devcluster and on real Kafka in tests/differential."""

import pytest
from kafka.protocol.admin import AlterClientQuotasRequest, DescribeClientQuotasRequest

from devcluster.control_client import ControlClient
from devcluster.quota_store import entity_key
from devkit.devcluster_wire import admin_send

pytestmark = pytest.mark.integration

Entry = AlterClientQuotasRequest.EntryData
Component = DescribeClientQuotasRequest.ComponentData
EXACT, DEFAULT, SPECIFIED = 0, 1, 2
INVALID_REQUEST = 42


@pytest.fixture
def dc(devcluster):
    return devcluster(brokers=3, log_dirs_per_broker=1)


def entity(**names):
    return [
        Entry.EntityData(entity_type=t.replace("_", "-"), entity_name=n) for t, n in names.items()
    ]


def op(key, value=None):
    if value is None:
        return Entry.OpData(key=key, value=0.0, remove=True)
    return Entry.OpData(key=key, value=value, remove=False)


def alter(admin, entries, validate_only=False, node_id=None, version=1):
    request = AlterClientQuotasRequest(
        version=version, entries=entries, validate_only=validate_only
    )
    resp = admin_send(admin, request, node_id)
    return [(e.error_code, e.error_message) for e in resp.entries]


def describe(admin, *components, strict=False, node_id=None, version=1):
    request = DescribeClientQuotasRequest(
        version=version,
        components=[Component(entity_type=t, match_type=m, match=v) for t, m, v in components],
        strict=strict,
    )
    resp = admin_send(admin, request, node_id)
    assert resp.error_code == 0, resp.error_message
    return {
        entity_key([(e.entity_type, e.entity_name) for e in entry.entity]): {
            v.key: v.value for v in entry.values
        }
        for entry in resp.entries
    }


@pytest.mark.parametrize("version", [0, 1])
def test_round_trip_with_defaults_and_removal(dc, admin, version):
    entries = [
        Entry(entity=entity(user="alice"), ops=[op("producer_byte_rate", 1048576.0)]),
        Entry(entity=entity(user=None), ops=[op("producer_byte_rate", 500000.0)]),
        Entry(
            entity=entity(user="alice", client_id=None),
            ops=[op("consumer_byte_rate", 2048.0), op("request_percentage", 25.5)],
        ),
    ]
    assert alter(admin, entries, node_id=0, version=version) == [(0, None)] * 3
    # Quotas are cluster-wide: any broker describes what another one stored.
    assert describe(admin, node_id=2, version=version) == {
        (("user", "alice"),): {"producer_byte_rate": 1048576.0},
        (("user", None),): {"producer_byte_rate": 500000.0},
        (("user", "alice"), ("client-id", None)): {
            "consumer_byte_rate": 2048.0,
            "request_percentage": 25.5,
        },
    }
    assert describe(admin, ("user", DEFAULT, None), strict=True) == {
        (("user", None),): {"producer_byte_rate": 500000.0}
    }
    assert set(describe(admin, ("user", EXACT, "alice"))) == {
        (("user", "alice"),),
        (("user", "alice"), ("client-id", None)),
    }
    assert set(describe(admin, ("user", SPECIFIED, None), ("client-id", DEFAULT, None))) == {
        (("user", "alice"), ("client-id", None))
    }
    removals = [
        Entry(entity=entity(user="alice"), ops=[op("producer_byte_rate")]),
        Entry(entity=entity(user="alice", client_id=None), ops=[op("request_percentage")]),
    ]
    assert alter(admin, removals, node_id=1, version=version) == [(0, None)] * 2
    assert describe(admin) == {
        (("user", None),): {"producer_byte_rate": 500000.0},
        (("user", "alice"), ("client-id", None)): {"consumer_byte_rate": 2048.0},
    }
    assert ControlClient(dc.control_url).quotas() == [
        {"entity": {"user": None}, "values": {"producer_byte_rate": 500000.0}},
        {"entity": {"user": "alice", "client-id": None}, "values": {"consumer_byte_rate": 2048.0}},
    ]


def test_alter_calls_are_counted(dc, admin):
    cc = ControlClient(dc.control_url)
    cc.reset_requests()
    for rate in (1000.0, 2000.0, 3000.0):
        alter(admin, [Entry(entity=entity(user="a"), ops=[op("producer_byte_rate", rate)])])
    assert cc.requests()["total"]["AlterClientQuotas"] == 3
    assert sum(b.get("AlterClientQuotas", 0) for b in cc.requests()["by_broker"].values()) == 3
