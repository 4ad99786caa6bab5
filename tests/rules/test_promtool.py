"""The rule file passes `promtool check rules` and its unit tests; the example configs load."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import yaml

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
    for name in alert_names():
        if name != "KafkaVolumeQuotaThrottle":
            assert receivers(f"alertname={name}", "cluster=c1") == {"team-kafka"}, name


def test_alertmanager_example_webhook_settings() -> None:
    config = yaml.safe_load(ALERTMANAGER_EXAMPLE.read_text())
    (route,) = [r for r in config["route"]["routes"] if r["receiver"] == "kvq-enforcer"]
    assert route["group_wait"] == "0s" and route["group_interval"] == "10s"
    (receiver,) = [r for r in config["receivers"] if r["name"] == "kvq-enforcer"]
    (webhook,) = receiver["webhook_configs"]
    assert webhook["send_resolved"] is True
    assert webhook["url"].endswith("/webhook")
    assert webhook["http_config"]["authorization"]["credentials_file"]


def test_readme_documents_every_alert() -> None:
    readme = (ROOT / "rules" / "README.md").read_text()
    missing = [name for name in alert_names() if f"`{name}`" not in readme]
    assert missing == []
