"""Faults: what a control request may set, checked whole before anything changes."""

import pytest

from devcluster.faults import Faults
from devcluster.validation import ControlError


def test_a_new_broker_has_no_active_faults():
    assert Faults().active() == {}


def test_fields_are_set_merged_and_listed():
    faults = Faults().updated({"latency_ms": 20, "log_dir_error": {"index": 1}}, log_dir_count=2)
    faults = faults.updated({"log_dir_error": {"index": 0, "code": 31}}, log_dir_count=2)
    faults = faults.updated(
        {"max_describe_log_dirs_version": 3, "fail_describe_log_dirs": True}, log_dir_count=2
    )
    faults = faults.updated({"leave_before_describe_log_dirs": True}, log_dir_count=2)
    faults = faults.updated({"drop_describe_log_dirs": 2}, log_dir_count=2)
    assert faults.active() == {
        "latency_ms": 20,
        "log_dir_errors": {"0": 31, "1": 56},
        "max_describe_log_dirs_version": 3,
        "fail_describe_log_dirs": -1,
        "leave_before_describe_log_dirs": True,
        "drop_describe_log_dirs": 2,
    }


def test_each_fault_can_be_switched_off_on_its_own():
    faults = Faults().updated(
        {
            "latency_ms": 20,
            "log_dir_error": {"index": 0},
            "max_describe_log_dirs_version": 2,
            "fail_describe_log_dirs": 31,
            "leave_before_describe_log_dirs": True,
            "drop_describe_log_dirs": 1,
        },
        log_dir_count=1,
    )
    off = faults.updated(
        {
            "latency_ms": 0,
            "log_dir_error": {"index": 0, "code": 0},
            "max_describe_log_dirs_version": None,
            "fail_describe_log_dirs": False,
            "leave_before_describe_log_dirs": False,
            "drop_describe_log_dirs": 0,
        },
        log_dir_count=1,
    )
    assert off.active() == {}


def test_clear_comes_first_then_the_other_fields():
    faults = Faults().updated({"latency_ms": 20}, log_dir_count=1)
    assert faults.updated({"clear": True, "latency_ms": 5}, 1).active() == {"latency_ms": 5}


def test_updated_returns_a_new_value_and_leaves_the_old_one_alone():
    before = Faults()
    before.updated({"log_dir_error": {"index": 0}}, log_dir_count=1)
    assert before.active() == {}


@pytest.mark.parametrize(
    "body, words",
    [
        ({"latency_ms": -1}, "latency_ms must be between 0 and 600000"),
        ({"latency_ms": True}, "latency_ms must be an integer"),
        ({"log_dir_error": {"index": 2}}, "log_dir_error.index must be between 0 and 1"),
        ({"log_dir_error": 3}, 'log_dir_error must be {"index": i, "code": c}'),
        ({"log_dir_error": {"index": 0, "code": 99999}}, "log_dir_error.code"),
        ({"max_describe_log_dirs_version": 5}, "between 1 and 4"),
        ({"fail_describe_log_dirs": "yes"}, "must be true, false or a Kafka error code"),
        ({"leave_before_describe_log_dirs": 1}, "must be true or false"),
        ({"drop_describe_log_dirs": -1}, "drop_describe_log_dirs must be between 0 and 1000000"),
        ({"latency": 5}, "unknown field(s) latency; allowed: latency_ms"),
        ({}, "empty request"),
        ([1], "expected a JSON object"),
    ],
)
def test_bad_fields_name_the_problem(body, words):
    with pytest.raises(ControlError) as caught:
        Faults().updated(body, log_dir_count=2)
    assert caught.value.status == 400
    assert words in caught.value.message


def test_a_bad_field_changes_nothing():
    faults = Faults().updated({"latency_ms": 20}, log_dir_count=1)
    with pytest.raises(ControlError):
        faults.updated({"clear": True, "max_describe_log_dirs_version": 9}, log_dir_count=1)
    assert faults.active() == {"latency_ms": 20}


def test_an_alter_fault_is_listed_counted_down_and_disarmed():
    faults = Faults().updated(
        {"alter_client_quotas": {"delay_ms": 6000, "error_code": 41, "count": 2}}, log_dir_count=1
    )
    fault = faults.alter_client_quotas
    assert faults.active() == {
        "alter_client_quotas": {"delay_ms": 6000, "apply": "late", "error_code": 41, "count": 2}
    }
    assert fault.spent().count == 1 and fault.spent().spent() is None


def test_an_alter_fault_without_count_stays_and_may_target_validate_only():
    fault = (
        Faults()
        .updated({"alter_client_quotas": {"error_code": 7, "validate_only": True}}, log_dir_count=1)
        .alter_client_quotas
    )
    assert fault.spent() is fault
    assert fault.matches(validate_only=True) and not fault.matches(validate_only=False)
