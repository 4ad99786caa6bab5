"""The enforcer's Kafka ACLs as the Strimzi overlay's KafkaUser grants them (docs/strimzi.md
section 2 shows the same user), on a real Kafka cluster that allows nothing else
(allow.everyone.if.no.acl.found=false): with exactly those ACLs the chart's upgrade Job
(`kvq-enforcer --import-journal`) copies a journal holding a throttle in progress into Kafka,
and two replicas with their state in Kafka take it over, elect one, take a webhook on either,
throttle, and the other takes over from a killed one and restores exactly. Without the
transactional ids' ACL nothing is written."""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
from collections.abc import Iterator

import pytest
import yaml
from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    KafkaAdminClient,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)

from devkit import kubernetes_manifests
from devkit.enforcer_process import running_enforcer, write_config
from devkit.kafka_cluster import DEFAULT_USERS, KafkaCluster
from enforcer.journal import Journal
from kvq.kafka.client_settings import kafka_python_config
from kvq.kafka.quota_entity import QuotaEntity
from tests.deploy.rendering import ROOT, arguments, documents
from tests.quota_backends import kafka_quotas_left_as_found
from tests.system.test_enforcer_replicas import throttle_then_fail_over

pytestmark = pytest.mark.integration

USER = "kvq-enforcer"
KAFKA_USERS = ROOT / "deploy" / "kubernetes" / "overlays" / "strimzi" / "kafkausers.yaml"
CLUSTER = "acls"
ALICE = QuotaEntity.user("alice")
P = "producer_byte_rate"
STATE = {
    "kvq.enforcer.state.store": "kafka",  # the default topic, group and transactional ids
    "kvq.enforcer.failsafe.after": "PT0S",
    "kvq.enforcer.alter.settle": "PT5S",
}
RESOURCE_TYPES = {
    "cluster": ResourceType.CLUSTER,
    "topic": ResourceType.TOPIC,
    "group": ResourceType.GROUP,
    "transactionalId": ResourceType.TRANSACTIONAL_ID,
}
PATTERN_TYPES = {
    "literal": ACLResourcePatternType.LITERAL,
    "prefix": ACLResourcePatternType.PREFIXED,
}


def documented_acls() -> list[ACL]:
    """The enforcer's KafkaUser's ACLs (Strimzi's `simple` authorization) as Kafka's ACLs."""
    (user,) = [
        d for d in yaml.safe_load_all(KAFKA_USERS.read_text()) if d["metadata"]["name"] == USER
    ]
    acls = []
    for rule in user["spec"]["authorization"]["acls"]:
        resource = rule["resource"]
        pattern = ResourcePattern(
            RESOURCE_TYPES[resource["type"]],
            resource.get("name", "kafka-cluster"),
            PATTERN_TYPES[resource.get("patternType", "literal")],
        )
        for operation in rule["operations"]:  # DescribeConfigs -> DESCRIBE_CONFIGS
            name = re.sub(r"(?<!^)(?=[A-Z])", "_", operation).upper()
            acls.append(
                ACL(f"User:{USER}", "*", ACLOperation[name], ACLPermissionType.ALLOW, pattern)
            )
    return acls


@pytest.fixture(scope="module")
def kafka(tmp_path_factory) -> Iterator[KafkaCluster]:
    """One node; only the super user and what an ACL allows."""
    with KafkaCluster(
        tmp_path_factory.mktemp("kafka"),
        nodes=1,
        users={**DEFAULT_USERS, USER: "kvq-enforcer-secret"},
        broker_properties={"allow.everyone.if.no.acl.found": "false"},
    ) as cluster:
        yield cluster


@contextlib.contextmanager
def granted(kafka: KafkaCluster, acls: list[ACL]) -> Iterator[None]:
    admin = KafkaAdminClient(**kafka_python_config(kafka.admin_properties))
    try:
        assert admin.create_acls(acls)["failed"] == []
        yield
    finally:
        everything = ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY)
        admin.delete_acls(
            [ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY, everything)]
        )
        admin.close()


def import_journal(kafka: KafkaCluster, tmp_path, journal) -> subprocess.CompletedProcess:
    """The chart's upgrade Job's command (enforcer.state.importFrom), its files moved here, as
    the enforcer's user."""
    text = kubernetes_manifests.helm_template("--set", "enforcer.state.importFrom=journal-kvq")
    (job,) = [d for d in documents(text) if d["kind"] == "Job"]
    (container,) = job["spec"]["template"]["spec"]["containers"]
    args = list(container["args"])
    (config,) = arguments(container, "--config")
    work = tmp_path / "job"
    work.mkdir(exist_ok=True)
    args[args.index(config)] = str(
        write_config(kafka.client_properties(USER), work, CLUSTER, STATE)
    )
    args[args.index("--import-journal") + 1] = str(journal)
    command = [sys.executable, "-m", "enforcer.cli", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=ROOT)


def old_journal(tmp_path):
    """The journal of an enforcer run with the local store, throttling alice to half of her
    original 1,000,000 B/s."""
    path = tmp_path / "old.sqlite3"
    old = Journal(path)
    old.episodes.begin(CLUSTER, {(ALICE, P): 1_000_000.0}, 0.5)
    old.close()
    return path


def test_without_the_transactional_ids_acl_nothing_is_imported(kafka, tmp_path) -> None:
    """The authorizer refuses what no ACL allows: the fence's transactional id is needed."""
    acls = [
        a
        for a in documented_acls()
        if a.resource_pattern.resource_type != ResourceType.TRANSACTIONAL_ID
    ]
    with granted(kafka, acls):
        result = import_journal(kafka, tmp_path, old_journal(tmp_path))
    assert result.returncode != 0
    assert "TransactionalIdAuthorizationFailed" in result.stderr, result.stderr


def test_the_documented_acls_are_all_the_replicas_need(kafka, tmp_path) -> None:
    with contextlib.ExitStack() as stack:
        stack.enter_context(granted(kafka, documented_acls()))
        imported = import_journal(kafka, tmp_path, old_journal(tmp_path))
        assert imported.returncode == 0, imported.stderr
        assert f"cluster {CLUSTER}: 2 rows imported from" in imported.stdout  # episode, pair

        quotas = stack.enter_context(kafka_quotas_left_as_found(kafka))
        quotas.seed({"user": "alice"}, producer_byte_rate=1_000_000.0)
        before = quotas.snapshot()
        replicas = []
        for name in ("a", "b"):
            (tmp_path / name).mkdir()
            replicas.append(
                stack.enter_context(
                    running_enforcer(
                        kafka.client_properties(USER), tmp_path / name, cluster=CLUSTER,
                        settings=STATE,
                    )
                )
            )  # fmt: skip
        throttle_then_fail_over(replicas, quotas, before, CLUSTER)
