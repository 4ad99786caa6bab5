"""`make demo SCENARIO=versus KAFKA=apache`'s kvq guards: the fifth runs the policy and references
the chart ships, so its column is what a Helm install does on that load."""

from __future__ import annotations

from demo.graceful import policy_properties
from demo.versus import DEFAULT_GUARDS, POLICY
from devkit.loop_settings import BASE
from kvq.settings.properties import parse_properties

SHIPPED_KEYS = ("kvq.throttle.policy", "kvq.enforcer.throttle.reference")


def test_the_graceful_guard_runs_the_charts_policy_and_references_by_default():
    assert "kvq-graceful" in DEFAULT_GUARDS
    (chart_file,) = BASE.glob("*/enforcer.properties")
    chart = parse_properties(chart_file.read_text())
    guard = parse_properties(policy_properties(POLICY["kvq-graceful"]))
    assert {k: guard[k] for k in SHIPPED_KEYS} == {k: chart[k] for k in SHIPPED_KEYS}
    assert chart["kvq.throttle.policy"] == "graceful-slowdown"


def test_the_0_1_guards_run_the_properties_default():
    assert "kvq" in DEFAULT_GUARDS and "kvq" not in POLICY and "kvq-no-default" not in POLICY
