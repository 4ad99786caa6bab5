"""Strimzi's credentials as its Secrets hold them, against real Apache Kafka: a KafkaUser's PKCS12
keystore and the cluster CA's PKCS12 truststore, the same as PEM files, SCRAM-SHA-512 both ways,
and certificates renewed in place as the kubelet swaps a mounted Secret, without a restart.

One 1-node cluster for the module, with Strimzi's two CAs: the cluster CA signs the broker's
certificate (what kvq trusts), the clients CA signs the users' (what the broker trusts). A test
that adds ACLs removes them (`acls`): an ACL on the cluster resource ends
allow.everyone.if.no.acl.found for every other principal.
"""

from __future__ import annotations

import logging
import re
import secrets
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import requests
import yaml
from confluent_kafka.admin import AdminClient
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

from devkit.kafka_cluster import DEFAULT_USERS, SCRAM_MECHANISM, KafkaCluster, ServerTls
from devkit.processes import ManagedProcess, server_port, wait_until
from devkit.tls_certificates import (
    CertificateAuthority,
    Issued,
    project_secret,
    strimzi_ca_secret,
    strimzi_user_secret,
)
from exporter.cluster_client import KafkaClusterClient
from kvq.kafka.client_settings import kafka_python_config, librdkafka_config
from kvq.settings.properties import parse_properties
from tests.docs.blocks import block
from tests.kafka_support import described
from tests.quota_backends import kafka_quotas_left_as_found, key

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
P = "client.quota.callback.static."
A = P + "kafka.admin."
RELOADED = "TLS files changed"
CA_SECRET = "my-cluster-cluster-ca-cert"
STRIMZI_PAGE = "docs/strimzi.md"


def new_password() -> str:
    """As Strimzi's PasswordGenerator: a new one for every keystore and truststore it writes,
    also when it renews a certificate (InternalCa.generateSignedCert, renewCaCert)."""
    return secrets.token_urlsafe(9)


@dataclass
class Strimzi:
    """Strimzi's CAs and the Secrets it writes, mounted under `root` as the kubelet mounts them:
    `root/cluster-ca` (ca.crt, ca.p12, ca.password) and `root/<user>` (user.crt, user.key,
    user.p12, user.password, ca.crt)."""

    root: Path
    cluster_ca: CertificateAuthority = field(default_factory=CertificateAuthority.new)
    clients_ca: CertificateAuthority = field(
        default_factory=lambda: CertificateAuthority.new("kvq test clients CA")
    )

    def __post_init__(self) -> None:
        self.server = self.cluster_ca.issue("127.0.0.1", server=True)
        self.secrets: dict[str, dict[str, bytes]] = {}
        """Each Secret's keys by its name, as last written."""
        self._write_ca()

    @property
    def ca_dir(self) -> Path:
        return self.root / "cluster-ca"

    def server_tls(self) -> ServerTls:
        return ServerTls(self.server.cert_pem, self.server.key_pem, self.clients_ca.pem)

    def user(self, name: str) -> Path:
        """A tls KafkaUser's Secret, mounted: its directory."""
        self._write_user(name, self.clients_ca.issue(name))
        return self.root / name

    def renew(self, user: str, cn: str) -> None:
        """What a renewal by Strimzi looks like to kvq: both CA certificates renewed (same keys),
        the user's new key and certificate (CN `cn`) from the renewed clients CA; each Secret
        swapped at once as the kubelet swaps it."""
        self.cluster_ca = self.cluster_ca.renewed()
        self.clients_ca = self.clients_ca.renewed()
        issued = self.clients_ca.issue(cn)  # first: the two swaps follow each other closely
        self._write_ca()
        self._write_user(user, issued)

    def _write_ca(self) -> None:
        secret = strimzi_ca_secret([self.cluster_ca], new_password())
        self.secrets[CA_SECRET] = secret
        project_secret(self.ca_dir, secret)

    def _write_user(self, name: str, issued: Issued) -> None:
        secret = strimzi_user_secret(issued, self.clients_ca, new_password())
        self.secrets[name] = secret
        project_secret(self.root / name, secret)


@pytest.fixture(scope="module")
def strimzi(tmp_path_factory) -> Strimzi:
    return Strimzi(tmp_path_factory.mktemp("secrets"))


@pytest.fixture(scope="module")
def kafka(tmp_path_factory, kafka_dist, strimzi):
    with KafkaCluster(
        tmp_path_factory.mktemp("kafka-tls"),
        nodes=1,
        log_dirs_per_node=1,
        users={**DEFAULT_USERS, "kvq-exporter": secrets.token_urlsafe(24)},
        scram=True,
        tls=strimzi.server_tls(),
        dist=kafka_dist,
    ) as cluster:
        yield cluster


def pkcs12(
    kafka: KafkaCluster, strimzi: Strimzi, user_dir: Path, ca_dir: Path | None = None
) -> dict[str, str]:
    """A KafkaUser's user.p12 and the cluster CA's ca.p12 (without the prefix), each password
    read from the Secret's key next to the store as a `${directory:...}` reference."""
    ca_dir = ca_dir or strimzi.ca_dir
    return {
        "bootstrap.servers": kafka.tls_bootstrap,
        "security.protocol": "SSL",
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": str(user_dir / "user.p12"),
        "ssl.keystore.password": f"${{directory:{user_dir}:user.password}}",
        "ssl.truststore.type": "PKCS12",
        "ssl.truststore.location": str(ca_dir / "ca.p12"),
        "ssl.truststore.password": f"${{directory:{ca_dir}:ca.password}}",
    }


def pem(kafka: KafkaCluster, strimzi: Strimzi, user_dir: Path) -> dict[str, str]:
    """The same credentials from the Secrets' PEM keys."""
    return {
        "bootstrap.servers": kafka.tls_bootstrap,
        "security.protocol": "SSL",
        "ssl.certificate.location": str(user_dir / "user.crt"),
        "ssl.key.location": str(user_dir / "user.key"),
        "ssl.ca.location": str(strimzi.ca_dir / "ca.crt"),
    }


def log_dirs_answered(props: dict[str, str]) -> bool:
    client = KafkaClusterClient(props, timeout_seconds=10)
    try:
        return bool(described(client, 0))
    finally:
        client.close()


def librdkafka_sees_the_broker(props: dict[str, str]) -> None:
    admin = AdminClient(librdkafka_config(props))
    assert list(admin.list_topics(timeout=20).brokers) == [0]


@pytest.mark.parametrize("credentials", [pkcs12, pem], ids=["pkcs12", "pem"])
def test_strimzi_tls_user_secret_reaches_kafka_over_mtls(kafka, strimzi, credentials):
    props = credentials(kafka, strimzi, strimzi.user(f"kvq-{credentials.__name__}"))
    assert log_dirs_answered(props)  # kafka-python: the exporter's and the enforcer's client
    librdkafka_sees_the_broker(props)


def test_a_certificate_of_another_ca_is_refused_by_the_broker(kafka, strimzi, tmp_path):
    stranger = Strimzi(tmp_path, cluster_ca=strimzi.cluster_ca)  # its own clients CA
    stranger.server = strimzi.server
    props = pkcs12(kafka, strimzi, stranger.user("stranger"))
    assert log_dirs_refused(props, timeout_seconds=3)


SCRAM_JAAS = (  # the `sasl.jaas.config` key of a scram-sha-512 KafkaUser's Secret
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    'username="alice" password="{password}";'
)


@pytest.mark.parametrize("way", ["jaas", "username"])
def test_strimzi_scram_sha_512_user_both_ways(kafka, tmp_path, way):
    password = kafka.users["alice"]
    credentials = (
        {"sasl.jaas.config": "${env:KAFKA_JAAS}"}
        if way == "jaas"
        else {"sasl.username": "alice", "sasl.password": "${env:KAFKA_PASSWORD}"}
    )
    env = {"KAFKA_JAAS": SCRAM_JAAS.format(password=password), "KAFKA_PASSWORD": password}
    props = {
        "bootstrap.servers": kafka.sasl_bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": SCRAM_MECHANISM,
        **credentials,
    }
    exporter = Exporter(tmp_path, props, env)
    try:
        exporter.wait_polled_after(0.0)
    finally:
        exporter.stop()
    wrong = {**env, "KAFKA_JAAS": SCRAM_JAAS.format(password="wrong"), "KAFKA_PASSWORD": "wrong"}
    refused = Exporter(tmp_path, props, wrong)
    try:
        wait_until(
            lambda: "poll failed" in refused.process.log_text(),
            timeout=60,
            what="a poll with the wrong SCRAM password failing",
        )
        assert "poll ok" not in refused.process.log_text()
    finally:
        refused.stop()


class Exporter:
    """`kvq-exporter` as a process with `props` (kafka.admin.* without the prefix) and `env`."""

    def __init__(
        self, tmp_path: Path, props: dict[str, str], env: dict[str, str], prefix: str = A
    ) -> None:
        lines = {
            **{prefix + key: value for key, value in props.items()},
            P + "storage.per.volume.limit.min.available.ratio": "0.01",
            P + "storage.check.interval": "PT1S",
            "kvq.exporter.request.timeout": "PT3S",
            "kvq.cluster.name": "strimzi",
        }
        config = tmp_path / f"exporter-{time.monotonic_ns()}.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in lines.items()))
        self.port = server_port()
        argv = [sys.executable, "-m", "exporter.cli", "--config", str(config)]
        self.process = ManagedProcess(
            [*argv, "--listen", f"127.0.0.1:{self.port}"],
            config.with_suffix(".log"),
            cwd=REPO,
            env=env,
        )

    def last_poll(self) -> float:
        name = "kafka_volume_quota_last_successful_poll_timestamp_seconds"
        try:
            text = requests.get(f"http://127.0.0.1:{self.port}/metrics", timeout=5).text
        except requests.ConnectionError:
            return 0.0
        for line in text.splitlines():
            if line.startswith(name + "{"):
                return float(line.rsplit(" ", 1)[1])
        return 0.0

    def wait_polled_after(self, moment: float) -> None:
        def polled() -> bool:
            if not self.process.running:
                raise AssertionError(f"kvq-exporter exited:\n{self.process.log_text()[-3000:]}")
            return self.last_poll() > moment

        wait_until(polled, timeout=60, what=f"a successful poll after {moment}")

    def stop(self) -> None:
        self.process.stop()


CLUSTER_RESOURCE = ResourcePattern(ResourceType.CLUSTER, "kafka-cluster")


@pytest.fixture
def acls(kafka):
    """kafka-python's admin client as the super user; every ACL removed after the test."""
    admin = KafkaAdminClient(**kafka_python_config(kafka.admin_properties))
    yield admin
    everything = ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY)
    admin.delete_acls([ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY, everything)])
    admin.close()


def only_the_renewed_certificate(admin: KafkaAdminClient, renewed: str, retired: str) -> None:
    """Cluster-wide operations (DescribeLogDirs, quotas) allowed to the principal of the renewed
    certificate only: whoever still connects with the retired one is refused."""
    allow = ACL(
        f"User:CN={renewed}", "*", ACLOperation.ALL, ACLPermissionType.ALLOW, CLUSTER_RESOURCE
    )
    deny = ACL(
        f"User:CN={retired}", "*", ACLOperation.ALL, ACLPermissionType.DENY, CLUSTER_RESOURCE
    )
    assert admin.create_acls([allow, deny])["failed"] == []


def log_dirs_refused(props: dict[str, str], timeout_seconds: float = 10) -> bool:
    client = KafkaClusterClient(props, timeout_seconds=timeout_seconds)
    try:
        return isinstance(client.describe_log_dirs([0])[0], Exception)
    finally:
        client.close()


def retire(user_dir: Path, strimzi: Strimzi, tmp_path: Path, kafka: KafkaCluster) -> dict[str, str]:
    """Settings that keep the current certificate and CA (copies): a client that never renews."""
    kept = tmp_path / "kept"
    kept.mkdir()
    for source in ("user.p12", "user.password"):
        (kept / source).write_bytes((user_dir / source).read_bytes())
    for source in ("ca.p12", "ca.password"):
        (kept / source).write_bytes((strimzi.ca_dir / source).read_bytes())
    return pkcs12(kafka, strimzi, kept, ca_dir=kept)


def test_certificates_renewed_by_strimzi_are_used_without_a_restart(
    kafka, strimzi, acls, tmp_path, caplog
):
    caplog.set_level(logging.INFO, logger="kvq.kafka")
    user_dir = strimzi.user("kvq-2025")
    client = KafkaClusterClient(pkcs12(kafka, strimzi, user_dir), timeout_seconds=10)
    try:
        assert described(client, 0)
        retired = retire(user_dir, strimzi, tmp_path, kafka)
        strimzi.renew("kvq-2025", cn="kvq-2026")
        only_the_renewed_certificate(acls, renewed="kvq-2026", retired="kvq-2025")
        wait_until(lambda: log_dirs_refused(retired), what="the retired certificate refused")
        assert described(client, 0)  # the same client, on the renewed certificate
    finally:
        client.close()
    reloads = [r for r in caplog.records if r.getMessage().startswith(RELOADED)]
    assert len(reloads) == 1 and str(user_dir / "user.p12") in reloads[0].getMessage()


def reloads_per_swapped_secret(log: str) -> bool:
    """A renewal swaps two Secrets (the cluster CA's, the user's), each at once: a client that
    looks between the two swaps reloads twice, otherwise once; never more, never not at all."""
    return 1 <= log.count(RELOADED) <= 2


def renew_and_retire(kafka, strimzi, acls, tmp_path, user: str) -> None:
    """Strimzi renews the CAs and `user`'s certificate; from then on only the renewed one works."""
    retired = retire(strimzi.root / user, strimzi, tmp_path, kafka)
    strimzi.renew(user, cn=f"{user}-renewed")
    only_the_renewed_certificate(acls, renewed=f"{user}-renewed", retired=user)
    wait_until(lambda: log_dirs_refused(retired), what="the retired certificate refused")


def test_the_exporter_polls_on_through_a_renewal(kafka, strimzi, acls, tmp_path):
    user_dir = strimzi.user("kvq-exporter")
    exporter = Exporter(tmp_path, pkcs12(kafka, strimzi, user_dir), {})
    try:
        exporter.wait_polled_after(0.0)
        renew_and_retire(kafka, strimzi, acls, tmp_path, "kvq-exporter")
        exporter.wait_polled_after(time.time())
        log = exporter.process.log_text()
    finally:
        exporter.stop()
    assert reloads_per_swapped_secret(log), log[-3000:]


def test_the_enforcer_throttles_and_restores_through_a_renewal(kafka, strimzi, acls, tmp_path):
    from tests.enforcer.test_integration import Enforcer, firing, resolved

    user_dir = strimzi.user("kvq-enforcer")
    props = pkcs12(kafka, strimzi, user_dir)
    tls = {A + key: value for key, value in props.items() if key != "bootstrap.servers"}
    with kafka_quotas_left_as_found(kafka) as backend:
        enforcer = Enforcer(tmp_path, {"bootstrap.servers": kafka.tls_bootstrap}, tls).start()
        try:
            status, body = enforcer.post(firing(0.5))
            assert status == 200, body
            assert backend.quotas() == {key(user=None): {"producer_byte_rate": 524288.0}}
            renew_and_retire(kafka, strimzi, acls, tmp_path, "kvq-enforcer")
            status, body = enforcer.post(resolved())
            assert status == 200, body
            assert backend.quotas() == {}
            log = enforcer.process.log_text()
        finally:
            enforcer.stop()
    assert reloads_per_swapped_secret(log), log[-3000:]


def test_renewed_files_that_cannot_be_used_leave_the_current_ones_in_place(
    kafka, strimzi, tmp_path, caplog
):
    """A password given as it was at start (an environment variable does not change in a running
    pod) does not open the renewed store: one warning, and the client goes on with what it has."""
    user_dir = strimzi.user("kvq-literal")
    props = pkcs12(kafka, strimzi, user_dir)
    props["ssl.keystore.password"] = (user_dir / "user.password").read_text()
    props["ssl.truststore.password"] = (strimzi.ca_dir / "ca.password").read_text()
    client = KafkaClusterClient(props, timeout_seconds=10)
    try:
        assert described(client, 0)
        strimzi.renew("kvq-literal", cn="kvq-literal")
        assert described(client, 0)
    finally:
        client.close()
    (warning,) = [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and "TLS" in r.getMessage()
    ]
    assert warning.startswith("TLS files changed (") and "kept the previous ones" in warning
    assert f"kafka.admin.ssl.keystore.location={user_dir}/user.p12: cannot open it" in warning
    assert props["ssl.keystore.password"] not in warning


def run_documented(
    tmp_path: Path,
    snippet: str,
    properties: str,
    secrets_by_name: dict[str, dict[str, bytes]],
    bootstrap: str,
) -> None:
    """docs/strimzi.md's pod snippet and properties as shown: each Secret's items projected at
    its mountPath (under `tmp_path`), each env variable from its secretKeyRef, the properties with
    /etc/kvq under `tmp_path` and `bootstrap` for my-cluster-kafka-bootstrap; the exporter polls."""
    (pod,) = [d for d in yaml.safe_load_all(snippet) if d]
    (container,) = pod["containers"]
    volumes = {volume["name"]: volume["secret"] for volume in pod["volumes"]}
    for mount in container.get("volumeMounts", []):
        secret = volumes[mount["name"]]
        keys = secrets_by_name[secret["secretName"]]
        items = {item["path"]: keys[item["key"]] for item in secret["items"]}
        project_secret(tmp_path / mount["mountPath"].lstrip("/"), items)
    env = {}
    for variable in container.get("env", []):
        ref = variable["valueFrom"]["secretKeyRef"]
        env[variable["name"]] = secrets_by_name[ref["name"]][ref["key"]].decode()
    text = properties.replace("/etc/kvq/", f"{tmp_path}/etc/kvq/")
    lines = parse_properties(re.sub(r"my-cluster-kafka-bootstrap:\d+", bootstrap, text))
    exporter = Exporter(tmp_path, lines, env, prefix="")
    try:
        exporter.wait_polled_after(0.0)
    finally:
        exporter.stop()


def test_the_documented_pkcs12_setup_runs_as_shown(kafka, strimzi, tmp_path):
    strimzi.user("kvq-exporter")
    run_documented(
        tmp_path,
        block(STRIMZI_PAGE, "{key: user.p12, path: user.p12}").text,
        block(STRIMZI_PAGE, "ssl.keystore.type=PKCS12").text,
        strimzi.secrets,
        kafka.tls_bootstrap,
    )


def test_the_documented_scram_setup_runs_as_shown(kafka, strimzi, tmp_path):
    """A scram-sha-512 KafkaUser's Secret: `password` and `sasl.jaas.config`, as Strimzi writes
    them (KafkaUserModel), for the user kvq-exporter of the cluster."""
    password = kafka.users["kvq-exporter"]
    jaas = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="kvq-exporter" password="{password}";'
    )
    scram_user = {"password": password.encode(), "sasl.jaas.config": jaas.encode()}
    run_documented(
        tmp_path,
        block(STRIMZI_PAGE, "key: sasl.jaas.config").text,
        block(STRIMZI_PAGE, "sasl.mechanism=SCRAM-SHA-512").text,
        {CA_SECRET: strimzi.secrets[CA_SECRET], "kvq-exporter": scram_user},
        kafka.sasl_tls_bootstrap,
    )
