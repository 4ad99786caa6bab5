"""Value parsers say once what they accept: the reference prints it, a refused value is told it."""

from datetime import timedelta

import pytest

from kvq.settings import values
from kvq.settings.cli_support import add_override_flag, new_parser, override_flags
from kvq.settings.config import CLUSTER_LABEL, SHARED_SETTINGS


@pytest.mark.parametrize(
    ("parse", "text"),
    [
        (values.positive_long, "0"),
        (values.positive_long, "1.5"),
        (values.factor, "1.5"),
        (values.open_ratio, "five"),
        (values.positive_duration, "PT0S"),
        (values.listen, "9898"),
        (values.path, " "),
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
    assert values.path(" /var/lib/kvq ") == "/var/lib/kvq"


def test_an_override_flag_is_checked_by_the_propertys_parser_and_says_what_it_overrides(capsys):
    parser = new_parser("kvq-test", None, "")
    add_override_flag(parser, "--cluster-label", SHARED_SETTINGS[CLUSTER_LABEL], "NAME")
    assert override_flags(parser) == [(("--cluster-label",), CLUSTER_LABEL)]
    assert "(overrides kvq.cluster.label; default cluster)" in " ".join(
        parser.format_help().split()
    )
    with pytest.raises(SystemExit):
        parser.parse_args(["--cluster-label", "le"])
    assert "le is a label the series or alerts already carry; must be" in capsys.readouterr().err
