"""Polls end just before a scrape once scrapes come at a steady period (exporter/scrape_phase.py).

Times are monotonic seconds given by the test: what is checked is where each poll starts, not how
fast anything runs."""

from __future__ import annotations

import pytest

from exporter.scrape_phase import KEEP, MARGIN_SECONDS, ScrapePhase

DURATION = 0.05  # the last poll's duration
INTERVAL = 5.0


def scraped_every(period: float, first: float, scraper: str = "10.0.0.1", phase=None):
    phase = phase or ScrapePhase()
    for n in range(KEEP):
        phase.scraped(scraper, first + n * period)
    return phase


def ends_before_a_scrape(start: float, first: float, period: float) -> bool:
    """The poll started at `start` ends MARGIN_SECONDS before a scrape of that scraper."""
    end = start + DURATION + MARGIN_SECONDS
    return abs((end - first) / period - round((end - first) / period)) < 1e-9


@pytest.mark.parametrize("planned", [105.0, 105.3, 105.5, 105.9])
def test_a_poll_ends_just_before_the_nearest_scrape_of_a_steady_scraper(planned):
    phase = scraped_every(1.0, first=100.2)
    start = phase.start_for(planned, DURATION, INTERVAL, now=planned)
    assert ends_before_a_scrape(start, 100.2, 1.0)
    assert abs(start - planned) <= 0.5


def test_the_schedule_keeps_its_interval_when_the_period_does_not_divide_it():
    """Scrapes every 2 s, polls every 5 s: each poll moves at most 1 s from its slot and ends
    just before a scrape, and the slots themselves stay 5 s apart (nothing drifts)."""
    phase, scrapes = ScrapePhase(), (80.3 + 2 * n for n in range(1000))
    scrape = next(scrapes)
    starts = []
    for slot in range(10):
        planned = 100.0 + slot * INTERVAL
        while scrape <= planned:  # the scraper goes on scraping until the slot
            phase.scraped("10.0.0.1", scrape)
            scrape = next(scrapes)
        starts.append(phase.start_for(planned, DURATION, INTERVAL, now=planned))
        assert abs(starts[-1] - planned) <= 1.0
        assert ends_before_a_scrape(starts[-1], 80.3, 2.0)
    assert (starts[-1] - starts[0]) / (len(starts) - 1) == pytest.approx(INTERVAL, abs=0.25)


def test_no_move_without_a_steady_recent_scraper_scraping_at_least_twice_per_poll():
    planned = 200.0
    assert ScrapePhase().start_for(planned, DURATION, INTERVAL, now=planned) == planned
    too_few = ScrapePhase()
    for n in range(KEEP - 1):
        too_few.scraped("10.0.0.1", 195.3 + n)
    assert too_few.start_for(planned, DURATION, INTERVAL, now=planned) == planned
    uneven = ScrapePhase()  # two servers behind one address: 0.3 s, then 0.7 s apart
    for n in range(KEEP):
        uneven.scraped("10.0.0.1", 195.0 + n // 2 + (0.3 if n % 2 else 0.0))
    assert uneven.start_for(planned, DURATION, INTERVAL, now=planned) == planned
    stale = scraped_every(1.0, first=150.2)  # last scrape 45 s ago: Prometheus went away
    assert stale.start_for(planned, DURATION, INTERVAL, now=planned) == planned
    slow = scraped_every(30.0, first=planned - 170.1)  # a 30 s scrape of a 5 s poll
    assert slow.start_for(planned, DURATION, INTERVAL, now=planned) == planned


def test_of_two_scrapers_the_poll_meets_the_nearer_scrape():
    """An HA pair of Prometheus servers at their own phases: the nearer one's scrape is met."""
    phase = scraped_every(1.0, first=100.2, scraper="10.0.0.1")
    scraped_every(1.0, first=100.75, scraper="10.0.0.2", phase=phase)
    planned = 105.6  # ends at 105.75: exactly before the second server's scrape
    assert phase.start_for(planned, DURATION, INTERVAL, now=planned) == pytest.approx(planned)
    planned = 105.1  # ends at 105.25: the first server's scrape at 105.2 is nearer
    assert ends_before_a_scrape(
        phase.start_for(planned, DURATION, INTERVAL, now=planned), 100.2, 1.0
    )
