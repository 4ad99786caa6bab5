"""SASL/OAUTHBEARER against real Kafka validating tokens itself (OAuthBearerValidatorCallbackHandler
and a JWKS this test serves): the exporter polls, the enforcer's client describes and alters
quotas, tokens are replaced before they expire, a wrong secret is told as the endpoint said it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
import yaml
from confluent_kafka.admin import AdminClient

from devkit.kafka_cluster import ADMIN, ALLOWED_OAUTH_URLS, KafkaCluster, OAuthListener
from devkit.oauth_server import OAuthServer
from devkit.processes import wait_until
from devkit.tls_certificates import make_pki
from enforcer.quota_client import KafkaQuotaClient
from enforcer.quota_plan import Change
from enforcer.settings import EnforcerSettings
from exporter.cluster_client import ClusterError, KafkaClusterClient
from kvq.kafka.client_settings import librdkafka_config
from kvq.kafka.quota_entity import QuotaEntity
from tests.docs.blocks import block, localize

pytestmark = pytest.mark.paced
"""Paced: most of its time waits for tokens to expire and be replaced, with little CPU."""

CLIENT, SECRET = "kvq", "kvq-oauth-secret"
MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
REAUTH_MS = 2000
"""The brokers ask OAUTH clients to authenticate again this often (and never past their token's
expiry): a client that kept an expired token would be cut off."""
P = "client.quota.callback.static."


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """One CA for the brokers' OAUTH listener (SASL_SSL) and the token endpoint's HTTPS."""
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def idp(pki):
    with OAuthServer({CLIENT: SECRET}, expires_in=300, tls=pki) as server:
        yield server


@pytest.fixture(scope="module")
def kafka(idp, pki, tmp_path_factory, kafka_dist):
    with KafkaCluster(
        tmp_path_factory.mktemp("kafka-oauth"),
        nodes=1,
        log_dir_bytes=16 << 20,
        dist=kafka_dist,
        oauth=OAuthListener(idp.jwks_url, reauth_ms=REAUTH_MS, tls=pki),
        broker_properties={"super.users": f"User:{ADMIN};User:{CLIENT}"},  # sub = the client id
    ) as cluster:
        yield cluster


def over_tls(kafka, pki):
    return {
        "bootstrap.servers": kafka.oauth_bootstrap,
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(pki.ca),
        "sasl.mechanism": "OAUTHBEARER",
    }


def java_style(kafka, pki, token_url, secret=SECRET):
    """Kafka's Java client settings; the token endpoint's certificate is checked against the
    system's CAs and Kafka's (ssl.ca.location)."""
    return over_tls(kafka, pki) | {
        "sasl.login.callback.handler.class": (
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
        ),
        "sasl.oauthbearer.token.endpoint.url": token_url,
        "sasl.jaas.config": f'{MODULE} required clientId="{CLIENT}" clientSecret="{secret}" '
        'scope="kafka";',
    }


def strimzi_style(kafka, pki, idp):
    """Strimzi's OAuth client options, with the token endpoint's own CA as a PEM truststore."""
    return over_tls(kafka, pki) | {
        "sasl.login.callback.handler.class": (
            "io.strimzi.kafka.oauth.client.JaasClientOauthLoginCallbackHandler"
        ),
        "sasl.jaas.config": f'{MODULE} required oauth.client.id="{CLIENT}" '
        f'oauth.client.secret="{SECRET}" oauth.token.endpoint.uri="{idp.https_token_url}" '
        f'oauth.ssl.truststore.location="{pki.ca}" oauth.ssl.truststore.type="PEM" ;',
    }


def librdkafka_style(kafka, pki, idp):
    return over_tls(kafka, pki) | {
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.client.id": CLIENT,
        "sasl.oauthbearer.client.secret": SECRET,
        "sasl.oauthbearer.token.endpoint.url": idp.token_url,
    }


def test_the_exporter_polls_over_oauthbearer(kafka, idp, pki, tmp_path):
    config = tmp_path / "kvq.properties"
    lines = [
        f"{P}kafka.admin.{key}={value}"
        for key, value in java_style(kafka, pki, idp.https_token_url).items()
    ]
    lines.append(f"{P}storage.per.volume.limit.min.available.ratio=0.05")
    config.write_text("\n".join(lines) + "\n")
    issued = len(idp.issued)
    done = subprocess.run(
        [sys.executable, "-m", "exporter.cli", "--config", str(config), "--once"]
        + ["--log.level", "debug"],  # kafka-python logs its whole configuration at debug
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "OAUTHBEARER token for client 'kvq'" in done.stderr
    assert '"alg":' not in done.stderr and "eyJ" not in done.stderr  # no token either
    observation = json.loads(done.stdout)["observation"]
    assert observation["outcome"] == "success"
    assert observation["active_brokers"] == [0]
    assert {d["path"] for d in observation["log_dirs"]} == {str(p) for p in kafka.log_dirs(0)}
    assert len(idp.issued) > issued  # it logged in with a token of its own
    assert SECRET not in done.stdout + done.stderr


def test_the_enforcers_client_describes_and_alters_quotas_over_oauthbearer(kafka, idp, pki):
    client = KafkaQuotaClient(strimzi_style(kafka, pki, idp))
    alice = QuotaEntity.user("alice")
    try:
        client.alter([Change(alice, "producer_byte_rate", 1024.0)])
        wanted = {"producer_byte_rate": 1024.0}
        wait_until(lambda: client.describe().get(alice) == wanted, 10, what="alice's quota")
        client.alter([Change(alice, "producer_byte_rate", None)])
        wait_until(lambda: alice not in client.describe(), 10, what="alice's quota removed")
    finally:
        client.close()


def test_tokens_are_replaced_before_they_expire(kafka, idp, pki):
    # Replaced after at most 16 s, when at least 4 s (two of the broker's 2 s sessions) are
    # left: no session is cut short by the token's expiry. A shorter token raced: kafka-python
    # re-authenticates at 85-95 % of its session, at least 1 s, so a session the old token's
    # last second capped was cut off when the machine was busy.
    idp.expires_in = 20
    client = KafkaClusterClient(librdkafka_style(kafka, pki, idp), timeout_seconds=5)
    issued = len(idp.issued)
    failures: list[Exception] = []

    def polled_with_three_more_tokens() -> bool:
        try:
            assert [b.broker_id for b in client.active_brokers()] == [0]
            answer = client.describe_log_dirs([0])[0]
            if isinstance(answer, Exception):
                raise answer
        except Exception as exc:  # noqa: BLE001 - every failure is reported below
            failures.append(exc)
        return len(idp.issued) - issued >= 3

    try:
        wait_until(polled_with_three_more_tokens, 120, 0.5, "three tokens replaced")
    finally:
        idp.expires_in = 300
        client.close()
    assert failures == []  # never cut off: each re-authentication had a valid token
    assert idp.refused == []


def test_a_wrong_secret_fails_with_the_token_endpoints_answer(kafka, idp, pki):
    client = KafkaClusterClient(
        java_style(kafka, pki, idp.https_token_url, secret="not-the-secret"), timeout_seconds=2
    )
    try:
        with pytest.raises(ClusterError) as failure:
            client.active_brokers()
    finally:
        client.close()
    message = str(failure.value)
    assert (
        f"OAUTHBEARER token endpoint {idp.https_token_url} refused client 'kvq': HTTP 401: "
        "invalid_client (Invalid client secret)" in message
    )
    assert "not-the-secret" not in message
    assert CLIENT in idp.refused


def test_librdkafka_logs_in_with_the_translated_settings(kafka, idp, pki):
    """The Java settings as librdkafka's built-in OIDC login (what librdkafka_config gives;
    librdkafka checks an HTTPS token endpoint against https.ca.location only, so plain HTTP)."""
    issued = len(idp.issued)
    admin = AdminClient(librdkafka_config(java_style(kafka, pki, idp.token_url)))
    cluster = admin.describe_cluster(request_timeout=20).result(timeout=30)
    assert [node.id for node in cluster.nodes] == [0]
    assert len(idp.issued) > issued


DOCUMENTED = {
    "docs/configuration.md": "sasl.mechanism=OAUTHBEARER",
    "docs/strimzi.md": "oauth.client.id=",
}
DOCUMENTED_TOKEN_URL = re.compile(r"https://[\w.-]+/realms/kafka/protocol/openid-connect/token")


@pytest.mark.parametrize("doc", DOCUMENTED)
def test_the_documented_settings_run_against_kafka(kafka, idp, pki, tmp_path, doc):
    """The docs' OAUTHBEARER settings as shown, but for the addresses and the files' places:
    `kvq-exporter --once` observes the cluster, the enforcer's client reads its quotas."""
    root = tmp_path / "root"
    text = localize(block(doc, DOCUMENTED[doc]).text, root)
    for ca in (root / "etc").rglob("ca.*"):  # the CA that signed the brokers' and the endpoint's
        ca.write_bytes(pki.ca.read_bytes())
    text = re.sub(r"(bootstrap\.servers=).*", rf"\g<1>{kafka.oauth_bootstrap}", text)
    text = DOCUMENTED_TOKEN_URL.sub(idp.https_token_url, text)
    if "min.available" not in text:  # strimzi.md's lines are added to a file that has a limit
        text += f"{P}storage.per.volume.limit.min.available.ratio=0.05\n"
    config = tmp_path / "kvq.properties"
    config.write_text(text)
    environ = {"KVQ_OAUTH_CLIENT_SECRET": SECRET}
    done = subprocess.run(
        [sys.executable, "-m", "exporter.cli", "--config", str(config), "--once"],
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ | environ,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["observation"]["active_brokers"] == [0]
    settings = EnforcerSettings.load(config, environ=environ)
    client = KafkaQuotaClient(settings.config.admin_properties)
    try:
        assert isinstance(client.describe(), dict)
    finally:
        client.close()


def test_the_documented_strimzi_listener_is_the_one_kafka_runs_here(kafka, idp):
    """strimzi.md's listenerConfig, as Strimzi writes it (`listener.name.<name>.<key>`), is the
    OAUTH listener of these tests (but for the JWKS's address and the re-authentication period),
    and its system property is the one the launcher sets."""
    (kafka_spec,) = yaml.safe_load_all(block("docs/strimzi.md", "listenerConfig:").text)
    (listener,) = kafka_spec["listeners"]
    documented = {
        f"listener.name.{listener['name']}.{key}": str(value)
        for key, value in listener["authentication"]["listenerConfig"].items()
    }
    assert listener["authentication"]["sasl"] and listener["tls"]  # SASL_SSL, as here
    documented_jwks = documented[
        "listener.name.oauth.oauthbearer.sasl.oauthbearer.jwks.endpoint.url"
    ]
    running = kafka.oauth.broker_properties()
    for key, value in documented.items():
        if key.endswith("connections.max.reauth.ms"):
            assert key in running
        else:
            assert running[key].strip() == value.replace(documented_jwks, idp.jwks_url).strip(), key
    (system_property,) = kafka_spec["jvmOptions"]["javaSystemProperties"]
    assert (system_property["name"], system_property["value"]) == (
        ALLOWED_OAUTH_URLS,
        documented_jwks,
    )
    assert kafka.oauth.jvm_options == [f"-D{ALLOWED_OAUTH_URLS}={idp.jwks_url}"]
