"""ReadingTrail: a volume's readings by time, as a policy's windows read them in the exporter
(the backfill's windows over time give the same: tests/spark/test_equivalence.py)."""

from __future__ import annotations

from kvq.model.reading_trail import ReadingTrail
from kvq.model.throttle_factor_policy import EarlierReading, GrowthWindow, VolumeReading

TOTAL = 1000


def reading(time: float, used: int, grown: int | None = 10) -> VolumeReading:
    return VolumeReading(time, TOTAL, TOTAL - used, (TOTAL - used) / TOTAL, grown)


def trail_of(*readings: VolumeReading, windows=(30.0,), back=(4.0,)) -> ReadingTrail:
    trail = ReadingTrail(windows, back)
    for taken in readings:
        trail.take(taken)
    return trail


def test_a_growth_window_sums_what_grew_after_its_earliest_reading_in_the_window():
    """Readings 10 s apart, the window 30 s: from the reading 30 s back (its own growth, before
    the window, left out) to this one."""
    trail = trail_of(*(reading(10.0 * i, 100 + 10 * i, 5 + i) for i in range(6)))
    now = reading(60.0, 170, 20)
    assert trail.windows(now).growth == (GrowthWindow(9 + 10 + 20, 30.0, 130),)


def test_a_growth_window_begins_at_the_reading_nearest_its_edge_within_a_second_of_slack():
    """Polls 5 s apart, a few tens of milliseconds early or late: the reading 30.03 s back
    begins a 30 s window (the one 24.97 s back would leave it a sixth short); one 31.5 s back,
    beyond the second of slack, does not, nor does one just outside when a reading inside is
    nearer the edge (readings a second apart)."""
    now = reading(60.0, 170, 20)
    late = trail_of(reading(29.97, 100, 5), reading(35.03, 110, 6), reading(55.0, 160, 9))
    assert late.windows(now).growth == (GrowthWindow(6 + 9 + 20, 29.97, 100),)
    early = trail_of(reading(28.5, 100, 5), reading(35.03, 110, 6), reading(55.0, 160, 9))
    assert early.windows(now).growth == (GrowthWindow(9 + 20, 35.03, 110),)
    dense = trail_of(reading(29.4, 99, 5), reading(30.4, 100, 6), reading(55.0, 160, 9))
    assert dense.windows(now).growth == (GrowthWindow(9 + 20, 30.4, 100),)


def test_a_reading_whose_growth_was_not_read_starts_the_window_afresh():
    trail = trail_of(reading(0.0, 100), reading(10.0, 110, None), reading(20.0, 120, 7))
    assert trail.windows(reading(30.0, 130, 9)).growth == (GrowthWindow(16, 10.0, 110),)
    assert trail.windows(reading(30.0, 130, None)).growth == (GrowthWindow(0, 20.0, 120),)


def test_with_no_earlier_reading_in_the_window_it_reads_the_last_interval():
    """A gap (a broker away) longer than the window: the interval since the last reading."""
    trail = trail_of(reading(0.0, 100), reading(10.0, 110))
    assert trail.windows(reading(100.0, 150, 40)).growth == (GrowthWindow(40, 10.0, 110),)
    assert trail_of().windows(reading(0.0, 100, 40)).growth == (GrowthWindow(0, 0.0, 100),)


def test_a_look_back_reads_the_latest_reading_at_or_before_it_else_the_earliest():
    trail = trail_of(reading(0.0, 100), reading(3.0, 103), reading(6.0, 106), back=(4.0, 9.0))
    assert trail.windows(reading(7.0, 107)).earlier == (
        EarlierReading(3.0, 103),
        EarlierReading(0.0, 100),
    )
    assert trail.windows(reading(10.0, 110)).earlier == (
        EarlierReading(6.0, 106),
        EarlierReading(0.0, 100),
    )


def test_it_keeps_only_what_a_later_window_reads():
    """A reading a second for an hour: about the longest window's worth kept, and the windows
    still those of every reading kept."""
    everything = [reading(float(t), t % 500, 1 + t % 3) for t in range(3600)]
    trail = trail_of(*everything, windows=(30.0, 5.0), back=(4.0, 8.0, 12.0))
    assert len(trail.kept) == 32  # 30 s of readings, the second of slack and the one at its edge
    whole = ReadingTrail((30.0, 5.0), (4.0, 8.0, 12.0), trail.kept.__class__(everything))
    now = reading(3600.0, 100, 2)
    assert trail.windows(now) == whole.windows(now)
