"""devkit.factor_zero's paced descent: the factors graceful slowdown's steps go through."""

import pytest

from devkit.factor_zero import paced_descent


def test_a_descent_lowers_the_factor_a_fifth_at_a_time_and_ends_at_its_target():
    assert paced_descent(0.5) == pytest.approx((0.8, 0.64, 0.512, 0.5))


def test_a_target_within_one_step_of_the_start_is_one_step():
    assert paced_descent(0.9) == (0.9,)
