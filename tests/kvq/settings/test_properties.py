"""Java properties parsing: Strimzi users paste broker lines unchanged."""

import os
import threading

import pytest

from kvq.settings.properties import PropertiesError, parse_properties, read_properties


def test_comments_separators_and_whitespace():
    text = """
# a comment
! another comment
a=1
b : 2
c 3
  d=  spaced value
e=
"""
    assert parse_properties(text) == {"a": "1", "b": "2", "c": "3", "d": "spaced value", "e": ""}


def test_continuation_lines_and_escapes():
    text = (
        "list=User:a;\\\n     User:b\n"
        "path=C\\:\\\\data\n"
        "uni=\\u00e9t\\u00e9\n"
        "key\\ with\\ space=x\n"
    )
    assert parse_properties(text) == {
        "list": "User:a;User:b",
        "path": "C:\\data",
        "uni": "été",
        "key with space": "x",
    }


def test_value_may_contain_separators_and_later_duplicate_wins():
    text = 'jaas=org.Module required username="u" password="p=q";\nx=1\nx=2\n'
    props = parse_properties(text)
    assert props["jaas"] == 'org.Module required username="u" password="p=q";'
    assert props["x"] == "2"


def test_bad_unicode_escape_names_file_and_line():
    with pytest.raises(PropertiesError, match=r"f.properties:2: bad unicode escape"):
        parse_properties("a=1\nb=\\uZZZZ\n", "f.properties")


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(PropertiesError, match="no such file"):
        read_properties(tmp_path / "absent.properties")


def test_a_byte_order_mark_does_not_swallow_the_first_key(tmp_path):
    path = tmp_path / "bom.properties"
    path.write_bytes(b"\xef\xbb\xbfkvq.cluster.name=eu-1\nb=2\n")
    assert read_properties(path) == {"kvq.cluster.name": "eu-1", "b": "2"}


def test_not_utf8_is_a_clear_error(tmp_path):
    path = tmp_path / "latin1.properties"
    path.write_bytes(b"a=caf\xe9\n")
    with pytest.raises(PropertiesError, match=r"latin1.properties: cannot read: not UTF-8"):
        read_properties(path)


def test_a_fifo_is_refused_instead_of_blocking_start_up(tmp_path):
    fifo = tmp_path / "config.fifo"
    os.mkfifo(fifo)
    outcome: list[BaseException | dict] = []
    reader = threading.Thread(target=lambda: outcome.append(_read_or_error(fifo)), daemon=True)
    reader.start()
    reader.join(timeout=10)
    if reader.is_alive():  # release the blocked open before failing
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        reader.join(timeout=10)
        pytest.fail("reading a FIFO blocked")
    (error,) = outcome
    assert isinstance(error, PropertiesError)
    assert "config.fifo: cannot read: not a regular file" in str(error)


def _read_or_error(path):
    try:
        return read_properties(path)
    except PropertiesError as exc:
        return exc
