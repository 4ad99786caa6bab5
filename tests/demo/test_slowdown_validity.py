"""The slowdown scenario's factor is valid as long as the chart keeps it: nothing leaves its
cluster, so a late poll must not lapse into the fallback (a restore mid-episode, then a throttle
again whose first drop stalls a Java producer)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from demo import slowdown
from demo.producers import VALIDITY_SECONDS, make_stack

VALIDITY_KEY = "client.quota.callback.static.throttle.factor.validity.duration"
CHART_VALUES = Path(__file__).resolve().parents[2] / "deploy/helm/kafka-volume-quotas/values.yaml"


class Made(Exception):
    """Stops run_policy once its stack is made."""


def test_each_policys_stack_keeps_the_factor_as_long_as_the_chart_does(monkeypatch, tmp_path):
    chart = yaml.safe_load(CHART_VALUES.read_text())["properties"][VALIDITY_KEY]
    made: list[str] = []

    def stack(*args, **options):
        made.append(make_stack(*args, **options).validity)
        raise Made

    monkeypatch.setattr(slowdown, "make_stack", stack)
    for policy in slowdown.POLICIES:
        with pytest.raises(Made):
            slowdown.run_policy(policy, tmp_path, print)
    assert made == [chart, chart]


def test_the_producers_scenario_keeps_its_few_seconds_for_the_departed_broker(tmp_path):
    assert make_stack(tmp_path).validity == f"PT{VALIDITY_SECONDS}S"
