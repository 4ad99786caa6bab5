"""Driving an Applier in tests the way the Enforcer drives it in production."""

from __future__ import annotations

from enforcer.applier import Applier
from enforcer.apply.result import ApplyResult


def apply_step(applier: Applier, factor: float) -> ApplyResult:
    """One step of the cluster's work as `Enforcer` takes it: the starting point (which reads
    Kafka's copy of the originals once after start, adopting a throttle the journal lost), then
    `factor` applied. A throttle adopted from the copy is not held here: that is the Enforcer's
    part (tests/enforcer/test_enforcer.py)."""
    applier.starting_point()
    return applier.enforce(factor)
