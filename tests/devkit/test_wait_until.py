"""devkit.processes.wait_until: a wait that runs out says what it waited for and what it saw."""

from __future__ import annotations

import pytest

from devkit.processes import wait_until


def test_a_wait_that_runs_out_names_what_it_waited_for_and_what_it_last_saw():
    readings = iter(range(1_000_000))
    last = {}

    def ready() -> bool:
        last["value"] = next(readings)
        return False

    with pytest.raises(TimeoutError) as caught:
        wait_until(ready, timeout=0.2, what="the answer", seen=lambda: f"reading {last['value']}")
    message = str(caught.value)
    assert message.startswith("not ready after 0s: the answer; last seen: reading ")
    assert message.endswith(f"reading {last['value']}")


def test_a_description_that_fails_still_leaves_the_timeout_to_report():
    def broken() -> str:
        raise ConnectionError("status refused")

    with pytest.raises(TimeoutError, match=r"the answer; last seen: unknown \(ConnectionError"):
        wait_until(lambda: False, timeout=0.1, what="the answer", seen=broken)


def test_a_wait_that_ends_in_time_returns_what_the_predicate_found():
    answers = iter([None, 0, "found"])
    assert wait_until(lambda: next(answers), timeout=5, interval=0.01, seen=lambda: "x") == "found"
