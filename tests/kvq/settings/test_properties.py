"""Java properties parsing: Strimzi users paste broker lines unchanged."""

import os
import threading

import javaproperties
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


@pytest.mark.parametrize("char", ["\f", "\x0b", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"])
def test_only_newline_and_carriage_return_end_a_line_as_in_java(char):
    """Python's str.splitlines ends lines at these too; Java keeps them in the value."""
    assert parse_properties(f"a=x{char}y\nb=2\n") == {"a": f"x{char}y", "b": "2"}


@pytest.mark.parametrize("value", ["b\\u00", "\\ua", "\\u12g4"])
def test_a_unicode_escape_without_four_hex_digits_is_refused_as_in_java(value):
    with pytest.raises(PropertiesError, match=r"f.properties:3: bad unicode escape"):
        parse_properties(f"x=1\r\ny=2\ra={value}\n", "f.properties")


def test_errors_name_the_line_after_continuations_and_every_kind_of_line_end():
    text = "# c\r\nlist=a,\\\n  b,\\\r\n  c\rz=\\u00e9\n\n=orphan\n"
    with pytest.raises(PropertiesError, match=r"f.properties:7: line has a value but no key"):
        parse_properties(text, "f.properties")


KEYS_VALUES_AND_LINE_ENDS = st.text(
    alphabet=st.sampled_from(list("ab0fF=: \t\f\\#!u\n\r\x0b\x1c\x85\u2028é")), max_size=40
)


@settings(max_examples=2000, deadline=None)
@given(KEYS_VALUES_AND_LINE_ENDS)
def test_reads_any_text_as_javas_properties_load(text):
    """Differential against `javaproperties` (Java's Properties.load): the same entries, or an
    error where Java fails (a bad \\u escape) or would keep a value under an empty key."""
    try:
        entries = [e for e in javaproperties.parse(text) if isinstance(e, javaproperties.KeyValue)]
    except javaproperties.InvalidUEscapeError:
        entries = None
    if entries is None or any(not e.key for e in entries):
        with pytest.raises(PropertiesError):
            parse_properties(text)
    else:
        assert parse_properties(text) == javaproperties.loads(text)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(["a=1", "# c", " ", "b=x\\", "  y", "c=\\u0041"]), max_size=12),
    st.lists(st.sampled_from(["\n", "\r", "\r\n"]), min_size=14, max_size=14),
)
def test_an_error_names_its_own_line_whatever_came_before(lines, ends):
    # (no empty line: after a "\r" it would make one "\r\n"); the comment line ends any
    # continuation before the bad line
    lines = [*lines, "# end", "bad=\\uZZZZ"]
    text = "".join(line + end for line, end in zip(lines, ends, strict=False))
    with pytest.raises(PropertiesError, match=rf"^f:{len(lines)}: bad unicode escape"):
        parse_properties(text, "f")
