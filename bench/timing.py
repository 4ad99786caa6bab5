"""Timing helpers shared by the benchmarks."""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Iterable
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def median_seconds(fn: Callable[[], object], rounds: int = 5) -> float:
    """Median wall time of `rounds` calls of `fn`."""
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def cpu_seconds(pids: Iterable[int]) -> float:
    """User + system CPU seconds these processes (every thread) have used so far, from
    /proc/<pid>/stat (utime and stime, fields 14 and 15)."""
    ticks = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks += int(fields[11]) + int(fields[12])
    return ticks / CLOCK_TICKS


def child_pids() -> list[int]:
    """The processes this one started (its direct children), from /proc."""
    me = str(os.getpid())
    children = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # ended meanwhile
            continue
        if fields[1] == me:
            children.append(int(entry.name))
    return children
