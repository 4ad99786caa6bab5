"""ISO 8601 durations as the proposal specifies (PT5M, PT1M, PT0S), read as the Strimzi plugin
reads them: with Java's Duration.parse."""

import shutil
import subprocess
from datetime import timedelta

import pytest

from kvq.settings.durations import format_duration, parse_duration


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("PT5M", timedelta(minutes=5)),
        ("PT1M", timedelta(minutes=1)),
        ("PT0S", timedelta(0)),
        ("PT0.5S", timedelta(milliseconds=500)),
        ("P1D", timedelta(days=1)),
        ("PT1H30M", timedelta(hours=1, minutes=30)),
        ("P36500D", timedelta(days=36500)),
    ],
)
def test_parses_fixed_durations(text, expected):
    assert parse_duration(text) == expected
    assert parse_duration(format_duration(expected)) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("5m", "not an ISO 8601 duration"),
        ("300", "not an ISO 8601 duration"),
        ("P1M", "no fixed length"),
        ("P1Y", "no fixed length"),
        ("-PT1S", "negative"),
        ("P9999999999D", "at most P36500D"),
        ("PT99999999999999999999S", "at most P36500D"),
        ("P99999999D", "at most P36500D"),
        ("P2W", "weeks are not a Java duration; did you mean P14D?"),
        ("5s", "did you mean PT5S?"),
        ("PT5", "did you mean PT5S?"),
        ("30", "did you mean PT30S?"),
        ("1h30m", "did you mean PT1H30M?"),
        ("500ms", "did you mean PT0.5S?"),
    ],
)
def test_rejects_with_what_is_allowed(text, message):
    with pytest.raises(ValueError, match=message):
        parse_duration(text)


JAVA_PROGRAM = """
import java.time.Duration;

public class JavaDuration {
    public static void main(String[] args) {
        for (String arg : args) {
            try {
                Duration d = Duration.parse(arg);
                System.out.println(d.getSeconds() + " " + d.getNano());
            } catch (Exception e) {
                System.out.println("refused");
            }
        }
    }
}
"""
AS_JAVA_READS = [
    "PT5S", "pt5s", "Pt5M", "p1d", "P1dT2h", "PT1.5S", "PT1,5S", "PT5.S", "+PT5S", "-PT-5S",
    "PT0.123456789S", "P2DT3H4M5S", "PT36H", "PT", "P", "P1DT", "PT1.5M", "P1W", "P1M", "PT5",
    "5s", "30", "PT0.0000000001S", "PT 5S", "P1D5H", "PT5H1D",
]  # fmt: skip


@pytest.mark.skipif(shutil.which("java") is None, reason="needs a Java runtime")
def test_accepts_and_refuses_exactly_what_javas_duration_parse_does(tmp_path):
    program = tmp_path / "JavaDuration.java"
    program.write_text(JAVA_PROGRAM)
    java = subprocess.run(
        ["java", str(program), *AS_JAVA_READS], capture_output=True, text=True, timeout=120
    )
    assert java.returncode == 0, java.stderr
    for text, answer in zip(AS_JAVA_READS, java.stdout.splitlines(), strict=True):
        if answer == "refused":
            with pytest.raises(ValueError):
                parse_duration(text)
            continue
        seconds, nanos = map(int, answer.split())
        expected = timedelta(seconds=seconds, microseconds=nanos // 1000)
        assert parse_duration(text) == expected, text
