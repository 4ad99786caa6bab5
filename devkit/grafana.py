"""The Grafana dashboard's PromQL, extracted and made runnable against a real Prometheus.

No Grafana server is obtainable here, so the dashboard is checked structurally and every query it
holds (panel targets, annotations, the cluster variable) is executed against Prometheus with
Grafana's variables replaced: `$cluster` by a regex, `$__rate_interval` etc. by fixed durations.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devkit.prometheus import Prometheus

ROOT = Path(__file__).resolve().parents[1]
DASHBOARD = ROOT / "grafana" / "dashboards" / "kafka-volume-quotas.json"

# Panels that must show data whenever an exporter is scraped (no enforcer, no trend needed).
CORE_PANELS = (
    "Throttle factor",
    "Worst available ratio",
    "Violating log dirs",
    "Active brokers",
    "Active log dirs",
    "Since last successful poll",
    "Throttle factor, fallback and enforcement",
    "Limit violations and fallback events",
    "Worst volumes",
    "Available ratio per broker log dir",
    "Headroom above the limit per log dir",
    "Active brokers and log dirs",
    "Violation hold of departed brokers",
    "Poll latency",
    "Poll failures",
    "Versions running",
    "HTTP connections",
    "Process CPU and memory",
)
GRAFANA_INTERVALS = {
    "$__rate_interval": "30s",
    "$__interval": "1s",
    "$__range": "1h",
}


@dataclass(frozen=True)
class Query:
    """One PromQL expression of the dashboard and where it sits."""

    where: str  # panel title / "annotation NAME" / "variable NAME"
    ref: str
    expr: str
    instant: bool


def load(path: Path = DASHBOARD) -> dict[str, Any]:
    return json.loads(path.read_text())


def panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel, including those nested in collapsed rows."""
    for panel in dashboard["panels"]:
        yield panel
        yield from panel.get("panels", [])


def queries(dashboard: dict[str, Any]) -> list[Query]:
    """Every PromQL expression: panel targets, annotation queries, query variables."""
    found = [
        Query(panel["title"], target["refId"], target["expr"], bool(target.get("instant")))
        for panel in panels(dashboard)
        for target in panel.get("targets", [])
    ]
    for annotation in dashboard.get("annotations", {}).get("list", []):
        if annotation.get("expr"):
            found.append(Query(f"annotation {annotation['name']}", "", annotation["expr"], False))
    for variable in dashboard.get("templating", {}).get("list", []):
        if variable.get("type") == "query":
            query = variable["query"]
            text = query["query"] if isinstance(query, dict) else query
            found.append(Query(f"variable {variable['name']}", "", text, True))
    return found


def to_promql(expr: str, cluster_regex: str = ".*") -> str:
    """Replace Grafana's variables so Prometheus can run `expr`."""
    for name, value in GRAFANA_INTERVALS.items():
        expr = expr.replace(name, value)
    expr = re.sub(r"\$\{cluster(:\w+)?\}|\$cluster\b", cluster_regex, expr)
    if "$" in expr:
        raise ValueError(f"unreplaced Grafana variable in {expr!r}")
    return expr


LABEL_VALUES = re.compile(r"^label_values\((?:(?P<match>.+),\s*)?(?P<label>\w+)\)$")


def run(prom: Prometheus, query: Query, cluster_regex: str = ".*", window: float = 60.0) -> list:
    """Execute `query` as Grafana would (instant, range over the last `window` s, or a
    label_values() variable through the label values API); raise PrometheusError on an error."""
    expr = to_promql(query.expr, cluster_regex)
    variable = LABEL_VALUES.match(expr)
    if variable:
        params = {"match[]": variable["match"]} if variable["match"] else {}
        return prom.api(f"label/{variable['label']}/values", **params)
    if query.instant:
        return prom.query(expr)
    now = time.time()
    return prom.query_range(expr, now - window, now, step=1.0)
