"""The rules on real Prometheus 2.42, their alerts through real Alertmanager 0.25 running
rules/alertmanager.example.yml, to a recorded enforcer webhook.

Prometheus scrapes exporter-shaped metrics whose values the test changes (devkit/
fake_exporter.py); tests/system/test_rules_live_exporter.py does the same with the real exporter.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml

from devkit.alertmanager import Alertmanager, WebhookRecorder
from devkit.fake_exporter import FakeExporter, metric_families
from devkit.prometheus import run_prometheus
from enforcer.metrics import EnforcerMetrics
from kvq.settings.config import CLUSTER_LABEL_DEFAULT

pytestmark = pytest.mark.paced

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "rules" / "kafka-volume-quotas.rules.yml"
EXAMPLE = ROOT / "rules" / "alertmanager.example.yml"
HEARTBEAT = "KafkaVolumeQuotaHeartbeat"
THROTTLE = "KafkaVolumeQuotaThrottle"


def example_config(webhook_url: str, token_file: Path) -> str:
    """The example config as shipped, with the enforcer URL and token file of this test."""
    config = yaml.safe_load(EXAMPLE.read_text())
    (receiver,) = [r for r in config["receivers"] if r["name"] == "kvq-enforcer"]
    (webhook,) = receiver["webhook_configs"]
    webhook["url"] = webhook_url
    webhook["http_config"]["authorization"]["credentials_file"] = str(token_file)
    return yaml.safe_dump(config)


def throttle_notification(body: dict, status: str, factor: str | None = None) -> bool:
    return (
        body["status"] == status
        and body["groupLabels"] == {"cluster": "c1"}
        and any(
            a["labels"]["alertname"] == THROTTLE
            and a["status"] == status
            and (factor is None or a["annotations"]["throttle_factor"] == factor)
            for a in body["alerts"]
        )
    )


@pytest.mark.e2e
def test_throttle_alert_fires_reaches_the_enforcer_webhook_and_resolves(tmp_path: Path) -> None:
    token = tmp_path / "webhook.token"
    token.write_text("s3cret-token\n")
    with (
        WebhookRecorder() as hook,
        FakeExporter(cluster="c1") as fake,
    ):
        manager = Alertmanager(tmp_path / "am", example_config(hook.url, token))
        try:
            targets = {"kvq-exporter": [fake.target], "kvq-enforcer": [fake.enforcer_target]}
            with run_prometheus(
                tmp_path / "prom", targets, [RULES], alertmanager_url=manager.url
            ) as prom:
                # healthy: rules evaluate without error, the throttle alert stays quiet
                prom.wait_for(
                    lambda: prom.query(
                        'cluster:kafka_volume_quota_throttle_factor:min{cluster="c1"} == 1'
                    ),
                    what="first evaluation",
                )
                rules = [r for g in prom.rules() for r in g["rules"]]
                assert [r["name"] for r in rules if r["health"] != "ok"] == []
                assert prom.firing(THROTTLE) == []

                # broker 2's /data/b at 5% available, below the 10% limit
                fake.set_available(2, "/data/b", 50_000)
                (alert,) = prom.wait_for(lambda: prom.firing(THROTTLE, cluster="c1"), what="firing")
                assert alert["labels"]["severity"] == "critical"
                assert alert["annotations"]["throttle_factor"] == "0"
                assert (
                    "broker 2 log dir /data/b has 48.83kiB available"
                    in alert["annotations"]["summary"]
                )

                body = hook.wait_for(lambda b: throttle_notification(b, "firing", "0"))
                headers = next(h for h, b in hook.requests if b is body)
                assert headers["Authorization"] == "Bearer s3cret-token"
                assert body["receiver"] == "kvq-enforcer"

                # space freed: the alert resolves and the enforcer hears so (restore)
                fake.set_available(2, "/data/b", 500_000)
                prom.wait_for(lambda: not prom.firing(THROTTLE), what="resolved in Prometheus")
                hook.wait_for(lambda b: throttle_notification(b, "resolved"), timeout=30)

                # no fresh observation: the fallback factor 0.5 fires the throttle alert with 0.5
                fake.set_fallback(0.5)
                (alert,) = prom.wait_for(
                    lambda: prom.firing(THROTTLE, cluster="c1"), what="fallback"
                )
                assert alert["annotations"]["throttle_factor"] == "0.5"
                assert "fallback throttle factor applies" in alert["annotations"]["summary"]
                assert prom.wait_for(lambda: prom.firing("KafkaVolumeQuotaFallbackApplied"))
                fake.set_fallback(None)
                prom.wait_for(lambda: not prom.firing(THROTTLE), what="fallback over")
        finally:
            manager.stop()
    # only the throttle alert and the heartbeat reached the enforcer's receiver, the heartbeat
    # alone in its notifications
    assert {a["labels"]["alertname"] for b in hook.bodies for a in b["alerts"]} == {
        THROTTLE,
        HEARTBEAT,
    }
    beats = [b for b in hook.bodies if b["commonLabels"].get("alertname") == HEARTBEAT]
    assert beats and all(b["status"] == "firing" for b in beats)


def firing_factors(body: dict) -> set[str]:
    """The factors of the throttle alerts firing in one notification."""
    return {
        a["annotations"]["throttle_factor"]
        for a in body["alerts"]
        if a["labels"]["alertname"] == THROTTLE and a["status"] == "firing"
    }


def throttle_bodies(bodies: list[dict]) -> list[dict]:
    """The notifications of the throttle alert (the heartbeat's come in between)."""
    return [b for b in bodies if any(a["labels"]["alertname"] == THROTTLE for a in b["alerts"])]


def enforced_factor(body: dict) -> str:
    """What the enforcer sets on hearing one notification: the lowest firing factor, 1 (restore)
    when none fires."""
    return min(firing_factors(body), key=float, default="1")


@pytest.mark.e2e
def test_each_step_of_a_moving_factor_reaches_the_enforcer_within_the_group_interval(
    tmp_path: Path,
) -> None:
    """A factor that moves while the alert fires (graceful-slowdown) reaches the enforcer at each
    step within the scrape, the evaluation and the route's group_interval (1 s), not at its
    repeat_interval (5m): Alertmanager notifies only when the set of alerts changes, and each
    step (the `factor_step` label) is a new alert. Never in between does a notification leave
    nothing firing (the enforcer would restore the quotas between two steps): the previous step
    stays firing one evaluation longer (`keep_firing_for`), so a fall applies at once and a rise
    once the lower step resolves."""
    token = tmp_path / "webhook.token"
    token.write_text("s3cret-token\n")
    steps = ("0.9", "0.75", "0.6", "0.8")  # falls, then a rise
    delays = []
    with (
        WebhookRecorder() as hook,
        FakeExporter(cluster="c1") as fake,
    ):
        manager = Alertmanager(tmp_path / "am", example_config(hook.url, token))
        try:
            targets = {"kvq-exporter": [fake.target], "kvq-enforcer": [fake.enforcer_target]}
            with run_prometheus(tmp_path / "prom", targets, [RULES], alertmanager_url=manager.url):
                for factor in steps:
                    fake.set_fallback(float(factor))
                    changed = time.monotonic()
                    hook.wait_for(
                        lambda b, f=factor: bool(throttle_bodies([b])) and enforced_factor(b) == f,
                        timeout=60,
                    )
                    delays.append(time.monotonic() - changed)
        finally:
            manager.stop()
    enforced = [enforced_factor(b) for b in throttle_bodies(hook.bodies)]
    assert [f for i, f in enumerate(enforced) if i == 0 or f != enforced[i - 1]] == list(steps)
    first, *moves = delays
    assert first < 25, delays  # Prometheus' first scrapes and evaluation
    assert max(moves) < 5, delays  # each step: within a few seconds, not the next 10 s tick


def test_the_fake_enforcer_metrics_are_the_enforcers() -> None:
    """Names, types and labels as enforcer/metrics.py publishes them (once values are set)."""
    real = EnforcerMetrics(("c1",), CLUSTER_LABEL_DEFAULT)
    real.target_factor.labels("c1").set(1)
    real.applied_factor.labels("c1").set(1)
    fake = FakeExporter(cluster="c1").render_enforcer()
    assert metric_families(fake) == metric_families(real.render().decode())
