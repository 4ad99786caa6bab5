"""kafka.admin.* (Java names) translated for librdkafka and kafka-python."""

import pytest

from devkit.tls_certificates import CertificateAuthority, java_truststore
from kvq.kafka.client_settings import KafkaSettingsError, kafka_python_config, librdkafka_config

JAAS = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    'username="quota" password="pa55";'
)


def test_plaintext_bootstrap_is_split_for_kafka_python():
    props = {"bootstrap.servers": "a:9092, b:9092", "request.timeout.ms": "5000"}
    assert kafka_python_config(props) == {
        "bootstrap_servers": ["a:9092", "b:9092"],
        "request_timeout_ms": 5000,
    }
    assert librdkafka_config(props) == props


def test_sasl_jaas_config_becomes_username_and_password():
    props = {
        "bootstrap.servers": "a:9093",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": JAAS,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": "/certs/ca.pem",
    }
    rd = librdkafka_config(props)
    assert rd["sasl.mechanisms"] == "SCRAM-SHA-512"
    assert (rd["sasl.username"], rd["sasl.password"]) == ("quota", "pa55")
    assert rd["ssl.ca.location"] == "/certs/ca.pem"
    assert "sasl.jaas.config" not in rd and "ssl.truststore.location" not in rd
    kp = kafka_python_config(props)
    assert kp["sasl_mechanism"] == "SCRAM-SHA-512"
    assert (kp["sasl_plain_username"], kp["sasl_plain_password"]) == ("quota", "pa55")
    assert kp["ssl_cafile"] == "/certs/ca.pem"
    assert kp["ssl_check_hostname"] is True


def test_jks_store_is_refused_with_how_to_fix(tmp_path):
    store = tmp_path / "truststore.jks"
    store.write_bytes(java_truststore([CertificateAuthority.new()], "changeit", kind="JKS"))
    props = {"ssl.truststore.location": str(store), "ssl.truststore.type": "JKS"}
    with pytest.raises(KafkaSettingsError) as refused:
        librdkafka_config(props)
    assert str(refused.value) == (
        f"kafka.admin.ssl.truststore.location={store}: a JKS store, which neither librdkafka nor "
        "kafka-python can read; use Strimzi's PKCS12 store (ca.p12 with ca.password, "
        "ssl.truststore.type=PKCS12) or its PEM files, or convert this one: keytool "
        f"-importkeystore -srckeystore {store} -destkeystore store.p12 -deststoretype PKCS12"
    )


def test_disabled_hostname_verification_is_kept():
    props = {"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": ""}
    assert kafka_python_config(props)["ssl_check_hostname"] is False
    assert librdkafka_config(props)["ssl.endpoint.identification.algorithm"] == "none"


def test_the_security_protocol_is_case_insensitive_as_in_librdkafka():
    assert kafka_python_config({"security.protocol": "sasl_ssl"})["security_protocol"] == "SASL_SSL"
