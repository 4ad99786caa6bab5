"""DepthAccumulator: a volume's depth, the sum of its steps kept at or above its held floor."""

from kvq.model.depth_accumulator import DepthAccumulator


def take(depth: DepthAccumulator, step=0.0, restart=False, floor=0.0, at_once=0.0, time=0.0):
    return depth.take(step, restart, floor, at_once, time, climb=0.5)


def test_steps_add_up_and_the_depth_never_falls_below_zero():
    depth = DepthAccumulator()
    assert [take(depth, step) for step in (1.0, 2.0, -5.0, 1.0)] == [1.0, 3.0, 0.0, 1.0]


def test_the_held_floor_follows_a_floor_down_at_once_and_up_at_most_climb_a_second():
    depth = DepthAccumulator()
    assert take(depth, restart=True, floor=2.0, time=0.0) == 2.0
    assert take(depth, floor=0.0, time=1.0) == 2.0  # a floor lower: no step, the depth stays
    assert take(depth, floor=10.0, time=2.0) == 2.0  # held: 0 at 1 s, +0.5 a second since
    assert take(depth, floor=10.0, time=10.0) == 4.5


def test_a_floor_at_once_holds_at_once_and_a_restart_starts_from_the_floor():
    depth = DepthAccumulator()
    assert take(depth, step=1.0) == 1.0
    assert take(depth, at_once=7.0, time=1.0) == 7.0
    assert take(depth, step=3.0, restart=True, time=2.0) == 0.0  # the step is ignored


def test_each_peak_is_its_running_maximum_since_the_last_restart():
    depth = DepthAccumulator()
    samples = ((3.0, 0.0), (1.0, 4.0), (5.0, 2.0))
    assert [depth.take_peaks(s, False) for s in samples] == [(3.0, 0.0), (3.0, 4.0), (5.0, 4.0)]
    assert depth.take_peaks((2.0, 1.0), True) == (2.0, 1.0)


def test_a_peak_forgets_a_sample_after_one_to_two_memories_of_calm():
    """Calm time adds up in epochs of the memory (10 s here): a peak is the maximum over the
    current epoch and the one before, so a sample goes once its epoch is two behind."""
    depth = DepthAccumulator()

    def take(sample: float, calm: float, reset: bool = False) -> tuple[float, ...]:
        return depth.take_peaks((sample,), reset, calm, memory=10.0)

    assert take(9.0, 0.0) == (9.0,)
    assert take(1.0, 6.0) == (9.0,)  # 6 s of calm: the same epoch
    assert take(2.0, 6.0) == (9.0,)  # 12 s: the next epoch, the one before still counts
    assert take(1.0, 0.0) == (9.0,)  # no calm: nothing forgotten, however long it takes
    assert take(1.0, 9.0) == (2.0,)  # 21 s: the 9 s sample's epoch is two behind
    assert take(3.0, 100.0) == (3.0,)  # epochs skipped: nothing before counts
    assert take(0.5, 0.0, reset=True) == (0.5,)  # a reset forgets at once


def test_without_calm_a_peak_is_the_running_maximum_whatever_the_time():
    depth = DepthAccumulator()
    samples = [(5.0,), (1.0,), (2.0,)]
    assert [depth.take_peaks(s, False, 0.0, 60.0) for s in samples] == [(5.0,)] * 3
