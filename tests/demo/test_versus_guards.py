"""`make demo SCENARIO=versus KAFKA=apache`'s kvq guards: the fifth runs graceful slowdown as the
install page sets it up for the chart, so its column is what a Helm install with those values does
on that load."""

from __future__ import annotations

import yaml

from demo.graceful import policy_properties
from demo.versus import DEFAULT_GUARDS, POLICY
from kvq.settings.properties import parse_properties
from tests.docs.blocks import block

SWITCH = ("kvq.throttle.policy", "kvq.enforcer.throttle.reference")


def test_the_graceful_guard_runs_what_the_install_page_switches_on():
    assert "kvq-graceful" in DEFAULT_GUARDS
    values = yaml.safe_load(block("docs/install-kubernetes.md", "# graceful-values.yaml").text)
    guard = parse_properties(policy_properties(POLICY["kvq-graceful"]))
    assert {k: guard[k] for k in SWITCH} == {k: values["properties"][k] for k in SWITCH}


def test_the_0_1_guards_run_the_properties_default():
    assert "kvq" in DEFAULT_GUARDS and "kvq" not in POLICY and "kvq-no-default" not in POLICY
