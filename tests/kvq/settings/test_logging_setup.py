"""One log format for every command: logfmt or JSON lines, one record per line."""

import io
import json
import logging
import sys

import pytest

from kvq.settings.logging_setup import setup_logging


@pytest.fixture
def log_to():
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level

    def configure(level="info", fmt="logfmt"):
        stream = io.StringIO()
        setup_logging(level, fmt, stream)
        return stream

    yield configure
    root.handlers[:] = handlers
    root.setLevel(level)


def test_logfmt_lines_quote_and_escape_so_a_value_cannot_forge_a_line(log_to):
    stream = log_to("info", "logfmt")
    logging.getLogger("kvq.test").warning('group %s said "hi"', "a\nts=forged level=error")
    (line,) = stream.getvalue().splitlines()
    assert line.startswith("ts=") and line.endswith('"')
    assert ' level=warn logger=kvq.test msg="group a\\nts=forged level=error said \\"hi\\""' in line


def test_json_lines_carry_the_same_fields(log_to):
    stream = log_to("debug", "json")
    logging.getLogger("kvq.test").debug("polled %d brokers", 3)
    record = json.loads(stream.getvalue())
    assert record["level"] == "debug" and record["logger"] == "kvq.test"
    assert record["msg"] == "polled 3 brokers" and record["ts"].endswith("Z")


def test_the_level_filters(log_to):
    stream = log_to("warn", "logfmt")
    logging.getLogger("kvq.test").info("hidden")
    logging.getLogger("kvq.test").error("shown")
    assert [line.split(" level=")[1][:5] for line in stream.getvalue().splitlines()] == ["error"]


def test_an_exception_stays_on_its_line(log_to):
    stream = log_to("info", "logfmt")
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        logging.getLogger("kvq.test").exception("failed")
    (line,) = stream.getvalue().splitlines()
    assert 'exc="Traceback' in line and "RuntimeError: boom" in line


def test_records_go_to_the_stderr_of_the_moment(log_to, monkeypatch):
    log_to()  # as a command sets it up, then stderr is swapped (and the old one closed)
    setup_logging("info", "logfmt")
    old, new = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stderr", old)
    old.close()
    monkeypatch.setattr(sys, "stderr", new)
    logging.getLogger("kvq.test").warning("after the swap")
    assert "after the swap" in new.getvalue()
