"""When the next scrape comes, learned from the scrapes themselves: polls end just before one.

A crossing the poll sees waits for the next scrape to reach Prometheus: up to a whole scrape
interval (1 s recommended), half of it on average, whatever the phase of the poll. Prometheus
scrapes a target at a fixed phase, so once a scraper's last few scrapes came at a steady period,
the poller starts each poll so that it ends `MARGIN_SECONDS` before one of them. The polls keep
their interval on average (each is moved at most half a scrape period from where its schedule
puts it, and the schedule itself is not moved); with a scrape period dividing the poll interval
every poll is moved by the same amount once aligned. Scrapers are told apart by their address
(an HA pair of Prometheus servers: two phases; the poll aligns to whichever scrape comes nearer).
A scraper seen last more than `STALE_PERIODS` periods ago, or scraping at an uneven period, is
not aligned to.
"""

from __future__ import annotations

import statistics
import threading
from collections import deque

KEEP = 6
"""Scrapes remembered per scraper: five periods to judge steadiness by."""
STEADY = 0.1
"""A scraper is steady when every one of its recent periods is within 10 % of their median."""
STALE_PERIODS = 3
MARGIN_SECONDS = 0.1
"""How long before the scrape a poll should have ended: render and lock, and jitter."""


class ScrapePhase:
    """Scrape arrival times per scraper (monotonic seconds); thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: dict[str, deque[float]] = {}

    def scraped(self, scraper: str, at: float) -> None:
        with self._lock:
            self._seen.setdefault(scraper, deque(maxlen=KEEP)).append(at)

    def seen(self) -> dict[str, list[float]]:
        """Scraper address -> its last scrapes (at most KEEP), oldest first."""
        with self._lock:
            return {scraper: list(times) for scraper, times in self._seen.items()}

    def steady(self, now: float) -> list[tuple[float, float]]:
        """(last scrape, period) of every scraper scraping at a steady period until lately."""
        found = []
        for times in self.seen().values():
            if len(times) < KEEP:
                continue
            periods = [b - a for a, b in zip(times, times[1:], strict=False)]
            period = statistics.median(periods)
            if period <= 0 or any(abs(p - period) > STEADY * period for p in periods):
                continue
            if now - times[-1] <= STALE_PERIODS * period:
                found.append((times[-1], period))
        return found

    def start_for(self, planned: float, duration: float, interval: float, now: float) -> float:
        """When to start a poll planned at `planned` that takes about `duration` seconds, so
        that it ends MARGIN_SECONDS before the nearest expected scrape: at most half a scrape
        period from `planned`. `planned` itself when no scraper is steady, or none scrapes at
        least twice per poll interval (a poll cannot meet every scrape of a slower one)."""
        end = planned + duration + MARGIN_SECONDS
        starts = [
            last + round((end - last) / period) * period - duration - MARGIN_SECONDS
            for last, period in self.steady(now)
            if 2 * period <= interval
        ]
        return min(starts, key=lambda start: abs(start - planned), default=planned)
