"""Java properties parsing: Strimzi users paste broker lines unchanged."""

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
