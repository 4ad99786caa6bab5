"""Value parsers say once what they accept: the reference prints it, a refused value is told it."""

from datetime import timedelta

import pytest

from kvq.settings import values


@pytest.mark.parametrize(
    ("parse", "text"),
    [
        (values.positive_long, "0"),
        (values.positive_long, "1.5"),
        (values.factor, "1.5"),
        (values.open_ratio, "five"),
        (values.positive_duration, "PT0S"),
        (values.listen, "9898"),
        (values.text, " "),
        (values.boolean, "maybe"),
        (values.one_of(("a", "b")), "c"),
        (values.duration_between(timedelta(seconds=1), timedelta(minutes=1), "why"), "PT2M"),
    ],
)
def test_a_refused_value_is_told_exactly_what_the_parser_accepts(parse, text):
    with pytest.raises(ValueError) as refused:
        parse(text)
    assert str(refused.value) == f"must be {parse.accepts}"


def test_what_exactly_is_wrong_comes_first():
    with pytest.raises(ValueError) as refused:
        values.principals("User:a;admin")
    assert str(refused.value) == (
        f"entry 'admin' is not a principal 'User:<name>'; must be {values.principals.accepts}"
    )
    with pytest.raises(ValueError, match="^not a finite number; must be a number from 0.0"):
        values.factor("nan")


def test_a_durations_own_diagnosis_is_kept():
    with pytest.raises(ValueError, match="did you mean PT5S"):
        values.positive_duration("5s")


def test_a_parser_is_its_conversion():
    assert values.positive_long(" 42 ") == 42
    assert values.listen(":9898") == ("", 9898)
    assert values.text(" /var/lib/kvq ") == "/var/lib/kvq"
