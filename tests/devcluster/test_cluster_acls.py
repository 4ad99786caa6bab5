"""ACLs on the cluster resource: the brokers authorize as Kafka's StandardAuthorizer does, so the
operations docs/strimzi.md gives kvq's KafkaUsers are tested to be enough, and what is missing
gets Kafka's CLUSTER_AUTHORIZATION_FAILED."""

import pytest
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient
from kafka.protocol.admin import (
    AlterClientQuotasRequest,
    DescribeClientQuotasRequest,
    DescribeConfigsRequest,
    DescribeLogDirsRequest,
)

from devcluster.cluster_acls import ClusterAcls
from devcluster.control_client import ControlClient, ControlClientError
from devcluster.validation import ControlError
from devkit.devcluster_wire import admin_send

pytestmark = pytest.mark.integration

DENIED = 31  # CLUSTER_AUTHORIZATION_FAILED
USERS = {"exporter": "e-secret", "enforcer": "f-secret", "nobody": "n-secret"}
# docs/strimzi.md, section 2
ACLS = {
    "User:exporter": ["Describe"],
    "User:enforcer": ["DescribeConfigs", "AlterConfigs"],
}


@pytest.fixture
def dc(devcluster):
    return devcluster(brokers=2, log_dirs_per_broker=1, sasl_users=USERS, cluster_acls=ACLS)


@pytest.fixture
def admin_as(dc):
    clients = []

    def connect(user):
        client = KafkaAdminClient(
            bootstrap_servers=dc.sasl_bootstrap,
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="PLAIN",
            sasl_plain_username=user,
            sasl_plain_password=USERS[user],
            request_timeout_ms=5000,
        )
        clients.append(client)
        return client

    yield connect
    for client in clients:
        client.close()


def log_dirs_error(admin):
    return admin_send(admin, DescribeLogDirsRequest(topics=[]), node_id=0).error_code


def quotas_error(admin):
    return admin_send(admin, DescribeClientQuotasRequest(components=[], strict=False)).error_code


def alter_errors(admin):
    entry = AlterClientQuotasRequest.EntryData
    request = AlterClientQuotasRequest(
        entries=[
            entry(
                entity=[entry.EntityData(entity_type="user", entity_name=None)],
                ops=[entry.OpData(key="producer_byte_rate", value=1000.0, remove=False)],
            )
        ],
        validate_only=False,
    )
    return [(e.error_code, e.error_message) for e in admin_send(admin, request).entries]


def broker_config_error(admin):
    request = DescribeConfigsRequest(
        resources=[
            DescribeConfigsRequest.DescribeConfigsResource(
                resource_type=4, resource_name="0", configuration_keys=None
            )
        ],
        include_synonyms=False,
    )
    return admin_send(admin, request, node_id=0).results[0].error_code


def test_the_exporter_user_may_describe_log_dirs_and_nothing_more(admin_as):
    admin = admin_as("exporter")
    assert log_dirs_error(admin) == 0
    assert len(admin.describe_cluster()["brokers"]) == 2  # no ACL needed
    assert quotas_error(admin) == DENIED
    assert broker_config_error(admin) == DENIED
    assert alter_errors(admin) == [(DENIED, "Cluster authorization failed.")]


def test_the_enforcer_user_may_do_all_it_needs(dc, admin_as):
    admin = admin_as("enforcer")
    assert log_dirs_error(admin) == DENIED  # no Describe: it needs none
    assert quotas_error(admin) == 0
    assert broker_config_error(admin) == 0
    assert alter_errors(admin) == [(0, None)]
    assert ControlClient(dc.control_url).quotas() == [
        {"entity": {"user": None}, "values": {"producer_byte_rate": 1000.0}}
    ]
    resource = ConfigResource(ConfigResourceType.BROKER, "1", configs=["node.id"])
    assert (
        admin.describe_configs([resource], config_filter="all")["broker"]["1"]["node.id"]["value"]
        == "1"
    )


def test_a_principal_without_acls_gets_nothing_on_the_cluster(dc, admin_as):
    admin = admin_as("nobody")
    assert (log_dirs_error(admin), quotas_error(admin), broker_config_error(admin)) == (
        DENIED,
        DENIED,
        DENIED,
    )
    assert ControlClient(dc.control_url).quotas() == []


def test_authorized_operations_follow_the_acls_and_their_implications(admin_as):
    # AclOperation codes: DESCRIBE 8, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11
    assert admin_as("exporter").describe_cluster()["authorized_operations"] == ["DESCRIBE"]
    assert sorted(admin_as("enforcer").describe_cluster()["authorized_operations"]) == [
        "ALTER_CONFIGS",
        "DESCRIBE_CONFIGS",
    ]


def test_the_control_api_replaces_and_removes_the_acls(dc, admin_as):
    cc = ControlClient(dc.control_url)
    assert cc.acls() == {
        "User:enforcer": ["AlterConfigs", "DescribeConfigs"],
        "User:exporter": ["Describe"],
    }
    admin = admin_as("nobody")
    assert cc.set_acls({"User:nobody": ["alterconfigs"]}) == {"User:nobody": ["AlterConfigs"]}
    assert quotas_error(admin) == 0  # AlterConfigs implies DescribeConfigs
    assert log_dirs_error(admin) == DENIED
    assert cc.set_acls(None) is None and cc.state()["acls"] is None
    assert log_dirs_error(admin) == 0  # no authorizer: everything allowed


@pytest.mark.parametrize(
    "body, words",
    [
        ([], "must be a JSON object"),
        ({"kvq": ["Describe"]}, "must look like User:name"),
        ({"User:kvq": "Describe"}, "must be a list of names"),
        ({"User:kvq": ["Read"]}, "unknown cluster operation(s) Read"),
    ],
)
def test_bad_acls_are_400_naming_the_problem(dc, body, words):
    with pytest.raises(ControlClientError) as err:
        ControlClient(dc.control_url).set_acls(body)
    assert err.value.status == 400 and words in err.value.message


def test_implications_are_kafkas():
    acls = ClusterAcls.parse({"User:a": ["Alter"], "User:b": ["All"], "User:c": ["AlterConfigs"]})
    assert acls.allows("User:a", "Describe") and not acls.allows("User:a", "DescribeConfigs")
    assert all(acls.allows("User:b", op) for op in ("Describe", "AlterConfigs", "ClusterAction"))
    assert acls.allows("User:c", "DescribeConfigs") and not acls.allows("User:c", "Describe")
    assert not acls.allows("User:ANONYMOUS", "Describe")
    with pytest.raises(ControlError):
        ClusterAcls.parse({"User:": ["Describe"]})
