"""The rule file passes `promtool check rules` and its unit tests; the example configs load."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from devkit.alertmanager import HEARTBEAT, HEARTBEAT_GROUP_INTERVAL, HEARTBEAT_REPEAT_INTERVAL
from devkit.kubernetes_manifests import helm_template
from devkit.prometheus import PROMTOOL, write_config

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "rules" / "kafka-volume-quotas.rules.yml"
RULE_TESTS = sorted((ROOT / "rules" / "tests").glob("*.yml"))
ALERTMANAGER_EXAMPLE = ROOT / "rules" / "alertmanager.example.yml"


def run(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=ROOT)


def alert_names() -> list[str]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule["alert"] for group in groups for rule in group["rules"] if "alert" in rule]


def test_promtool_check_rules_accepts_the_rule_file() -> None:
    result = run(PROMTOOL, "check", "rules", str(RULES))
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"SUCCESS: \d+ rules found", result.stdout)


def test_promtool_unit_tests_pass() -> None:
    assert RULE_TESTS, "no rules/tests/*.yml"
    result = run(PROMTOOL, "test", "rules", *map(str, RULE_TESTS))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("SUCCESS") == len(RULE_TESTS)


def chart_rules(cluster_label: str) -> dict:
    """The rules as the Helm chart renders them with `clusterLabel`, without what the chart adds
    besides (the throttle group's interval, each alert's `namespace`: tests/deploy checks those)."""
    rendered = helm_template(
        "--set", f"clusterLabel={cluster_label}", "--show-only", "templates/prometheusrule.yaml"
    )
    groups = yaml.safe_load(rendered)["spec"]["groups"]
    for group in groups:
        group.pop("interval", None)
        for rule in group["rules"]:
            if "alert" in rule:
                del rule["labels"]["namespace"]
    return {"groups": groups}


_MATCHER = re.compile(r"([{,]\s*)cluster(\s*[=!])")


def renamed_rule_test(test_file: dict, cluster_label: str, rules: Path) -> dict:
    """A rules/tests file for the rules at `rules` whose cluster label is `cluster_label`: the
    label renamed in the input series, the expressions and the expected samples and alerts (read
    as data, not as the chart rewrites the rules, so the two do not share a mistake)."""

    def rename(selector: str) -> str:
        return _MATCHER.sub(rf"\g<1>{cluster_label}\g<2>", selector)

    renamed = {**test_file, "rule_files": [str(rules)]}
    for test in renamed["tests"]:
        for series in test.get("input_series", []):
            series["series"] = rename(series["series"])
        for case in test.get("promql_expr_test", []):
            case["expr"] = rename(case["expr"])
            for sample in case.get("exp_samples", []):
                sample["labels"] = rename(sample["labels"])
        for case in test.get("alert_rule_test", []):
            for alert in case.get("exp_alerts", []):
                labels = alert.get("exp_labels", {})
                if "cluster" in labels:
                    labels[cluster_label] = labels.pop("cluster")
    return renamed


@pytest.mark.parametrize("cluster_label", ["cluster", "kafka_cluster"])
def test_the_chart_s_rules_pass_the_unit_tests_with_either_cluster_label(
    tmp_path: Path, cluster_label: str
) -> None:
    """clusterLabel=kafka_cluster: every alert and record of the chart's PrometheusRule keeps
    the Kafka cluster in `kafka_cluster` (a `by (cluster)` left behind would drop it and fail
    its test); the default renders the rules file itself."""
    rules = tmp_path / "chart.rules.yml"
    rendered = chart_rules(cluster_label)
    rules.write_text(yaml.safe_dump(rendered))
    if cluster_label == "cluster":
        expected = yaml.safe_load(RULES.read_text())
        for group in expected["groups"]:
            group.pop("interval", None)  # the chart sets it from its values: tests/deploy
        assert rendered == expected
    tests = []
    for path in RULE_TESTS:
        test_file = renamed_rule_test(yaml.safe_load(path.read_text()), cluster_label, rules)
        tests.append(tmp_path / path.name)
        tests[-1].write_text(yaml.safe_dump(test_file))
    result = run(PROMTOOL, "test", "rules", *map(str, tests))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("SUCCESS") == len(RULE_TESTS)
    if cluster_label != "cluster":
        text = rules.read_text()
        assert "by (cluster" not in text and "$labels.cluster " not in text
        assert "$labels.kafka_cluster" in text and "kafka_cluster=%q" in text


def test_every_alert_is_tested_firing_and_quiet() -> None:
    """Each alert has at least one expected firing and one expected silence in rules/tests."""
    firing: set[str] = set()
    quiet: set[str] = set()
    for path in RULE_TESTS:
        for test in yaml.safe_load(path.read_text())["tests"]:
            for case in test.get("alert_rule_test", []):
                (firing if case.get("exp_alerts") else quiet).add(case["alertname"])
    names = set(alert_names())
    assert names - firing == set(), "alerts never expected to fire"
    assert names - quiet == set(), "alerts never expected to stay quiet or resolve"


def test_throttle_alert_has_the_contract_the_enforcer_consumes() -> None:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    (rule,) = [
        r for g in groups for r in g["rules"] if r.get("alert") == "KafkaVolumeQuotaThrottle"
    ]
    assert "for" not in rule, "the enforcer must hear about throttling at once"
    (group,) = [g for g in groups if rule in g["rules"]]
    assert group["interval"] == "1s", "the throttle alert waits at most a second for evaluation"
    assert group["rules"] == [rule], "alone in its group: the hour-long trends are not as frequent"
    assert rule["annotations"]["throttle_factor"] == "{{ $value }}"
    assert "severity" in rule["labels"]
    assert "by (cluster)" in rule["expr"]


def test_prometheus_config_loading_the_rules_is_valid(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "prometheus.yml",
        {"kvq-exporter": ["127.0.0.1:9898"]},
        [RULES],
        interval="15s",
        alertmanager_url="http://127.0.0.1:9093",
    )
    result = run(PROMTOOL, "check", "config", str(config))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout and "rules found" in result.stdout


def test_alertmanager_example_is_valid_and_routes_the_throttle_alert_to_the_enforcer() -> None:
    check = run("amtool", "check-config", str(ALERTMANAGER_EXAMPLE))
    assert check.returncode == 0, check.stdout + check.stderr

    def receivers(*labels: str) -> set[str]:
        result = run(
            "amtool", "config", "routes", "test", f"--config.file={ALERTMANAGER_EXAMPLE}", *labels
        )
        assert result.returncode == 0, result.stderr
        return set(result.stdout.strip().split(","))

    assert receivers("alertname=KafkaVolumeQuotaThrottle", "cluster=c1") == {
        "kvq-enforcer",
        "team-kafka",
    }
    assert receivers(f"alertname={HEARTBEAT}", "cluster=c1") == {"kvq-enforcer"}, "never people"
    for name in alert_names():
        if name not in ("KafkaVolumeQuotaThrottle", HEARTBEAT):
            assert receivers(f"alertname={name}", "cluster=c1") == {"team-kafka"}, name


def test_alertmanager_example_webhook_settings() -> None:
    config = yaml.safe_load(ALERTMANAGER_EXAMPLE.read_text())
    heartbeat, throttle = [r for r in config["route"]["routes"] if r["receiver"] == "kvq-enforcer"]
    assert throttle["group_wait"] == "0s" and throttle["group_interval"] == "1s"
    assert heartbeat["matchers"] == [f'alertname = "{HEARTBEAT}"'] and "continue" not in heartbeat
    # re-sent well within the enforcer's default kvq.enforcer.failsafe.after (PT30S)
    assert (heartbeat["group_interval"], heartbeat["repeat_interval"]) == (
        HEARTBEAT_GROUP_INTERVAL,  # the demo stack's (devkit/alertmanager.py)
        HEARTBEAT_REPEAT_INTERVAL,
    )
    (receiver,) = [r for r in config["receivers"] if r["name"] == "kvq-enforcer"]
    (webhook,) = receiver["webhook_configs"]
    assert webhook["send_resolved"] is True
    assert webhook["url"].endswith("/webhook")
    assert webhook["http_config"]["authorization"]["credentials_file"]


def test_the_operating_page_documents_every_alert() -> None:
    readme = (ROOT / "docs" / "operating.md").read_text()
    missing = [name for name in alert_names() if f"`{name}`" not in readme]
    assert missing == []
