"""The Grafana dashboard is valid for provisioning and every query in it runs on real Prometheus.

No Grafana server is obtainable here (not in Debian, PyPI or npm): the JSON is validated
structurally, and each PromQL expression is executed against Prometheus 2.42 scraping
exporter-shaped metrics, then scraping the real exporter and enforcer of the demo stack
(tests/system/test_rules_live_exporter.py repeats this against the real exporter while throttled).
"""

from __future__ import annotations

import contextlib
import json
import re
from pathlib import Path

import pytest
import yaml

from demo.stack import CLUSTER as DEMO_CLUSTER
from demo.stack import DemoStack
from devkit import grafana, kubernetes_manifests
from devkit.fake_exporter import FakeExporter
from devkit.prometheus import run_prometheus
from enforcer.metrics import EnforcerMetrics
from kvq.contract.metric_families import FAMILIES
from kvq.settings.config import CLUSTER_LABEL_DEFAULT
from kvq.web.standard_metrics import BUILD_INFO, HTTP_PREFIX

pytestmark = pytest.mark.paced

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "rules" / "kafka-volume-quotas.rules.yml"
PROVISIONING = ROOT / "grafana" / "provisioning"
DATASOURCE_REF = {"type": "prometheus", "uid": "${datasource}"}
NOT_ON_THE_DASHBOARD = {
    # the configured limit: shown as the per-volume effective limit the recording rules derive
    "kafka_volume_quota_limit_bytes": "log_dir:kafka_volume_quota_limit_bytes:effective",
    # every quota value set or removed: applies (and their failures) tell the operator more
    "kafka_volume_quota_enforcer_quota_changes_total": "Enforcer: applies and failures",
}


@pytest.fixture(scope="module")
def dashboard() -> dict:
    return grafana.load()


def test_dashboard_structure_is_valid_for_provisioning(dashboard: dict) -> None:
    assert isinstance(dashboard["schemaVersion"], int) and dashboard["schemaVersion"] >= 36
    assert dashboard["uid"] == "kafka-volume-quotas" and dashboard["title"]
    assert "id" not in dashboard or dashboard["id"] is None, "provisioned dashboards carry no id"
    ids = [panel["id"] for panel in grafana.panels(dashboard)]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    assert all(isinstance(i, int) and i > 0 for i in ids)
    for panel in grafana.panels(dashboard):
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 24, panel["title"]
        if panel["type"] != "row":
            assert panel["datasource"] == DATASOURCE_REF, panel["title"]
            assert panel["targets"], panel["title"]
            refs = [t["refId"] for t in panel["targets"]]
            assert len(refs) == len(set(refs)), panel["title"]
            assert all(t["datasource"] == DATASOURCE_REF for t in panel["targets"])


def test_panels_do_not_overlap(dashboard: dict) -> None:
    cells: dict[tuple[int, int], str] = {}
    for panel in grafana.panels(dashboard):
        grid = panel["gridPos"]
        for x in range(grid["x"], grid["x"] + grid["w"]):
            for y in range(grid["y"], grid["y"] + grid["h"]):
                assert (x, y) not in cells, f"{panel['title']} overlaps {cells.get((x, y))}"
                cells[(x, y)] = panel["title"]


def test_datasource_and_cluster_variables(dashboard: dict) -> None:
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    cluster = variables["cluster"]
    assert cluster["type"] == "query" and cluster["datasource"] == DATASOURCE_REF
    assert cluster["includeAll"] and cluster["allValue"] == ".*"
    for query in grafana.queries(dashboard):
        if query.where.startswith("variable"):
            continue
        assert 'cluster=~"$cluster"' in query.expr or "cluster" not in query.expr, query
        assert re.search(r"kafka_volume_quota|ALERTS", query.expr), query


def test_dashboard_shows_what_the_issue_asks_for(dashboard: dict) -> None:
    titles = {panel["title"] for panel in grafana.panels(dashboard)}
    assert set(grafana.CORE_PANELS) <= titles
    assert {
        "Predicted time to limit",
        "Enforcer: drift",
        "Enforcer: applies and failures",
    } <= titles
    exprs = " ".join(q.expr for q in grafana.queries(dashboard))
    for metric in (
        "kafka_volume_quota_fallback_active",
        "kafka_volume_quota_enforcer_applied_factor",
        'ALERTS{alertname="KafkaVolumeQuotaThrottle"',
        "log_dir:kafka_volume_quota_seconds_to_limit:deriv1h",
        "log_dir:kafka_volume_quota_limit_bytes:effective",
        "kafka_volume_quota_poll_duration_seconds_bucket",
        "kafka_volume_quota_poll_failures_total",
    ):
        assert metric in exprs, metric


def test_every_family_the_exporter_and_enforcer_publish_is_on_the_dashboard(
    dashboard: dict,
) -> None:
    """A family added to the exporter or the enforcer gets a panel (or a reason here)."""
    enforcer = {
        family.name + ("_total" if family.type == "counter" else "")
        for family in EnforcerMetrics(("c1",), CLUSTER_LABEL_DEFAULT).registry.collect()
    }
    published = (
        {family.sample_name for family in FAMILIES}
        | enforcer
        | {BUILD_INFO, HTTP_PREFIX + "open_connections", HTTP_PREFIX + "connections_dropped_total"}
    )
    exprs = " ".join(q.expr for q in grafana.queries(dashboard))
    missing = {
        name
        for name in published - set(NOT_ON_THE_DASHBOARD)
        if not re.search(rf"(?<![\w:]){name}(_bucket|_sum|_count)?(?![\w:])", exprs)
    }
    assert missing == set()


def test_provisioning_files_point_at_the_dashboard() -> None:
    (datasources,) = (PROVISIONING / "datasources").glob("*.yml")
    config = yaml.safe_load(datasources.read_text())
    assert config["apiVersion"] == 1
    (source,) = config["datasources"]
    assert source["type"] == "prometheus" and source["access"] == "proxy" and source["url"]
    (dashboards,) = (PROVISIONING / "dashboards").glob("*.yml")
    config = yaml.safe_load(dashboards.read_text())
    assert config["apiVersion"] == 1
    (provider,) = config["providers"]
    assert provider["type"] == "file" and provider["options"]["path"].startswith("/")


@pytest.mark.e2e
def test_every_query_runs_on_real_prometheus(tmp_path: Path, dashboard: dict) -> None:
    """Every query executes without error; every panel but the early-warning one has data."""
    every_query_has_data(tmp_path, dashboard, RULES)


@pytest.mark.e2e
def test_every_query_runs_with_another_cluster_label(tmp_path: Path) -> None:
    """clusterLabel=kafka_cluster: the rules and the dashboard as the Helm chart renders them, on
    series whose cluster is in `kafka_cluster`, fire the throttle alert by that label and fill
    every panel (and the variable) as the default does."""
    rendered = list(
        yaml.safe_load_all(
            kubernetes_manifests.helm_template(
                "--set",
                "clusterLabel=kafka_cluster",
                "--show-only",
                "templates/prometheusrule.yaml",
                "--show-only",
                "templates/dashboards.yaml",
            )
        )
    )
    rules = tmp_path / "chart.rules.yml"
    rule = next(d for d in rendered if d and d["kind"] == "PrometheusRule")
    rules.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
    config_map = next(d for d in rendered if d and d["kind"] == "ConfigMap")
    dashboard = json.loads(config_map["data"][grafana.DASHBOARD.name])
    every_query_has_data(tmp_path, dashboard, rules, cluster_label="kafka_cluster")


def every_query_has_data(
    tmp_path: Path, dashboard: dict, rules: Path, cluster_label: str = "cluster"
) -> None:
    """Real Prometheus with `rules` scraping an exporter and an enforcer whose series name their
    cluster, c1, in `cluster_label`: every query of `dashboard` runs without error and every
    panel but the early-warning one gets data."""
    with FakeExporter(cluster="c1", cluster_label=cluster_label) as fake:
        fake.set_available(1, "/data/a", 50_000)  # below the 10% limit: throttled
        fake.set_available(2, "/data/b", 600_000, fill=2_000)  # filling: a time to limit
        targets = {"kvq-exporter": [fake.target], "kvq-enforcer": [fake.enforcer_target]}
        throttled = {cluster_label: "c1"}
        with run_prometheus(tmp_path, targets, [rules]) as prom:
            prom.wait_for(
                lambda: (
                    prom.query("log_dir:kafka_volume_quota_seconds_to_limit:deriv1h")
                    and prom.query("rate(kafka_volume_quota_poll_duration_seconds_count[30s]) > 0")
                    and prom.firing("KafkaVolumeQuotaThrottle", **throttled)
                ),
                what="rules evaluated over a few scrapes",
            )
            # Panels fed by rates need a second scrape of their series: wait for the data the
            # assertion needs (every panel but the early-warning one), never for a fixed time.
            # The graceful-slowdown panels: that policy's families only (not the default's).
            expected = {"Low headroom and filling-up warnings", *GRACEFUL_PANELS}
            seen: list[set[str]] = []
            with contextlib.suppress(TimeoutError):
                prom.wait_for(
                    lambda: (
                        seen.append(check_all_queries(prom, dashboard, "c1"))
                        or seen[-1] == expected
                    ),
                    what="every panel but the early-warning one has data",
                )
    assert seen[-1] == expected


@pytest.mark.e2e
def test_every_panel_has_data_from_the_real_exporter_and_enforcer(
    tmp_path: Path, dashboard: dict
) -> None:
    """The enforcer's and the Processes row's panels on the real processes' series: their joins
    on (job, instance) hold with the labels Prometheus gives real targets."""
    # Nothing fills in the calm demo stack, so no time to limit, no early warning, and no alert
    # needs to fire.
    no_trend = {"Predicted time to limit", "Low headroom and filling-up warnings", "Firing alerts"}
    no_trend |= GRACEFUL_PANELS  # the demo stack runs the default policy
    with DemoStack(tmp_path / "stack") as stack:
        prom = stack.prometheus
        prom.wait_for(
            lambda: (
                prom.query("rate(kafka_volume_quota_poll_duration_seconds_count[30s]) > 0")
                and prom.query("rate(kafka_volume_quota_enforcer_webhooks_total[30s])")
            ),
            what="exporter and enforcer scraped a few times",
        )
        seen: list[set[str]] = []
        with contextlib.suppress(TimeoutError):
            prom.wait_for(
                lambda: (
                    seen.append(check_all_queries(prom, dashboard, DEMO_CLUSTER))
                    or seen[-1] <= no_trend
                ),
                what="every panel with data but the trend ones",
            )
    assert seen[-1] <= no_trend


GRACEFUL_PANELS = {
    "Graceful slowdown: predicted time to the limit",
    "Graceful slowdown: factor and fill rate per volume",
}


def check_all_queries(prom, dashboard: dict, cluster: str) -> set[str]:
    """Run every query (errors fail the test); return the panels without any data."""
    with_data: set[str] = set()
    without_data: set[str] = set()
    for query in grafana.queries(dashboard):
        result = grafana.run(prom, query, cluster_regex=cluster)
        if query.where.startswith("variable"):
            assert cluster in result, query
        elif query.where.startswith("annotation"):
            continue
        (with_data if result else without_data).add(query.where)
    return without_data - with_data
