"""kvq.cluster.label: the enforcer takes the cluster from the label the rules aggregate by, here
`kafka_cluster` (where `cluster` is the Kubernetes cluster's, e.g. a Thanos external label). The
real `kvq-enforcer` process against a 1-broker devcluster over TCP."""

from __future__ import annotations

import urllib.request

import pytest

from devkit.alertmanager import throttle_webhook
from tests.enforcer.test_integration import CLUSTER, TOKEN, Enforcer, key, quotas, seed

pytestmark = pytest.mark.integration

P = "producer_byte_rate"


@pytest.fixture
def enforcer(tmp_path, dc):
    e = Enforcer(tmp_path, dc, {"kvq.cluster.label": "kafka_cluster"})
    try:
        yield e.start()
    finally:
        e.stop()


def test_alerts_naming_the_cluster_in_another_label_are_enforced(dc, enforcer):
    seed(dc, {"user": "alice"}, producer_byte_rate=1000.0)
    before = quotas(dc)

    # `cluster` here is what Thanos would add: the Kubernetes cluster's name, not ours
    firing = throttle_webhook(cluster=CLUSTER, factor=0.5, cluster_label="kafka_cluster")
    for alert in firing["alerts"]:
        alert["labels"]["cluster"] = "k8s-eu-west"
    status, body = enforcer.post(firing, token=TOKEN)
    assert status == 200, body
    assert body["clusters"][CLUSTER]["factor"] == 0.5
    assert quotas(dc)[key(user="alice")] == {P: 500.0}
    with urllib.request.urlopen(enforcer.url + "/metrics", timeout=10) as response:
        metrics = response.read().decode()
    assert f'kafka_volume_quota_enforcer_applied_factor{{kafka_cluster="{CLUSTER}"}} 0.5' in metrics
    assert 'cluster="' not in metrics.replace('kafka_cluster="', "")

    status, body = enforcer.post(
        throttle_webhook(cluster=CLUSTER, factor=None, cluster_label="kafka_cluster"), token=TOKEN
    )
    assert status == 200, body
    assert quotas(dc) == before


def test_an_alert_with_only_the_default_label_is_refused_naming_the_configured_one(dc, enforcer):
    seed(dc, {"user": "alice"}, producer_byte_rate=1000.0)
    before = quotas(dc)
    status, body = enforcer.post(throttle_webhook(cluster=CLUSTER, factor=0.0), token=TOKEN)
    assert status == 400, body
    assert "$.alerts[0].labels.kafka_cluster is missing" in body["error"], body
    assert quotas(dc) == before
