"""A failed test on a demo stack shows the end of the stack's logs: a loop that did not act in
time in CI says which part stalled."""

from __future__ import annotations

import pytest


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    stack = getattr(item, "funcargs", {}).get("stack")
    if report.when == "call" and report.failed and hasattr(stack, "log_tails"):
        report.sections.append(("the demo stack's logs (their ends)", stack.log_tails()))
    return report
