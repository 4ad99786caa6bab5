"""Translate the `kafka.admin.*` properties (Java client names) for librdkafka and kafka-python.

Strimzi users write Java client settings (`security.protocol`, `sasl.jaas.config`,
`ssl.truststore.location`). librdkafka (confluent-kafka) and kafka-python name some of them
differently; this is the one place that knows how. A PKCS12 store becomes PEM text
(kvq.kafka.tls_stores): librdkafka's `ssl.ca.pem` / `ssl.certificate.pem` / `ssl.key.pem`, and an
`ssl_context` for kafka-python. `${directory:DIR:FILE}` references and stores are read each time
a configuration is built, so a client built again after a renewal reads the renewed files.
"""

from __future__ import annotations

import logging
import os
import ssl
from collections.abc import Collection, Mapping
from typing import Any

from kvq.kafka.oauth import (
    JAVA_ONLY_OAUTH_KEYS,
    is_oauthbearer,
    is_oauthbearer_jaas,
    oauthbearer_settings,
    without_token_requests,
)
from kvq.kafka.tls_stores import ClientTls, StoreError, read_pkcs12, ssl_context, store_kind
from kvq.settings.config import JAAS_OPTION, read_directory_references, secret_values
from kvq.settings.redaction import redact

# Java/librdkafka name -> kafka-python keyword (values passed through unchanged).
_KAFKA_PYTHON_NAMES = {
    "bootstrap.servers": "bootstrap_servers",
    "client.id": "client_id",
    "security.protocol": "security_protocol",
    "sasl.mechanism": "sasl_mechanism",
    "sasl.mechanisms": "sasl_mechanism",
    "sasl.username": "sasl_plain_username",
    "sasl.password": "sasl_plain_password",
    "ssl.ca.location": "ssl_cafile",
    "ssl.certificate.location": "ssl_certfile",
    "ssl.key.location": "ssl_keyfile",
    "ssl.key.password": "ssl_password",
    "sasl.kerberos.service.name": "sasl_kerberos_service_name",
}
_KAFKA_PYTHON_INTS = {
    "request.timeout.ms": "request_timeout_ms",
    "connections.max.idle.ms": "connections_max_idle_ms",
    "reconnect.backoff.ms": "reconnect_backoff_ms",
}
_JAVA_INT_MAX = 2**31 - 1
_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_PEM_FILES = {  # kafka-python keyword: (librdkafka name, Java name) of the property it comes from
    "ssl_cafile": ("ssl.ca.location", "ssl.truststore.location"),
    "ssl_certfile": ("ssl.certificate.location", "ssl.keystore.location"),
    "ssl_keyfile": ("ssl.key.location", "ssl.keystore.location"),
}
# Java-only names librdkafka does not know, with their librdkafka equivalents.
_LIBRDKAFKA_NAMES = {"sasl.mechanism": "sasl.mechanisms"}
_JAVA_ONLY = {"sasl.jaas.config", "ssl.truststore.type", "ssl.keystore.type"}

GSSAPI = "GSSAPI"
KRB5_LOGIN_MODULE = "com.sun.security.auth.module.Krb5LoginModule"
_KRB5_JAAS = (
    f"kafka.admin.sasl.jaas.config: {KRB5_LOGIN_MODULE} (keyTab, principal) is Java's; kvq's "
    "Kafka client takes Kerberos credentials from the system's Kerberos library: leave the line "
    "out and provide a ticket cache (kinit) or a client keytab (KRB5_CLIENT_KTNAME)"
)

_SILENT = logging.getLogger("kvq.kafka.settings-check")
_SILENT.addHandler(logging.NullHandler())
_SILENT.propagate = False


class KafkaSettingsError(ValueError):
    """A kafka.admin.* setting that cannot be used by the Python clients."""


def _stores(props: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """Trust and key stores in librdkafka's names: a PEM store by its file, a PKCS12 store read
    into PEM text (ssl.ca.pem, ssl.certificate.pem, ssl.key.pem); a JKS store is refused."""
    out: dict[str, str] = {}
    errors: list[str] = []
    for store in ("truststore", "keystore"):
        location = props.get(f"ssl.{store}.location")
        if location is None:
            continue
        try:
            out.update(_store(props, store, location))
        except StoreError as exc:
            errors.append(str(exc))
    return out, errors


def _store(props: Mapping[str, str], store: str, location: str) -> dict[str, str]:
    prop = f"kafka.admin.ssl.{store}.location"
    keystore = store == "keystore"
    try:
        kind = store_kind(location, props.get(f"ssl.{store}.type"))
    except OSError as exc:
        raise StoreError(f"{prop}={location}: no readable file there ({exc.strerror})") from None
    if kind == "PEM":
        if keystore:
            return {"ssl.certificate.location": location, "ssl.key.location": location}
        return {"ssl.ca.location": location}
    if kind == "JKS":
        strimzi = "user.p12 with user.password" if keystore else "ca.p12 with ca.password"
        raise StoreError(
            f"{prop}={location}: a JKS store, which neither librdkafka nor kafka-python can read; "
            f"use Strimzi's PKCS12 store ({strimzi}, ssl.{store}.type=PKCS12) or its PEM files, "
            f"or convert this one: keytool -importkeystore -srckeystore {location} "
            "-destkeystore store.p12 -deststoretype PKCS12"
        )
    pem = read_pkcs12(location, props.get(f"ssl.{store}.password"), prop, keystore)
    if keystore:
        return {"ssl.certificate.pem": pem.certificates, "ssl.key.pem": pem.key or ""}
    return {"ssl.ca.pem": pem.certificates}


def _jaas_credentials(props: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    jaas = props.get("sasl.jaas.config")
    if not jaas or is_oauthbearer_jaas(jaas):  # an OAuth login: _oauthbearer_translated
        return {}, []
    if jaas.strip().startswith(KRB5_LOGIN_MODULE):
        return {}, [_KRB5_JAAS]
    options = dict(JAAS_OPTION.findall(jaas))
    if "username" not in options or "password" not in options:
        return {}, [
            "kafka.admin.sasl.jaas.config: only PlainLoginModule / ScramLoginModule with "
            'username="..." password="..." can be translated for the Python clients'
        ]
    return {"sasl.username": options["username"], "sasl.password": options["password"]}, []


def _oauthbearer_translated(props: Mapping[str, str], out: dict[str, str]) -> list[str]:
    """OAUTHBEARER settings (Java, Strimzi or librdkafka style) rewritten in `out` to librdkafka's
    OIDC names, Java-only login settings dropped; what cannot be used, as errors."""
    for key in JAVA_ONLY_OAUTH_KEYS:
        out.pop(key, None)
    oauth, errors = oauthbearer_settings(props)
    out.update(oauth)
    return errors


def _integer_errors(props: Mapping[str, str]) -> list[str]:
    errors = []
    for key in sorted(_KAFKA_PYTHON_INTS.keys() & props.keys()):
        text = props[key].strip()
        if not (text.isascii() and text.isdigit() and int(text) <= _JAVA_INT_MAX):
            errors.append(
                f"kafka.admin.{key}={props[key]}: must be a whole number of milliseconds from 0 "
                f"to {_JAVA_INT_MAX} (a Java int, as Kafka's clients define it)"
            )
    return errors


def _translated(props: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """Java-style properties with JAAS and PEM stores rewritten to librdkafka's names, and what
    cannot be translated. `${directory:DIR:FILE}` references and stores are read now."""
    props, file_errors, _ = read_directory_references(props, "kafka.admin.")
    out = {k: v for k, v in props.items() if not k.startswith("ssl.truststore.")}
    out = {k: v for k, v in out.items() if not k.startswith("ssl.keystore.")}
    stores, store_errors = _stores(props)
    credentials, jaas_errors = _jaas_credentials(props)
    out.update(stores)
    if "ssl.key.pem" in stores:  # read from a PKCS12 keystore with its store password
        out.pop("ssl.key.password", None)
    out.update(credentials)
    for key in _JAVA_ONLY:
        out.pop(key, None)
    jaas_errors += _oauthbearer_translated(props, out)
    if props.get("ssl.endpoint.identification.algorithm", None) == "":
        out["ssl.endpoint.identification.algorithm"] = "none"
    return out, file_errors + store_errors + jaas_errors + _integer_errors(props)


def normalized(props: Mapping[str, str]) -> dict[str, str]:
    """Java-style properties with JAAS and PEM stores rewritten to librdkafka's names.

    Raises KafkaSettingsError naming every property that cannot be used.
    """
    out, errors = _translated(props)
    if errors:
        raise KafkaSettingsError("; ".join(errors))
    return out


def problems(props: Mapping[str, str], librdkafka: bool) -> list[str]:
    """Every `kafka.admin.*` setting the clients would refuse at start-up, as messages.

    With `librdkafka`, librdkafka itself checks the translated settings (names, values, readable
    PEM files) by creating a client that has no brokers to connect to.
    """
    translated, errors = _translated(props)
    if not errors:
        errors.extend(_kafka_python_errors(props, _kafka_python_keywords(translated)))
    if not errors:
        try:
            kafka_python_config(props)  # builds the SSL context: the certificate and key must load
        except KafkaSettingsError as exc:
            errors.append(str(exc))
    if not errors:
        errors.extend(_gssapi_errors(props))
    if librdkafka and not errors and not _mechanism_is(props, GSSAPI):
        # the confluent-kafka wheel's librdkafka is built without GSSAPI; kvq's clients are
        # kafka-python's, which _gssapi_errors checks
        errors.extend(_librdkafka_errors(props, translated))
    return errors


def _mechanism_is(props: Mapping[str, str], mechanism: str) -> bool:
    written = props.get("sasl.mechanism", props.get("sasl.mechanisms", ""))
    return written.strip().upper() == mechanism


def _gssapi_errors(props: Mapping[str, str]) -> list[str]:
    """SASL/GSSAPI (Kerberos): kafka-python does it with the Python package gssapi, which kvq
    does not ship (untested: no KDC in the test suite)."""
    if not _mechanism_is(props, GSSAPI):
        return []
    try:
        import gssapi  # noqa: F401 - only whether it loads
    except (ImportError, OSError):
        return [
            "kafka.admin.sasl.mechanism=GSSAPI: Kerberos needs the Python package gssapi and the "
            "system's Kerberos (MIT krb5) libraries, which kvq does not ship; install both to try "
            "it (untested, see docs/configuration.md), or use SCRAM, OAUTHBEARER or TLS"
        ]
    return []


def _kafka_python_errors(props: Mapping[str, str], config: Mapping[str, Any]) -> list[str]:
    """What kafka-python would fail on only when it connects: protocol, mechanism, PEM files."""
    protocol = config.get("security_protocol", "PLAINTEXT")
    if protocol not in _PROTOCOLS:
        return [f"kafka.admin.security.protocol={protocol}: must be one of {', '.join(_PROTOCOLS)}"]
    errors = []
    mechanism = config.get("sasl_mechanism", "PLAIN")
    if protocol.startswith("SASL_") and mechanism not in _kafka_python_mechanisms():
        errors.append(
            f"kafka.admin.sasl.mechanism={mechanism}: must be one of "
            f"{', '.join(sorted(_kafka_python_mechanisms()))}"
        )
    if protocol.endswith("SSL"):
        for keyword, (name, java_name) in _PEM_FILES.items():
            path = config.get(keyword)
            if path is not None and not (os.path.isfile(path) and os.access(path, os.R_OK)):
                written = name if name in props else java_name
                errors.append(f"kafka.admin.{written}={path}: no readable file there")
    return errors


def _kafka_python_mechanisms() -> Collection[str]:
    """The SASL mechanisms kafka-python has. Imported only when one is chosen: kafka-python's
    package imports its whole client (about 0.4 s of a `--check-config`)."""
    from kafka.net.sasl import SASL_MECHANISMS

    return SASL_MECHANISMS


def _librdkafka_errors(props: Mapping[str, str], translated: Mapping[str, str]) -> list[str]:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    # librdkafka's settings are strings, but "logger" takes a logging.Logger
    config: dict[str, Any] = {_LIBRDKAFKA_NAMES.get(k, k): v for k, v in translated.items()}
    config.pop("bootstrap.servers", None)
    config["logger"] = _SILENT  # no "no bootstrap.servers" warning on stderr
    config = without_token_requests(config)
    try:
        AdminClient(config)
    except KafkaException as exc:
        message = exc.args[0].str() if exc.args else str(exc)
        message = redact(message, secret_values({**props, **translated}))
        return [f"kafka.admin.*: librdkafka refuses these settings: {message}"]
    return []


def librdkafka_config(props: Mapping[str, str]) -> dict[str, str]:
    """Configuration dict for confluent-kafka's AdminClient."""
    return {_LIBRDKAFKA_NAMES.get(k, k): v for k, v in normalized(props).items()}


def kafka_python_config(props: Mapping[str, str]) -> dict[str, Any]:
    """Keyword arguments for kafka-python's clients (unknown settings are left out).

    Where PEM text is given (ssl.ca.pem, ssl.certificate.pem and ssl.key.pem, which a PKCS12
    store becomes), kafka-python gets an `ssl_context` built from it and the PEM files given;
    with OAUTHBEARER, a token provider doing the client-credentials login. Raises
    KafkaSettingsError.
    """
    normal = normalized(props)
    out = _kafka_python_keywords(normal)
    if is_oauthbearer(normal):
        from kvq.kafka.oauth_provider import token_provider  # kafka-python: only to connect

        out["sasl_oauth_token_provider"] = token_provider(normal)
    tls = out.get("security_protocol", "PLAINTEXT") in ("SSL", "SASL_SSL")
    if tls and _PEM_TEXT.keys() & normal.keys():
        out["ssl_context"] = _ssl_context(props, normal, out)
    return out


def _kafka_python_keywords(normal: Mapping[str, str]) -> dict[str, Any]:
    """kafka-python's keywords for translated settings, PEM text left out."""
    out: dict[str, Any] = {}
    for key, value in normal.items():
        if key == "security.protocol":
            out["security_protocol"] = value.strip().upper()  # librdkafka ignores case too
        elif key in _KAFKA_PYTHON_NAMES:
            out[_KAFKA_PYTHON_NAMES[key]] = value
        elif key in _KAFKA_PYTHON_INTS:
            out[_KAFKA_PYTHON_INTS[key]] = int(value.strip())
        elif key == "ssl.endpoint.identification.algorithm":
            out["ssl_check_hostname"] = value.lower() == "https"
    if "bootstrap_servers" in out:
        out["bootstrap_servers"] = [s.strip() for s in out["bootstrap_servers"].split(",")]
    if out.get("security_protocol", "PLAINTEXT") in ("SSL", "SASL_SSL"):
        out.setdefault("ssl_check_hostname", True)
    return out


_PEM_TEXT = {  # librdkafka's in-memory PEM properties: the Java property they may come from
    "ssl.ca.pem": "ssl.truststore.location",
    "ssl.certificate.pem": "ssl.keystore.location",
    "ssl.key.pem": "ssl.keystore.location",
}


def _ssl_context(
    props: Mapping[str, str], normal: Mapping[str, str], out: dict[str, Any]
) -> ssl.SSLContext:
    """kafka-python's SSL context from in-memory PEM text and PEM files; the file keywords are
    taken out of `out` (the context holds them)."""
    tls = ClientTls(
        ca_pem=normal.get("ssl.ca.pem"),
        ca_file=out.pop("ssl_cafile", None),
        certificate_pem=normal.get("ssl.certificate.pem"),
        key_pem=normal.get("ssl.key.pem"),
        certificate_file=out.pop("ssl_certfile", None),
        key_file=out.pop("ssl_keyfile", None),
        key_password=out.pop("ssl_password", None),
        check_hostname=out["ssl_check_hostname"],
    )
    try:
        return ssl_context(tls)
    except (ssl.SSLError, OSError, ValueError) as exc:
        names = [_PEM_TEXT[k] if _PEM_TEXT[k] in props else k for k in _PEM_TEXT if k in normal]
        where = ", ".join(f"kafka.admin.{name}" for name in dict.fromkeys(names))
        reason = getattr(exc, "reason", None) or exc.__class__.__name__
        raise KafkaSettingsError(f"{where}: the TLS material cannot be used ({reason})") from None
