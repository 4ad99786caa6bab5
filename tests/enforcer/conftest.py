"""Fixtures of the enforcer's tests against a real devcluster: a module may define its own (a
larger cluster, other settings) over these."""

from __future__ import annotations

import pytest

from tests.enforcer.test_integration import Enforcer


@pytest.fixture
def dc(devcluster):
    """A devcluster of one broker with one log dir."""
    return devcluster(brokers=1, log_dirs_per_broker=1)


@pytest.fixture
def enforcer(tmp_path, dc):
    """A kvq-enforcer process on `dc` with the default test configuration; always stopped."""
    e = Enforcer(tmp_path, dc)
    try:
        yield e.start()
    finally:
        e.stop()
