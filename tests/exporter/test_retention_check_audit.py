"""RetentionCheckAudit: once, at the first successful observation, the brokers that check
retention less often than the partitions' sizes count on are named in a warning."""

from __future__ import annotations

import logging
import threading

from exporter.cluster_client import ClusterError
from exporter.retention_check_audit import RETENTION_CHECK, RetentionCheckAudit
from kvq.model.observation import Observation


def audit_of(answers):
    asked = []

    def ask(broker_ids, key):
        asked.append((tuple(broker_ids), key))
        return answers

    return RetentionCheckAudit(ask), asked


def test_brokers_checking_less_often_than_every_5_s_are_named_once(caplog):
    audit, asked = audit_of({0: "300000", 1: "1000", 2: "", 3: "5000"})
    with caplog.at_level(logging.WARNING, logger="kvq.exporter"):
        audit(Observation(10.0, (0, 1, 2, 3), ()))
        audit(Observation(15.0, (0, 1, 2, 3), ()))
        audit.join(10)
    assert asked == [((0, 1, 2, 3), RETENTION_CHECK)]
    (warning,) = caplog.messages
    assert warning.startswith("brokers 0, 2 check retention every 300000 ms")  # "": the default
    assert "at most 5000 ms apart" in warning and "docs/policies.md#" in warning


def test_brokers_that_could_not_be_asked_are_named_with_the_reason(caplog):
    refused = ClusterError("DescribeConfigs of broker 1 failed: ClusterAuthorizationFailedError")
    audit, _ = audit_of({0: "1000", 1: refused})
    with caplog.at_level(logging.WARNING, logger="kvq.exporter"):
        audit(Observation(10.0, (0, 1), ()))
        audit.join(10)
    (warning,) = caplog.messages
    assert warning.startswith(f"could not read {RETENTION_CHECK} of brokers 1 (DescribeConfigs")
    assert "ClusterAuthorizationFailedError" in warning


def test_a_failed_observation_asks_nothing_and_brokers_checking_often_say_nothing(caplog):
    audit, asked = audit_of({0: "1000"})
    with caplog.at_level(logging.WARNING, logger="kvq.exporter"):
        audit(Observation.failed(5.0, "describe_cluster", "down"))
        assert asked == [] and not audit.done
        audit(Observation(10.0, (0,), ()))
        audit.join(10)
    assert asked and caplog.messages == []


def test_a_broker_that_does_not_answer_delays_no_poll():
    answered = threading.Event()

    def ask(broker_ids, key):
        answered.wait(10)
        return {}

    audit = RetentionCheckAudit(ask)
    audit(Observation(10.0, (0,), ()))  # returns at once
    assert audit.done and not answered.is_set()
    answered.set()
    audit.join(10)
