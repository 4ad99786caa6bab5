"""The ``alter_client_quotas`` fault: AlterClientQuotas answered late but applied (after the
client gave up, possibly after a later request), and failing alters, whole or per entity."""

import threading
import time

import pytest
from kafka.protocol.admin import AlterClientQuotasRequest

from devcluster.control_client import ControlClient, ControlClientError
from devkit.devcluster_wire import admin_send, exchange

pytestmark = [pytest.mark.integration, pytest.mark.paced]

Entry = AlterClientQuotasRequest.EntryData
NOT_CONTROLLER, INVALID_REQUEST, REQUEST_TIMED_OUT = 41, 42, 7


@pytest.fixture
def dc(devcluster):
    return devcluster(brokers=2, log_dirs_per_broker=1)


@pytest.fixture
def cc(dc):
    return ControlClient(dc.control_url)


def request(rates, validate_only=False):
    """``{user: producer_byte_rate}`` as one AlterClientQuotas request (v1)."""
    return AlterClientQuotasRequest(
        version=1,
        entries=[
            Entry(
                entity=[Entry.EntityData(entity_type="user", entity_name=user)],
                ops=[Entry.OpData(key="producer_byte_rate", value=rate, remove=False)],
            )
            for user, rate in rates.items()
        ],
        validate_only=validate_only,
    )


def rates(cc):
    return {q["entity"]["user"]: q["values"]["producer_byte_rate"] for q in cc.quotas()}


def wait_until(condition, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.02)


def address(dc, broker=0):
    return "127.0.0.1", dc.broker_ports[broker]


def test_a_late_alter_is_applied_after_the_client_gave_up_and_after_a_later_request(dc, cc):
    cc.set_faults(0, alter_client_quotas={"delay_ms": 3000, "count": 1})
    with pytest.raises(TimeoutError):  # the client's timeout: it closes the connection
        exchange(address(dc), [request({"alice": 1000.0})], timeout=0.3)
    assert rates(cc) == {}  # not applied yet
    # A later request on another connection (a restore) lands first...
    [resp] = exchange(address(dc), [request({"alice": 500.0})])
    assert resp.entries[0].error_code == 0 and rates(cc) == {"alice": 500.0}
    # ... and the request the client gave up on overwrites it when its delay ends.
    wait_until(lambda: rates(cc) == {"alice": 1000.0})
    assert cc.broker(0)["faults"] == {}  # count 1: used up


def test_an_early_applied_alter_is_applied_at_once_and_answered_late(dc, cc):
    cc.set_faults(0, alter_client_quotas={"delay_ms": 1500, "apply": "early"})
    with pytest.raises(TimeoutError):
        exchange(address(dc), [request({"bob": 7.0})], timeout=0.3)
    assert rates(cc) == {"bob": 7.0}
    # Other brokers, and other APIs of this one, are not delayed.
    [resp] = exchange(address(dc, 1), [request({"carol": 8.0})], timeout=1.0)
    assert resp.entries[0].error_code == 0


def test_a_late_answer_arrives_on_a_patient_client(dc, cc, admin):
    cc.set_faults(0, alter_client_quotas={"delay_ms": 300})
    cc.set_faults(1, alter_client_quotas={"delay_ms": 300})
    started = time.monotonic()
    resp = admin_send(admin, request({"dave": 9.0}))
    assert time.monotonic() - started >= 0.3
    assert resp.entries[0].error_code == 0 and rates(cc) == {"dave": 9.0}


def test_a_failing_alter_fails_every_entry_and_applies_nothing(dc, cc, admin):
    for broker in (0, 1):
        cc.set_faults(broker, alter_client_quotas={"error_code": NOT_CONTROLLER, "count": 1})
    resp = admin_send(admin, request({"alice": 1.0, "bob": 2.0}))
    assert [(e.error_code, e.error_message) for e in resp.entries] == [
        (NOT_CONTROLLER, "This is not the correct controller for this cluster.")
    ] * 2
    assert rates(cc) == {}
    # The broker that answered used its one shot; the other one still has it: ask both directly.
    answers = [exchange(address(dc, b), [request({"alice": 1.0})])[0] for b in (0, 1)]
    assert sorted(a.entries[0].error_code for a in answers) == [0, NOT_CONTROLLER]
    assert rates(cc) == {"alice": 1.0}


def test_a_failing_entity_is_rejected_alone(dc, cc):
    cc.set_faults(
        0,
        alter_client_quotas={"error_code": INVALID_REQUEST, "entities": [{"user": "alice"}]},
    )
    [resp] = exchange(address(dc), [request({"alice": 1.0, "bob": 2.0})])
    assert {e.entity[0].entity_name: e.error_code for e in resp.entries} == {
        "alice": INVALID_REQUEST,
        "bob": 0,
    }
    assert rates(cc) == {"bob": 2.0}
    assert cc.broker(0)["faults"]["alter_client_quotas"] == {
        "error_code": INVALID_REQUEST,
        "entities": [{"user": "alice"}],
    }


def test_the_fault_can_spare_validate_only_requests(dc, cc):
    cc.set_faults(0, alter_client_quotas={"error_code": REQUEST_TIMED_OUT, "validate_only": False})
    [checked, applied] = exchange(
        address(dc), [request({"eve": 3.0}, validate_only=True), request({"eve": 3.0})]
    )
    assert checked.entries[0].error_code == 0
    assert applied.entries[0].error_code == REQUEST_TIMED_OUT and rates(cc) == {}


def test_a_late_alter_does_not_hold_up_other_connections(dc, cc):
    cc.set_faults(0, alter_client_quotas={"delay_ms": 3000, "validate_only": False})
    slow = threading.Thread(
        target=lambda: exchange(address(dc), [request({"slow": 1.0})], timeout=10)
    )
    slow.start()
    try:
        wait_until(lambda: cc.requests()["total"].get("AlterClientQuotas") == 1)
        [resp] = exchange(address(dc), [request({"fast": 2.0}, validate_only=True)], timeout=10)
        assert resp.entries[0].error_code == 0
        assert slow.is_alive() and rates(cc) == {}  # answered while the slow one still waits
    finally:
        slow.join(15)
    assert rates(cc) == {"slow": 1.0}


@pytest.mark.parametrize(
    "fault, words",
    [
        ({"delay_ms": -1}, "delay_ms must be between 0 and 600000"),
        ({"delay_ms": 10, "apply": "sometimes"}, 'apply must be "late" or "early"'),
        ({"error_code": 0}, "non-zero Kafka error code"),
        ({"entities": [{"user": "a"}]}, "entities needs an error_code"),
        ({"error_code": 42, "entities": []}, "must be a list of entities"),
        ({"error_code": 42, "entities": [{"user": 5}]}, "must be a list of entities"),
        ({"count": 2}, "needs a delay_ms > 0 or an error_code"),
        ({"error_code": 42, "count": 0}, "count must be >= 1"),
        ({"error_code": 42, "when": "now"}, "unknown field(s) when"),
        ({"delay_ms": 10, "applied": True}, "applied needs an error_code"),
        (
            {"error_code": 42, "applied": True, "entities": [{"user": "a"}]},
            "applied needs an error_code for the whole request",
        ),
    ],
)
def test_bad_alter_faults_are_400_naming_the_problem(cc, fault, words):
    with pytest.raises(ControlClientError) as err:
        cc.set_faults(0, alter_client_quotas=fault)
    assert err.value.status == 400 and words in err.value.message
    assert cc.broker(0)["faults"] == {}


def test_null_removes_the_fault(cc):
    cc.set_faults(0, alter_client_quotas={"error_code": 42})
    assert cc.set_faults(0, alter_client_quotas=None) == {}


# ---- a broker whose metadata lags the controller ----------------------------------------------
def described(dc, broker):
    from kafka.protocol.admin import DescribeClientQuotasRequest

    [resp] = exchange(
        address(dc, broker), [DescribeClientQuotasRequest(version=1, components=[], strict=False)]
    )
    return {e.entity[0].entity_name: e.values[0].value for e in resp.entries}


def test_a_lagging_broker_describes_quotas_as_they_were(dc, cc):
    cc.set_faults(0, quota_metadata_lag_ms=3000)
    exchange(address(dc, 1), [request({"alice": 100.0})])
    assert described(dc, 0) == {}  # applied, not yet seen by the lagging broker
    wait_until(lambda: described(dc, 0) == {"alice": 100.0})
    [resp] = exchange(address(dc, 1), [request({"alice": 50.0, "bob": 7.0})])
    assert [e.error_code for e in resp.entries] == [0, 0]
    assert described(dc, 1) == {"alice": 50.0, "bob": 7.0}  # the controller's view
    assert described(dc, 0) == {"alice": 100.0}  # not caught up yet
    wait_until(lambda: described(dc, 0) == {"alice": 50.0, "bob": 7.0})
    assert cc.broker(0)["faults"] == {"quota_metadata_lag_ms": 3000}


def test_a_timed_out_forward_is_answered_with_an_error_but_applied(dc, cc):
    """A broker gives up forwarding after 60 s (REQUEST_TIMED_OUT) while the controller has the
    request: the client sees an error, the change is in Kafka."""
    cc.set_faults(
        0, alter_client_quotas={"error_code": REQUEST_TIMED_OUT, "applied": True, "count": 1}
    )
    [resp] = exchange(address(dc), [request({"frank": 4.0})])
    assert [e.error_code for e in resp.entries] == [REQUEST_TIMED_OUT]
    assert rates(cc) == {"frank": 4.0}
