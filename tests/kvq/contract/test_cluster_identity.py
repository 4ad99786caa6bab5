"""ClusterIdentity: the cluster's name and the label carrying it, read once from the settings."""

from kvq.contract.cluster_identity import ClusterIdentity
from kvq.settings.config import CLUSTER_LABEL, CLUSTER_NAME, build_config
from tests.properties_support import MINIMAL


def test_the_identity_is_the_one_label_pair_of_every_series():
    assert ClusterIdentity("eu-1", "kafka_cluster").labels == {"kafka_cluster": "eu-1"}


def test_the_settings_give_the_identity_with_their_defaults():
    assert build_config(MINIMAL).cluster == ClusterIdentity("kafka", "cluster")
    named = build_config({**MINIMAL, CLUSTER_NAME: "eu-1", CLUSTER_LABEL: "kafka_cluster"})
    assert named.cluster == ClusterIdentity("eu-1", "kafka_cluster")
