"""OAUTHBEARER settings as users write them (Java, Strimzi, librdkafka), what --check-config says
about them, and the token provider against a real HTTP(S) token endpoint (devkit.oauth_server)."""

from __future__ import annotations

import pytest

from devkit.oauth_server import OAuthServer
from devkit.tls_certificates import make_pki
from kvq.kafka.client_settings import kafka_python_config, librdkafka_config, problems
from kvq.kafka.oauth import (
    OAuthTokenError,
    OidcClient,
    _token_of,
    fetch_token,
)
from kvq.kafka.oauth_provider import ClientCredentialsTokenProvider
from kvq.settings.config import secret_values, shown_value
from kvq.settings.redaction import redact

SECRET = "s3cr3t-of-kvq"
MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
BASE = {
    "bootstrap.servers": "kafka-0:9092",
    "security.protocol": "SASL_PLAINTEXT",
    "sasl.mechanism": "OAUTHBEARER",
}
TOKEN_URL = "https://idp.example.com/realms/kafka/protocol/openid-connect/token"
JAVA = BASE | {
    "sasl.login.callback.handler.class": (
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
    ),
    "sasl.oauthbearer.token.endpoint.url": TOKEN_URL,
    "sasl.jaas.config": f'{MODULE} required clientId="kvq" clientSecret="{SECRET}" scope="kafka";',
}
STRIMZI = BASE | {
    "sasl.login.callback.handler.class": "io.strimzi.kafka.oauth.client."
    "JaasClientOauthLoginCallbackHandler",
    "sasl.jaas.config": f'{MODULE} required oauth.client.id="kvq" oauth.client.secret="{SECRET}" '
    f'oauth.token.endpoint.uri="{TOKEN_URL}" oauth.scope="kafka" ;',
}
LIBRDKAFKA = BASE | {
    "sasl.oauthbearer.method": "oidc",
    "sasl.oauthbearer.client.id": "kvq",
    "sasl.oauthbearer.client.secret": SECRET,
    "sasl.oauthbearer.token.endpoint.url": TOKEN_URL,
    "sasl.oauthbearer.scope": "kafka",
}
JAVA_41 = BASE | {  # Kafka 4.1's own names, no JAAS options
    "sasl.oauthbearer.client.credentials.client.id": "kvq",
    "sasl.oauthbearer.client.credentials.client.secret": SECRET,
    "sasl.oauthbearer.token.endpoint.url": TOKEN_URL,
    "sasl.oauthbearer.scope": "kafka",
    "sasl.jaas.config": f"{MODULE} required ;",
}


@pytest.mark.parametrize("props", [JAVA, STRIMZI, LIBRDKAFKA, JAVA_41], ids=lambda p: str(len(p)))
def test_every_style_becomes_librdkafka_oidc_and_a_kafka_python_token_provider(props):
    assert problems(props, librdkafka=True) == []  # librdkafka itself accepts the translation
    rd = librdkafka_config(props)
    assert {k: v for k, v in rd.items() if k.startswith("sasl.")} == {
        "sasl.mechanisms": "OAUTHBEARER",
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.client.id": "kvq",
        "sasl.oauthbearer.client.secret": SECRET,
        "sasl.oauthbearer.token.endpoint.url": TOKEN_URL,
        "sasl.oauthbearer.scope": "kafka",
    }
    provider = kafka_python_config(props)["sasl_oauth_token_provider"]
    assert isinstance(provider, ClientCredentialsTokenProvider)
    assert provider.client == OidcClient("kvq", SECRET, TOKEN_URL, "kafka")
    assert SECRET not in repr(provider.client)


@pytest.mark.parametrize("props", [JAVA, STRIMZI, LIBRDKAFKA, JAVA_41], ids=lambda p: str(len(p)))
def test_the_client_secret_is_masked_wherever_it_is_written(props):
    secrets = secret_values(props)
    written = " ".join(f"{k}={v}" for k, v in props.items())
    assert SECRET not in redact(written, secrets)
    for key, value in props.items():
        assert SECRET not in shown_value(key, value)


CASES = {
    "nothing but the mechanism": (
        BASE,
        ["needs OIDC client credentials: set kafka.admin.sasl.oauthbearer.method=oidc"],
    ),
    "no id, no secret, no endpoint": (
        BASE | {"sasl.jaas.config": f"{MODULE} required ;"},
        [
            "kafka.admin.sasl.oauthbearer.client.id is required with OAUTHBEARER",
            "kafka.admin.sasl.oauthbearer.client.secret is required with OAUTHBEARER",
            "kafka.admin.sasl.oauthbearer.token.endpoint.url is required with OAUTHBEARER",
        ],
    ),
    "a URL without a scheme": (
        LIBRDKAFKA | {"sasl.oauthbearer.token.endpoint.url": "idp.example.com/token"},
        ["token.endpoint.url=idp.example.com/token: must be an http:// or https:// URL"],
    ),
    "a port that is no number": (
        LIBRDKAFKA | {"sasl.oauthbearer.token.endpoint.url": "https://idp:80x/token"},
        ["token.endpoint.url=https://idp:80x/token: not a URL"],
    ),
    "another grant": (
        LIBRDKAFKA | {"sasl.oauthbearer.grant.type": "urn:ietf:params:oauth:grant-type:jwt-bearer"},
        ["sasl.oauthbearer.grant.type=urn:ietf:params:oauth:grant-type:jwt-bearer: only "],
    ),
    "Strimzi's refresh token": (
        STRIMZI
        | {"sasl.jaas.config": STRIMZI["sasl.jaas.config"][:-1] + 'oauth.refresh.token="r";'},
        ["oauth.refresh.token (a refresh token) is not supported"],
    ),
    "unsecured tokens": (
        BASE | {"sasl.jaas.config": f'{MODULE} required unsecuredLoginStringClaim_sub="me";'},
        ["unsecured OAUTHBEARER tokens (unsecuredLogin*) are for development and not supported"],
    ),
    "a Java class of one's own": (
        JAVA | {"sasl.login.callback.handler.class": "com.example.MyLogin"},
        ["sasl.login.callback.handler.class=com.example.MyLogin: a Java class cannot run in kvq"],
    ),
    "a PKCS12 truststore for the endpoint": (
        BASE
        | {
            "sasl.jaas.config": f'{MODULE} required oauth.client.id="kvq" oauth.client.secret="x" '
            f'oauth.token.endpoint.uri="{TOKEN_URL}" oauth.ssl.truststore.location="/ca.p12" '
            'oauth.ssl.truststore.type="PKCS12";'
        },
        ["oauth.ssl.truststore.location is a PKCS12 store; kvq reads the token endpoint's CA as"],
    ),
    "an endpoint CA that is not there": (
        LIBRDKAFKA | {"https.ca.location": "/nowhere/ca.crt"},
        ["kafka.admin.https.ca.location=/nowhere/ca.crt: no readable file there"],
    ),
}


@pytest.mark.parametrize("name", CASES)
def test_check_config_names_what_start_up_would_fail_on(name):
    props, expected = CASES[name]
    for librdkafka in (False, True):  # the enforcer's check, the exporter's
        found = problems(props, librdkafka=librdkafka)
        for text in expected:
            assert any(text in problem for problem in found), (text, found)
        assert len(found) == len(expected), found
        assert not any(SECRET in problem for problem in found)


def test_gssapi_is_refused_with_what_it_would_need():
    props = BASE | {"sasl.mechanism": "GSSAPI", "sasl.kerberos.service.name": "kafka"}
    (problem,) = problems(props, librdkafka=True)
    assert problem.startswith("kafka.admin.sasl.mechanism=GSSAPI: Kerberos needs the Python")
    assert "untested" in problem
    java = props | {
        "sasl.jaas.config": "com.sun.security.auth.module.Krb5LoginModule required "
        'useKeyTab=true keyTab="/etc/kvq.keytab" principal="kvq@EXAMPLE.COM";'
    }
    (problem,) = problems(java, librdkafka=False)
    assert "Krb5LoginModule (keyTab, principal) is Java's" in problem
    assert "KRB5_CLIENT_KTNAME" in problem


# ---- the token provider against a real token endpoint ----------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_token_is_kept_and_replaced_at_80_percent_of_its_lifetime():
    with OAuthServer({"kvq": SECRET}, expires_in=100) as idp:
        clock = Clock()
        provider = ClientCredentialsTokenProvider(OidcClient("kvq", SECRET, idp.token_url), clock)
        first = provider.token()
        clock.now += 79
        assert provider.token() == first
        assert idp.issued == ["kvq"]
        clock.now += 2  # 81 s of 100
        second = provider.token()
        assert second != first
        assert idp.issued == ["kvq", "kvq"]


def test_the_kept_token_serves_until_it_expires_when_the_endpoint_fails():
    with OAuthServer({"kvq": SECRET}, expires_in=100) as idp:
        clock = Clock()
        provider = ClientCredentialsTokenProvider(OidcClient("kvq", SECRET, idp.token_url), clock)
        first = provider.token()
        idp.clients["kvq"] = "rotated"
        clock.now += 90
        assert provider.token() == first
        assert "invalid_client" in (provider.last_error or "")
        clock.now += 11
        with pytest.raises(OAuthTokenError, match="refused client 'kvq': HTTP 401"):
            provider.token()


def test_a_wrong_secret_is_reported_with_the_endpoint_and_the_answer_never_the_secret():
    with OAuthServer({"kvq": "right"}) as idp, pytest.raises(OAuthTokenError) as failure:
        fetch_token(OidcClient("kvq", SECRET, idp.token_url))
    message = str(failure.value)
    assert message == (
        f"OAUTHBEARER token endpoint {idp.token_url} refused client 'kvq': HTTP 401: "
        "invalid_client (Invalid client secret)"
    )


def test_an_endpoint_that_is_down_is_reported():
    with OAuthServer({"kvq": SECRET}) as idp:
        url = idp.token_url
    with pytest.raises(OAuthTokenError, match=f"token endpoint {url} cannot be reached"):
        fetch_token(OidcClient("kvq", SECRET, url), timeout=2)


def test_https_trusts_kafkas_ca_or_the_endpoints_own(tmp_path):
    pki = make_pki(tmp_path / "pki")
    with OAuthServer({"kvq": SECRET}, tls=pki) as idp:
        url = idp.https_token_url
        assert url is not None and url.startswith("https://")
        with pytest.raises(OAuthTokenError, match="CERTIFICATE_VERIFY_FAILED"):
            fetch_token(OidcClient("kvq", SECRET, url))  # the system's CAs only
        for props in (
            LIBRDKAFKA | {"ssl.ca.location": str(pki.ca)},  # Kafka's CA, besides the system's
            LIBRDKAFKA | {"https.ca.location": str(pki.ca)},  # the endpoint's own
        ):
            props = props | {"sasl.oauthbearer.token.endpoint.url": url}
            assert problems(props, librdkafka=True) == []
            provider = kafka_python_config(props)["sasl_oauth_token_provider"]
            assert provider.token().count(".") == 2  # a JWT
    assert idp.issued == ["kvq", "kvq"]


def test_a_token_lives_until_expires_in_or_its_jwt_exp_whichever_is_sooner():
    with OAuthServer({"kvq": SECRET}, expires_in=120) as idp:
        token, _ = idp.issue("kvq")
    for answer in ({"access_token": token}, {"access_token": token, "expires_in": 300}):
        assert 118 < _token_of(answer, 0.0, "endpoint").lifetime <= 120
    opaque = {"access_token": "opaque", "expires_in": 300}
    assert _token_of(opaque, 0.0, "endpoint").lifetime == 300
    with pytest.raises(OAuthTokenError, match="without a lifetime"):
        _token_of({"access_token": "opaque"}, 0.0, "endpoint")
