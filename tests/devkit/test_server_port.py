"""Ports for test servers: a port one process picked for a server it starts later (the demo
stack picks Prometheus' port before its Kafka cluster is up) is not handed to another process of
the parallel test lanes meanwhile."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from devkit import processes
from devkit.processes import server_port

REPO = Path(__file__).resolve().parents[2]


def picked_in_another_process() -> int:
    done = subprocess.run(
        [sys.executable, "-c", "from devkit.processes import server_port; print(server_port())"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    return int(done.stdout)


@pytest.fixture
def candidates(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The ports `server_port` will try, in this order (then any)."""
    order: list[int] = []
    real = processes.random.randrange

    def next_candidate(low: int, high: int) -> int:
        return order.pop(0) if order else real(low, high)

    monkeypatch.setattr(processes.random, "randrange", next_candidate)
    yield order


def test_a_port_picked_by_another_process_is_not_picked_again(candidates: list[int]) -> None:
    taken = picked_in_another_process()  # free: nothing binds it yet
    candidates.extend([taken, taken, taken])

    port = server_port()

    assert port != taken and not candidates


def test_a_reservation_older_than_a_test_is_given_out_again(candidates: list[int]) -> None:
    taken = picked_in_another_process()
    long_ago = time.time() - processes.PORT_RESERVATION_SECONDS - 1
    entry = processes.registry_entry(taken)
    os.utime(entry, (long_ago, long_ago))
    candidates.append(taken)

    assert server_port() == taken
    assert time.time() - entry.stat().st_mtime < 60  # reserved afresh
