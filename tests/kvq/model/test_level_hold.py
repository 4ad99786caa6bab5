from kvq.model.level_hold import LevelHold


def test_the_highest_sample_of_the_last_seconds_is_held():
    hold = LevelHold(14.0)
    assert hold.take(100.0, 2.0) == 2.0
    assert hold.take(105.0, 5.0) == 5.0
    assert hold.take(110.0, 1.0) == 5.0
    assert hold.take(119.0, 0.5) == 5.0  # 105 is 14 s before: still held, as a window includes it
    assert hold.take(120.0, 0.5) == 1.0
    assert hold.take(125.0, 0.0) == 0.5
    assert hold.take(140.0, 0.0) == 0.0


def test_only_the_samples_a_later_reading_may_hold_are_kept():
    hold = LevelHold(10.0)
    for time in range(0, 100, 2):
        hold.take(float(time), float(time))
    assert [time for time, _ in hold.kept] == [88.0, 90.0, 92.0, 94.0, 96.0, 98.0]
