"""Which factor each cluster should have, from the throttle alerts of each Alertmanager group."""

from datetime import UTC, datetime

import pytest

from devkit.alertmanager import captured_webhook, throttle_webhook
from enforcer.target_factor import ThrottleAlert, extract, next_group_state, target_factor
from enforcer.webhook_payload import PayloadError, webhook_from_dict
from kvq.settings.config import CLUSTER_LABEL_DEFAULT

NAME = "KafkaVolumeQuotaThrottle"
T0 = datetime(2026, 11, 22, 15, 0, tzinfo=UTC)


def payload(**kwargs):
    return webhook_from_dict(throttle_webhook(**kwargs))


def test_lowest_firing_factor_wins_and_none_firing_means_unthrottled():
    assert target_factor([0.5, 0.0, 0.8]) == 0.0
    assert target_factor([]) == 1.0


def test_firing_alert_of_a_managed_cluster_yields_its_factor():
    found = extract(payload(cluster="a", factor=0.25), NAME, ["a"], CLUSTER_LABEL_DEFAULT)
    assert [(t.cluster, t.factor) for t in found.throttle] == [("a", 0.25)]


def test_the_cluster_is_read_from_the_configured_label():
    """kvq.cluster.label=kafka_cluster: `cluster` (e.g. a Kubernetes cluster's external label
    added by Thanos) does not name the Kafka cluster."""
    body = throttle_webhook(cluster="a", factor=0.25, cluster_label="kafka_cluster")
    body["alerts"][0]["labels"]["cluster"] = "k8s-1"
    found = extract(webhook_from_dict(body), NAME, ["a", "k8s-1"], "kafka_cluster")
    assert [(t.cluster, t.factor) for t in found.throttle] == [("a", 0.25)]
    with pytest.raises(PayloadError, match=r"labels\.kafka_cluster is missing"):
        extract(payload(cluster="a", factor=0.25), NAME, ["a"], "kafka_cluster")


def test_other_alerts_and_other_clusters_are_ignored():
    body = throttle_webhook(alerts=[("a", 0.5), ("elsewhere", 0.0)])
    other = captured_webhook("firing")["alerts"][0]
    other["labels"]["alertname"] = "DiskAlmostFull"
    other["annotations"].pop("throttle_factor")
    body["alerts"].append(other)
    found = extract(webhook_from_dict(body), NAME, ["a"], CLUSTER_LABEL_DEFAULT)
    assert [t.cluster for t in found.throttle] == ["a"]
    assert found.ignored == 2


def test_resolved_alerts_need_no_factor():
    body = throttle_webhook(cluster="a", factor=None)
    body["alerts"][0]["annotations"].pop("throttle_factor")
    (alert,) = extract(webhook_from_dict(body), NAME, ["a"], CLUSTER_LABEL_DEFAULT).throttle
    assert not alert.firing


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("1.5", "out of range"),
        ("-0.1", "not a plain decimal"),
        ("nan", "not a plain decimal"),
        ("x", "not a"),
    ],
)
def test_bad_factor_is_a_payload_error_naming_value_and_range(value, message):
    body = throttle_webhook(cluster="a", factor=0.5)
    body["alerts"][0]["annotations"]["throttle_factor"] = value
    with pytest.raises(PayloadError, match=message) as info:
        extract(webhook_from_dict(body), NAME, ["a"], CLUSTER_LABEL_DEFAULT)
    assert "throttle_factor" in str(info.value) and "0.0 to 1.0" in str(info.value)


def test_firing_alert_without_factor_or_cluster_is_rejected():
    body = throttle_webhook(cluster="a", factor=0.5)
    body["alerts"][0]["annotations"].pop("throttle_factor")
    with pytest.raises(PayloadError, match="throttle_factor is missing"):
        extract(webhook_from_dict(body), NAME, ["a"], CLUSTER_LABEL_DEFAULT)
    body = throttle_webhook(cluster="a", factor=0.5)
    body["alerts"][0]["labels"].pop("cluster")
    with pytest.raises(PayloadError, match="labels.cluster is missing"):
        extract(webhook_from_dict(body), NAME, ["a"], CLUSTER_LABEL_DEFAULT)


def test_complete_notification_replaces_the_group_state():
    before = {("a", "f1"): 0.0, ("a", "f2"): 0.5}
    after = next_group_state(before, [ThrottleAlert("a", "f2", 0.5, T0)], truncated=False)
    assert after == {("a", "f2"): 0.5}


def test_truncated_notification_only_adds_and_removes_what_it_lists():
    before = {("a", "f1"): 0.0, ("a", "f2"): 0.5}
    listed = [ThrottleAlert("a", "f2", None, T0), ThrottleAlert("a", "f3", 0.7, T0)]
    after = next_group_state(before, listed, truncated=True)
    assert after == {("a", "f1"): 0.0, ("a", "f3"): 0.7}
