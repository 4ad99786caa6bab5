"""The graceful-slowdown depth scale: depth to factor and back, by products and square roots."""

import pytest

from kvq.model.policy_expressions import PLAIN
from kvq.model.slowdown_depth import depth_of_drop, depth_sharing, factor_at_depth


def test_depth_zero_is_no_throttle_and_the_factor_falls_as_the_depth_grows():
    assert factor_at_depth(0.0) == 1.0
    factors = [factor_at_depth(depth) for depth in (0.5, 1.0, 2.0, 4.0)]
    assert factors == sorted(factors, reverse=True) and 0.0 < factors[-1] < 1.0


@pytest.mark.parametrize("depth", [0.0, 0.3, 1.0, 3.0, 8.0])
def test_a_drop_s_depth_lowers_any_factor_by_at_most_that_share(depth):
    step = depth_of_drop(0.2)
    assert factor_at_depth(step) == pytest.approx(0.8)
    assert factor_at_depth(depth + step) >= 0.8 * factor_at_depth(depth) * (1 - 1e-12)


def test_the_depth_sharing_a_reach_gives_its_inverse_never_past_the_lowest_factor():
    assert depth_sharing(0.5, 0.01, PLAIN) == 0.0  # not too fast: no depth
    assert factor_at_depth(depth_sharing(4.0, 0.01, PLAIN)) == pytest.approx(0.25)
    assert factor_at_depth(depth_sharing(1e9, 0.01, PLAIN)) == pytest.approx(0.01)
