"""`python -m bench.factor_zero`: what it refuses before it starts any cluster."""

import pytest

from bench import factor_zero


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--quota-window-samples", "0"], "--quota-window-samples: 0; give 1 or more"),
        (["--principals", "0"], "--principals: [0] must each be from 1 to 200"),
        (
            ["--producer-buffer", "0"],
            "--producer-buffer: 0 must be from 1 to 2147483647 kB (librdkafka's range for "
            "queue.buffering.max.kbytes)",
        ),
        (["--held", "5"], "--held: 5 must be from 10 to 3600 seconds"),
        (["--descend-to", "1"], "--descend-to: 1 must be above 0 and below 1"),
        (["--descend-to", "0"], "--descend-to: 0 must be above 0 and below 1"),
        (
            ["--librdkafka", "batch.size=lots"],
            "--librdkafka: 'batch.size=lots': Invalid value for configuration property "
            '"batch.size"',
        ),
        (
            ["--longest-throttle-time", "PT5S", "5s"],
            "--longest-throttle-time: kvq.enforcer.throttle.longest.throttle.time=5s: not an "
            "ISO 8601 duration (examples: PT30S, PT1M, PT5M, P1D); did you mean PT5S?",
        ),
        (
            ["--longest-throttle-time", "PT2H"],
            "--longest-throttle-time: kvq.enforcer.throttle.longest.throttle.time=PT2H: must be "
            "from PT1S to PT1H",
        ),
    ],
)
def test_a_bad_value_is_refused_naming_it(capsys, argv, said):
    with pytest.raises(SystemExit) as exited:
        factor_zero.main(argv)
    assert exited.value.code == 2
    assert said in capsys.readouterr().err


def test_each_longest_throttle_time_is_the_enforcers_own_minimum_at_it():
    """The minimum a run adds is the one the enforcer would hold an entity to with that
    setting: a shorter longest throttle time, a higher minimum."""
    five = factor_zero.defaults(**{factor_zero.LONGEST_THROTTLE: "PT5S"})
    default = factor_zero.defaults()
    offered = factor_zero.OFFERED
    assert five.longest_throttle_seconds == 5.0
    assert five.minimum(factor_zero.P, offered) > default.minimum(factor_zero.P, offered)


def test_help_says_what_the_descent_is(capsys):
    with pytest.raises(SystemExit) as exited:
        factor_zero.main(["--help"])
    assert exited.value.code == 0
    assert "graceful slowdown's steps (20 % lower every 5 s)" in " ".join(
        capsys.readouterr().out.split()
    )
