"""`python -m bench.factor_zero`: what it refuses before it starts any cluster."""

import pytest

from bench import factor_zero


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--quota-window-samples", "0"], "--quota-window-samples: 0; give 1 or more"),
        (["--principals", "0"], "--principals: [0] must each be from 1 to 200"),
    ],
)
def test_a_bad_count_is_refused_naming_it(capsys, argv, said):
    with pytest.raises(SystemExit) as exited:
        factor_zero.main(argv)
    assert exited.value.code == 2
    assert said in capsys.readouterr().err
