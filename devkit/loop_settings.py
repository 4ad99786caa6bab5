"""The intervals that bound detect-to-enforce: the demo's, and the recommended ones read from the
Kubernetes manifests we ship (so a benchmark measures exactly what an operator deploys).

    exporter poll  (storage.check.interval in the exporter's properties file)
  + scrape         (the exporter's ServiceMonitor interval)
  + evaluation     (the throttle alert's rule group interval in the PrometheusRule)
  + group_wait     (the enforcer's route in the AlertmanagerConfig)
  = worst case before the webhook is sent (plus the time each step takes)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from kvq.settings.config import CHECK_INTERVAL
from kvq.settings.durations import parse_duration
from kvq.settings.properties import parse_properties

ROOT = Path(__file__).resolve().parent.parent
BASE = ROOT / "deploy" / "kubernetes" / "base" / "generated"
"""The chart's default render (`make manifests`): its objects, each cluster's properties files."""
THROTTLE_ALERT = "KafkaVolumeQuotaThrottle"


@dataclass(frozen=True)
class LoopSettings:
    """Seconds; `rule_groups`: the rule groups Prometheus loads with their own intervals (empty:
    rules/*.rules.yml as they are)."""

    name: str
    poll: float
    scrape: float
    evaluation: float
    group_wait: float
    group_interval: float
    repeat_interval: float
    rule_groups: tuple[dict, ...]

    @property
    def worst_case(self) -> float:
        """Sum of the waits between a volume crossing the limit and the webhook being sent."""
        return self.poll + self.scrape + self.evaluation + self.group_wait

    def rule_files(self, work_dir: Path) -> list[Path]:
        """The rule files for Prometheus: `rule_groups` written to `work_dir`, or rules/."""
        if not self.rule_groups:
            return sorted((ROOT / "rules").glob("*.rules.yml"))
        path = Path(work_dir) / "loop.rules.yml"
        path.write_text(yaml.safe_dump({"groups": list(self.rule_groups)}, sort_keys=False))
        return [path]


def prometheus_duration(seconds: float) -> str:
    """Seconds as a Prometheus/Alertmanager duration ("5s", "1500ms")."""
    return f"{seconds:g}s" if seconds == int(seconds) else f"{int(seconds * 1000)}ms"


def iso_duration(seconds: float) -> str:
    """Seconds as an ISO 8601 duration for properties ("PT5S")."""
    return f"PT{seconds:g}S"


def _seconds(text: str) -> float:
    """Prometheus ("5s", "1m") or ISO 8601 ("PT5S") duration in seconds."""
    text = text.strip()
    if text.upper().startswith("P"):
        return parse_duration(text).total_seconds()
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    for unit in ("ms", "s", "m", "h"):
        if text.endswith(unit) and text[: -len(unit)].replace(".", "", 1).isdigit():
            return float(text[: -len(unit)]) * units[unit]
    raise ValueError(f"not a duration: {text!r}")


def _documents(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _named(documents: list[dict], kind: str, component: str | None = None) -> dict:
    """The one object of this kind (of this app.kubernetes.io/component, if given)."""
    (found,) = [
        d
        for d in documents
        if d["kind"] == kind
        and component in (None, d["metadata"]["labels"].get("app.kubernetes.io/component"))
    ]
    return found


def demo() -> LoopSettings:
    """The demo stack: everything every second."""
    return LoopSettings("demo (all 1 s)", 1.0, 1.0, 1.0, 1.0, 1.0, 60.0, ())


def recommended(base: Path = BASE) -> LoopSettings:
    """What deploy/kubernetes/base ships, the chart's defaults (docs/reaction-time.md)."""
    documents = _documents(base / "kafka-volume-quotas.yaml")
    (exporter_properties,) = base.glob("*/exporter.properties")
    properties = parse_properties(exporter_properties.read_text())
    (endpoint,) = _named(documents, "ServiceMonitor", "exporter")["spec"]["endpoints"]
    groups = tuple(_named(documents, "PrometheusRule")["spec"]["groups"])
    (throttle_group,) = [
        g for g in groups if any(r.get("alert") == THROTTLE_ALERT for r in g["rules"])
    ]
    route = _named(documents, "AlertmanagerConfig")["spec"]["route"]
    return LoopSettings(
        name="recommended (deploy/kubernetes)",
        poll=_seconds(properties[CHECK_INTERVAL]),
        scrape=_seconds(endpoint["interval"]),
        evaluation=_seconds(throttle_group["interval"]),
        group_wait=_seconds(route["groupWait"]),
        group_interval=_seconds(route["groupInterval"]),
        repeat_interval=_seconds(route["repeatInterval"]),
        rule_groups=groups,
    )
