"""Secrets are masked in URLs, after secret-bearing keys, and wherever a remembered one appears."""

import io
import logging

import pytest

from kvq.settings.config import secret_values
from kvq.settings.logging_setup import setup_logging
from kvq.settings.redaction import (
    forget_secrets,
    mask_url_credentials,
    redacted,
    remember_secrets,
)


@pytest.fixture(autouse=True)
def no_remembered_secrets():
    forget_secrets()
    yield
    forget_secrets()


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("http://user:pw@host:9090/x", "http://user:********@host:9090/x"),
        ("at https://tok3n@prom and http://h/a@b", "at https://********@prom and http://h/a@b"),
        ("http://u:p@ss@host", "http://u:********@host"),
        ("http://prometheus:9090", "http://prometheus:9090"),
        ("url=http://u:p%40ss@h?q=a@b", "url=http://u:********@h?q=a@b"),
    ],
)
def test_url_credentials_are_masked_wherever_a_url_appears(text, shown):
    assert mask_url_credentials(text) == shown


def test_remembered_secrets_are_masked_as_written_in_reprs_too():
    secret = "pä'ss-word"
    remember_secrets([secret, "http://kvq:Prom%2Fpw@h"])
    as_bytes = repr(b"u\x00u\x00" + secret.encode())  # kafka-python's SaslAuthenticate line
    line = f"auth_bytes={as_bytes} {[secret]} {secret!r} Prom/pw"
    assert "ss-word" not in redacted(line) and "Prom" not in redacted(line)


def test_quoted_values_of_password_items_are_masked_even_if_never_remembered():
    text = "{'sasl_plain_password': 'short', 'ssl_password': None, 'client_id': 'x'}"
    masked = "{'sasl_plain_password': '********', 'ssl_password': None, 'client_id': 'x'}"
    assert redacted(text) == masked


def test_bearer_tokens_are_masked_even_if_never_remembered():
    token = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJrdnEifQ.c2lnbmF0dXJl-_x"
    oauthbearer = repr(f"n,,\x01auth=Bearer {token}\x01\x01".encode())  # kafka-python, debug
    line = f"SaslAuthenticateRequest(version=2, auth_bytes={oauthbearer}) "
    line += f"Authorization: bearer {token}="
    shown = redacted(line)
    assert token[:20] not in shown
    assert shown == (
        "SaslAuthenticateRequest(version=2, auth_bytes=b'n,,\\x01auth=Bearer ********\\x01"
        "\\x01') Authorization: bearer ********"
    )


def test_secret_values_include_the_jaas_password_and_url_credentials():
    jaas = 'PlainLoginModule required username="alice" password="al1ce";'
    found = secret_values(
        {
            "client.quota.callback.static.kafka.admin.sasl.jaas.config": jaas,
            "kvq.enforcer.prometheus.url": "http://kvq:prom-pw@prometheus:9090",
            "kvq.cluster.name": "prod",
        }
    )
    assert "al1ce" in found and "prom-pw" in found and "alice" not in found and "prod" not in found


def test_every_logger_s_lines_are_redacted_by_the_one_setup():
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    stream = io.StringIO()
    try:
        setup_logging("debug", "logfmt", stream)
        remember_secrets(["hunter2-secret"])
        logging.getLogger("kafka.admin.client").debug("config: %s", {"x": "hunter2-secret"})
        logging.getLogger("urllib3.connectionpool").debug("GET http://a:b@h/")
        try:
            raise ValueError("hunter2-secret")
        except ValueError:
            logging.getLogger("kvq.test").exception("failed")
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
    text = stream.getvalue()
    assert "hunter2" not in text and "a:b@" not in text
    assert "config: {'x': '********'}" in text and "GET http://a:********@h/" in text
    assert "ValueError: ********" in text


@pytest.mark.parametrize(
    "text",
    ["ab." * 70_000, "password" * 30_000, 'password="' * 20_000, "a" * 200_000, "a://b" * 50_000],
)
def test_a_long_line_costs_linear_time_whatever_it_holds(text):
    import time

    started = time.process_time()
    redacted(text)
    assert time.process_time() - started < 5  # measured 0.05-0.5 s; a quadratic scan took 87 s
