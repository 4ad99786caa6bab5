"""The enforcer's /metrics exposition passes promtool and covers every series after activity."""

import subprocess
from pathlib import Path

from enforcer.metrics import EnforcerMetrics
from kvq.settings.config import CLUSTER_LABEL_DEFAULT


def test_exposition_is_promtool_clean_and_complete():
    metrics = EnforcerMetrics(("prod-eu-1",), CLUSTER_LABEL_DEFAULT)
    metrics.webhooks.labels("applied").inc()
    metrics.applies.labels("prod-eu-1").inc()
    metrics.apply_seconds.labels("prod-eu-1").observe(0.02)
    metrics.target_factor.labels("prod-eu-1").set(0.5)
    metrics.applied_factor.labels("prod-eu-1").set(0.5)
    text = metrics.render()
    result = subprocess.run(
        ["promtool", "check", "metrics"], input=text, capture_output=True, timeout=30
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert (result.stdout + result.stderr).strip() == b""
    body = text.decode()
    for series in (
        'kafka_volume_quota_enforcer_webhooks_total{outcome="kafka_unavailable"} 0.0',
        'kafka_volume_quota_enforcer_apply_failures_total{cluster="prod-eu-1"} 0.0',
        'kafka_volume_quota_enforcer_drift_pairs{cluster="prod-eu-1"} 0.0',
        'kafka_volume_quota_enforcer_apply_duration_seconds_bucket{cluster="prod-eu-1",le="0.025"}',
        'kafka_volume_quota_enforcer_quota_changes_total{cluster="prod-eu-1"} 0.0',
        'kafka_volume_quota_enforcer_alert_to_enforce_seconds_count{cluster="prod-eu-1"} 0.0',
    ):
        assert series in body


def test_every_metric_is_in_the_enforcers_table():
    """docs/enforcer.md's "Its metrics" lists every family the enforcer exposes."""
    page = (Path(__file__).parents[2] / "docs" / "enforcer.md").read_text()
    table = page.split("## Its metrics", 1)[1].split("\n## ", 1)[0]
    metrics = EnforcerMetrics(("prod-eu-1",), CLUSTER_LABEL_DEFAULT)
    names = [
        family.name + ("_total" if family.type == "counter" else "")
        for family in metrics.registry.collect()
    ]
    missing = [name for name in names if f"| `{name}` |" not in table]
    assert names and not missing, missing
