"""Driving an Applier in tests the way the Enforcer drives it in production."""

from __future__ import annotations

from typing import Any

from enforcer.applier import Applier
from enforcer.apply.result import ApplyResult
from enforcer.journal import Journal
from enforcer.metrics import EnforcerMetrics
from enforcer.observed_rates import ObservedRates
from enforcer.quota_client import QuotaClient
from enforcer.quota_plan import QuotaPolicy
from kvq.settings.config import CLUSTER_LABEL_DEFAULT


def apply_step(applier: Applier, factor: float) -> ApplyResult:
    """One step of the cluster's work as `Enforcer` takes it: the starting point (which reads
    Kafka's copy of the originals once after start, adopting a throttle the journal lost), then
    `factor` applied. A throttle adopted from the copy is not held here: that is the Enforcer's
    part (tests/enforcer/test_enforcer.py)."""
    applier.starting_point()
    return applier.enforce(factor)


def observed_rate_applier(
    kafka: QuotaClient,
    journal: Journal,
    policy: QuotaPolicy,
    rates: ObservedRates,
    **options: Any,
) -> Applier:
    """Cluster c1's applier scaling the rates `rates` observes (`options`: Applier's others)."""
    metrics = EnforcerMetrics(("c1",), CLUSTER_LABEL_DEFAULT)
    return Applier("c1", policy, kafka, journal, metrics, observed_rates=rates, **options)
