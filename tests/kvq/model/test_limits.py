"""The two per-volume limits: violated when available <= threshold (at, just above, just below)."""

import pytest

from kvq.model.limits import MinAvailableBytes, MinAvailableRatio
from kvq.model.volume import Volume


def volume(available, total=1000):
    return Volume(0, "/d", total, available)


@pytest.mark.parametrize(
    ("available", "violated"),
    [(499, True), (500, True), (501, False), (0, True), (1000, False)],
)
def test_min_available_bytes_boundaries(available, violated):
    assert MinAvailableBytes(500).violated_by(volume(available)) is violated


@pytest.mark.parametrize(
    ("available", "violated"),
    [(99, True), (100, True), (101, False)],
)
def test_min_available_ratio_boundaries(available, violated):
    # 100 / 1000 == 0.1 exactly: "less than or equal to" the threshold violates
    assert MinAvailableRatio(0.1).violated_by(volume(available)) is violated


def test_ratio_limit_judges_heterogeneous_disks_by_their_own_size():
    limit = MinAvailableRatio(0.05)
    assert limit.violated_by(Volume(0, "/small", 100, 5))
    assert not limit.violated_by(Volume(1, "/large", 10_000, 600))


def test_limits_name_the_property_they_come_from():
    assert MinAvailableBytes(1).property_name.endswith("min.available.bytes")
    assert MinAvailableRatio(0.1).property_name.endswith("min.available.ratio")


def test_is_violated_is_built_from_operators_only():
    """The same method evaluates Spark Columns: anything supporting <= works."""

    class Expr:
        def __init__(self, text):
            self.text = text

        def __le__(self, other):
            return Expr(f"({self.text} <= {other})")

    assert MinAvailableBytes(5).is_violated(Expr("a"), Expr("r")).text == "(a <= 5)"
    assert MinAvailableRatio(0.5).is_violated(Expr("a"), Expr("r")).text == "(r <= 0.5)"
