"""Strimzi's PKCS12 stores read for both clients, the errors they can give (at start and in
`--check-config`, one line each, never the password), and the watch that notices a renewal.
The stores are made as Strimzi makes them (the truststore by keytool); connecting with them to
real Kafka is tests/system/test_strimzi_credentials.py."""

from __future__ import annotations

import os
import ssl
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from devkit.tls_certificates import (
    CertificateAuthority,
    java_truststore,
    project_secret,
    strimzi_ca_secret,
    strimzi_user_secret,
)
from enforcer.cli import main as enforcer_main
from enforcer.settings import EnforcerSettings
from exporter.settings import ExporterSettings
from kvq.kafka.client_settings import kafka_python_config, librdkafka_config, problems
from kvq.kafka.tls_stores import FileWatch
from tests.properties_support import MINIMAL, config_errors

A = "client.quota.callback.static.kafka.admin."
USER_PASSWORD = "Us3r-pa55word"
CA_PASSWORD = "Ca-pa55word"


@pytest.fixture(scope="module")
def secrets(tmp_path_factory):
    """The KafkaUser's and the cluster CA's Secrets as files: user.p12, ca.p12, the PEM keys."""
    root = tmp_path_factory.mktemp("strimzi")
    cluster_ca, clients_ca = CertificateAuthority.new(), CertificateAuthority.new("clients CA")
    user = strimzi_user_secret(clients_ca.issue("kvq"), clients_ca, USER_PASSWORD)
    for name, content in {**user, **strimzi_ca_secret([cluster_ca], CA_PASSWORD)}.items():
        (root / name).write_bytes(content)
    (root / "truststore.jks").write_bytes(java_truststore([cluster_ca], CA_PASSWORD, kind="JKS"))
    return root


def strimzi_pkcs12(root, **changes):
    props = {
        "bootstrap.servers": "kafka:9093",
        "security.protocol": "SSL",
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": str(root / "user.p12"),
        "ssl.keystore.password": USER_PASSWORD,
        "ssl.truststore.type": "PKCS12",
        "ssl.truststore.location": str(root / "ca.p12"),
        "ssl.truststore.password": CA_PASSWORD,
        **changes,
    }
    return {key: value for key, value in props.items() if value is not None}


def test_pkcs12_stores_become_pem_in_memory_for_librdkafka(secrets):
    config = librdkafka_config({**strimzi_pkcs12(secrets), "ssl.key.password": USER_PASSWORD})
    assert config["ssl.ca.pem"] == (secrets / "ca.crt").read_text()
    assert config["ssl.certificate.pem"].startswith((secrets / "user.crt").read_text())
    assert config["ssl.key.pem"].startswith("-----BEGIN PRIVATE KEY-----")
    assert not [key for key in config if "store" in key or key == "ssl.key.password"]


def test_pkcs12_stores_become_an_ssl_context_for_kafka_python(secrets):
    config = kafka_python_config(strimzi_pkcs12(secrets))
    context = config["ssl_context"]
    assert isinstance(context, ssl.SSLContext)
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    cluster_ca = ((("commonName", "kvq test cluster CA"),),)
    assert [ca["subject"] for ca in context.get_ca_certs()] == [cluster_ca]
    assert not {"ssl_cafile", "ssl_certfile", "ssl_keyfile", "ssl_password"} & config.keys()


def test_a_p12_file_is_read_as_pkcs12_whatever_type_is_declared_as_java_does(secrets):
    props = strimzi_pkcs12(secrets, **{"ssl.keystore.type": None, "ssl.truststore.type": "JKS"})
    assert problems(props, librdkafka=True) == []


def test_pem_keys_as_strimzi_names_them_pass_the_checks(secrets):
    props = {
        "bootstrap.servers": "kafka:9093",
        "security.protocol": "SSL",
        "ssl.certificate.location": str(secrets / "user.crt"),
        "ssl.key.location": str(secrets / "user.key"),
        "ssl.ca.location": str(secrets / "ca.crt"),
    }
    assert problems(props, librdkafka=True) == []


WRONG_PASSWORD = "not-the-Password"


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        (
            {"ssl.keystore.password": WRONG_PASSWORD},
            "kafka.admin.ssl.keystore.location={root}/user.p12: cannot open it as a PKCS12 store "
            "with kafka.admin.ssl.keystore.password (it is set): a wrong password, or not a "
            "PKCS12 file",
        ),
        (
            {"ssl.truststore.password": None},
            "kafka.admin.ssl.truststore.location={root}/ca.p12: cannot open it as a PKCS12 store "
            "with kafka.admin.ssl.truststore.password (it is not set): a wrong password, or not "
            "a PKCS12 file",
        ),
        (
            {"ssl.keystore.location": "{root}/missing/user.p12"},
            "kafka.admin.ssl.keystore.location={root}/missing/user.p12: no readable file there "
            "(No such file or directory)",
        ),
        (
            {"ssl.keystore.location": "{root}/ca.p12", "ssl.keystore.password": CA_PASSWORD},
            "kafka.admin.ssl.keystore.location={root}/ca.p12: the PKCS12 store holds no private "
            "key and certificate; a keystore is the client's key and certificate (Strimzi's "
            "user.p12), the cluster CA (ca.p12) is a truststore",
        ),
        (
            {"ssl.truststore.location": "{root}/truststore.jks"},
            "kafka.admin.ssl.truststore.location={root}/truststore.jks: a JKS store",
        ),
    ],
    ids=["wrong-password", "no-password", "missing-file", "p12-without-key", "jks"],
)
@pytest.mark.parametrize("app", [ExporterSettings, EnforcerSettings])
def test_a_store_that_cannot_be_read_is_one_clear_line(secrets, app, changes, expected):
    changes = {key: value and value.format(root=secrets) for key, value in changes.items()}
    props = strimzi_pkcs12(secrets, **changes)
    (error,) = config_errors(app, **{A + key: value for key, value in props.items()})
    assert error.startswith(expected.format(root=secrets))
    assert "\n" not in error
    assert USER_PASSWORD not in error and WRONG_PASSWORD not in error


def write_config(tmp_path, secrets, **changes) -> str:
    props = {**MINIMAL, **{A + k: v for k, v in strimzi_pkcs12(secrets, **changes).items()}}
    props[A + "ssl.keystore.password"] = "${env:USER_PASSWORD}"
    path = tmp_path / "kvq.properties"
    path.write_text("".join(f"{key}={value}\n" for key, value in props.items()))
    return str(path)


def test_both_apps_refuse_a_wrong_password_at_start_and_in_check_config(
    secrets, tmp_path, capsys, monkeypatch
):
    config = write_config(tmp_path, secrets)
    monkeypatch.setenv("USER_PASSWORD", WRONG_PASSWORD)
    expected = f"kafka.admin.ssl.keystore.location={secrets}/user.p12: cannot open it"
    for mode in ("--check-config", "--once"):
        exporter = subprocess.run(
            [sys.executable, "-m", "exporter.cli", "--config", config, mode],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert exporter.returncode == 2 and expected in exporter.stderr, exporter.stderr
        assert WRONG_PASSWORD not in exporter.stdout + exporter.stderr
    for mode in (["--check-config"], []):
        with pytest.raises(SystemExit) as exit_code:
            enforcer_main(["--config", config, "--insecure-no-auth", *mode])
        err = capsys.readouterr().err
        assert exit_code.value.code == 2 and expected in err, err
        assert WRONG_PASSWORD not in err
    monkeypatch.setenv("USER_PASSWORD", USER_PASSWORD)
    done = subprocess.run(
        [sys.executable, "-m", "exporter.cli", "--config", config, "--check-config"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert f"{A}ssl.keystore.password=********" in done.stdout


def test_the_watch_sees_a_kubelet_swap_once_and_ignores_the_same_bytes(tmp_path, secrets):
    mounted = tmp_path / "user"
    files = {name: (secrets / name).read_bytes() for name in ("user.p12", "user.password")}
    project_secret(mounted, files)
    watch = FileWatch([str(mounted / "user.p12")])
    assert not watch.changed()
    project_secret(mounted, files)  # Strimzi rewrote the Secret with the same content
    assert not watch.changed()
    ca = CertificateAuthority.new()
    project_secret(mounted, strimzi_user_secret(ca.issue("kvq"), ca, USER_PASSWORD))
    assert watch.changed()
    assert not watch.changed()


def test_a_password_is_read_from_the_secrets_file_each_time_the_settings_are_built(
    tmp_path, secrets
):
    mounted = tmp_path / "user"
    project_secret(
        mounted,
        {"user.p12": (secrets / "user.p12").read_bytes(), "user.password": USER_PASSWORD.encode()},
    )
    props = strimzi_pkcs12(
        secrets,
        **{
            "ssl.keystore.location": str(mounted / "user.p12"),
            "ssl.keystore.password": f"${{directory:{mounted}:user.password}}",
        },
    )
    assert problems(props, librdkafka=False) == []
    project_secret(
        mounted, {"user.p12": (secrets / "user.p12").read_bytes(), "user.password": b"changed"}
    )
    (error,) = problems(props, librdkafka=False)
    assert error.startswith(f"kafka.admin.ssl.keystore.location={mounted}/user.p12: cannot open it")


def test_a_directory_reference_names_the_property_and_the_file_it_cannot_read(secrets):
    missing = f"${{directory:{secrets}:nothing.password}}"
    (error,) = config_errors(
        ExporterSettings, **{A + "sasl.password": missing, A + "sasl.username": "kvq"}
    )
    assert error == (
        f"kafka.admin.sasl.password refers to {secrets}/nothing.password, which cannot be read "
        "(No such file or directory)"
    )
    errors = config_errors(ExporterSettings, **{"kvq.exporter.listen": missing})
    assert "kvq.exporter.listen: ${directory:...} references are read for " in errors[0]


def loads_seen(monkeypatch) -> list[tuple[str, int]]:
    """Every file name SSLContext.load_cert_chain reads, with its mode; it must hold the key
    encrypted."""
    seen: list[tuple[str, int]] = []
    real_load = ssl.SSLContext.load_cert_chain

    def load_cert_chain(context, certfile, *args, **kwargs):
        seen.append((certfile, os.stat(certfile).st_mode & 0o777))
        assert b"ENCRYPTED PRIVATE KEY" in Path(certfile).read_bytes()
        return real_load(context, certfile, *args, **kwargs)

    monkeypatch.setattr(ssl.SSLContext, "load_cert_chain", load_cert_chain)
    return seen


def test_the_key_reaches_kafka_python_through_memory_only(secrets, tmp_path, monkeypatch):
    seen = loads_seen(monkeypatch)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    kafka_python_config(strimzi_pkcs12(secrets))
    ((path, _),) = seen
    assert path.startswith("/proc/self/fd/") and list(tmp_path.iterdir()) == []


def test_without_memfd_the_key_passes_through_a_0600_file_removed_at_once(
    secrets, tmp_path, monkeypatch
):
    """Where the system has no anonymous memory files, the key (encrypted with a one-time
    passphrase) goes through a private temporary file, gone once the context holds it."""
    seen = loads_seen(monkeypatch)
    monkeypatch.delattr(os, "memfd_create")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    assert isinstance(kafka_python_config(strimzi_pkcs12(secrets))["ssl_context"], ssl.SSLContext)
    ((path, mode),) = seen
    assert path.startswith(str(tmp_path)) and mode == 0o600
    assert list(tmp_path.iterdir()) == []


def test_a_pem_file_named_as_a_store_is_read_as_pem(secrets):
    props = {"security.protocol": "SSL", "ssl.truststore.location": str(secrets / "ca.crt")}
    assert librdkafka_config(props)["ssl.ca.location"] == str(secrets / "ca.crt")
