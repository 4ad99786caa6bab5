"""The evaluation grid: whole multiples of the step inside the archive span, exact at edges."""

from __future__ import annotations

import pytest

from spark.evaluation_grid import EmptyGrid, EvaluationGrid, index_at_or_after, index_at_or_before


def test_grid_times_are_multiples_of_the_step_inside_the_archive_span():
    grid = EvaluationGrid.over(1_000.5, 1_250.0, 60)
    assert [grid.time(k) for k in grid.indexes()] == [1_020, 1_080, 1_140, 1_200]
    assert len(grid) == 4


def test_a_requested_range_is_clipped_to_the_archive():
    grid = EvaluationGrid.over(1_000.5, 1_250.0, 60, start=0, end=1_100)
    assert (grid.time(grid.first), grid.time(grid.last)) == (1_020, 1_080)
    with pytest.raises(EmptyGrid, match="the archive spans 1000.5 to 1250.0"):
        EvaluationGrid.over(1_000.5, 1_250.0, 60, start=2_000)


def test_an_observation_exactly_at_a_grid_time_belongs_to_it():
    for time in (1_763_596_860.0, 1_763_596_860.0000002, 1_763_596_859.9999998):
        k = index_at_or_after(time, 60)
        assert k * 60 >= time and (k - 1) * 60 < time
        j = index_at_or_before(time, 60)
        assert j * 60 <= time and (j + 1) * 60 > time


def test_only_some_ranges_are_emitted():
    grid = EvaluationGrid(10, 0, 9).only([(2, 3), (7, 20)])
    assert list(grid.indexes()) == [2, 3, 7, 8, 9]
    assert grid.last_emitted() == 9
