"""Real Prometheus scraping the real exporter polling devcluster: the throttle alert fires with the
right `throttle_factor` when a log dir drops below the limit and resolves when space comes back;
every dashboard query runs on that Prometheus and the core panels show data.
"""

from __future__ import annotations

import contextlib
import shutil
import sys
import urllib.request
from pathlib import Path

import pytest

from devcluster.control_client import ControlClient
from devkit import grafana
from devkit.fake_exporter import FakeExporter, metric_families
from devkit.processes import ManagedProcess, http_ok, server_port, wait_until
from devkit.prometheus import run_prometheus

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "rules" / "kafka-volume-quotas.rules.yml"
P = "client.quota.callback.static."
CLUSTER = "live"
CAPACITY = 100_000_000  # virtual capacity of each devcluster log dir
THROTTLE = "KafkaVolumeQuotaThrottle"

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.paced]


@pytest.fixture
def exporter(tmp_path: Path, devcluster):
    """Start `kvq-exporter` (1 s interval, 10% ratio limit, extra properties as keyword
    arguments) polling a new 3-broker devcluster; returns (devcluster, "host:port")."""
    with contextlib.ExitStack() as stack:

        def start(**properties: str) -> tuple:
            cluster = devcluster(brokers=3, log_dirs_per_broker=2, capacity_bytes=CAPACITY)
            settings = {
                f"{P}kafka.admin.bootstrap.servers": cluster.bootstrap,
                f"{P}storage.per.volume.limit.min.available.ratio": "0.1",
                f"{P}storage.check.interval": "PT1S",
                "kvq.cluster.name": CLUSTER,
                **properties,
            }
            config = tmp_path / "kvq.properties"
            config.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
            port = server_port()
            binary = shutil.which("kvq-exporter", path=str(Path(sys.executable).parent))
            assert binary, "kvq-exporter console script missing: pip install -e '.[test]'"
            argv = [binary, "--config", str(config), "--listen", f"127.0.0.1:{port}"]
            process = stack.enter_context(ManagedProcess(argv, tmp_path / "exporter.log"))
            wait_until(
                lambda: http_ok(f"http://127.0.0.1:{port}/ready") or not process.running,
                timeout=30,
                what="exporter /ready",
            )
            assert process.running, process.log_text()
            return cluster, f"127.0.0.1:{port}"

        yield start


def test_throttle_alert_fires_and_resolves_and_dashboard_queries_run(
    tmp_path: Path, exporter
) -> None:
    cluster, target = exporter()
    control = ControlClient(cluster.control_url)
    dashboard = grafana.load()
    with run_prometheus(tmp_path / "prom", {"kvq-exporter": [target]}, [RULES]) as prom:
        prom.wait_for(
            lambda: (
                prom.query(
                    f'cluster:kafka_volume_quota_throttle_factor:min{{cluster="{CLUSTER}"}} == 1'
                )
                and prom.query(f'kafka_volume_quota_active_log_dirs{{cluster="{CLUSTER}"}} == 6')
            ),
            what="exporter scraped, rules evaluated",
        )
        assert prom.firing(THROTTLE) == []
        # the fake exporter of the other rule/dashboard tests publishes the same families
        real = urllib.request.urlopen(f"http://{target}/metrics", timeout=5).read().decode()
        assert metric_families(FakeExporter(cluster=CLUSTER).render()) == metric_families(real)

        # broker 1's first log dir: 5% usable, below the 10% limit
        control.set_log_dir(1, 0, usable_bytes=CAPACITY // 20)
        (alert,) = prom.wait_for(lambda: prom.firing(THROTTLE, cluster=CLUSTER), what="firing")
        assert alert["annotations"]["throttle_factor"] == "0"
        log_dir = str(cluster.log_dir_path(1, 0))
        assert (
            f"broker 1 log dir {log_dir} has 4.768MiB available" in alert["annotations"]["summary"]
        )
        (violating,) = prom.query("kafka_volume_quota_log_dir_violating == 1")
        assert violating["metric"]["broker_id"] == "1"
        assert violating["metric"]["log_dir"] == log_dir

        # every dashboard query runs while throttled; the core panels show data
        prom.wait_for(
            lambda: prom.query("rate(kafka_volume_quota_poll_duration_seconds_count[30s]) > 0"),
            what="a few polls scraped",
        )
        panels_with_data: set[str] = set()
        for query in grafana.queries(dashboard):
            if grafana.run(prom, query, cluster_regex=CLUSTER):
                panels_with_data.add(query.where)
        missing = set(grafana.CORE_PANELS) - panels_with_data
        assert missing == set(), f"core panels without data: {missing}"
        assert "variable cluster" in panels_with_data

        # space comes back: the alert resolves
        control.set_log_dir(1, 0, usable_bytes=None)
        prom.wait_for(lambda: not prom.firing(THROTTLE), what="resolved")
        assert prom.query(f'kafka_volume_quota_throttle_factor{{cluster="{CLUSTER}"}} == 1')


def test_guard_health_alerts_follow_the_real_exporter(tmp_path: Path, exporter) -> None:
    """Unusable log dirs, failing polls and the fallback factor, as the exporter reports them."""
    cluster, target = exporter(
        **{f"{P}throttle.factor.validity.duration": "PT3S", f"{P}throttle.factor.fallback": "0.5"}
    )
    control = ControlClient(cluster.control_url)
    with run_prometheus(tmp_path / "prom", {"kvq-exporter": [target]}, [RULES]) as prom:

        def alert(name: str, state: str = "firing", **labels: str) -> list[dict]:
            return [
                a
                for a in prom.alerts()
                if a["labels"]["alertname"] == name
                and a["state"] == state
                and all(a["labels"].get(k) == v for k, v in labels.items())
            ]

        prom.wait_for(
            lambda: prom.query(f'kafka_volume_quota_active_log_dirs{{cluster="{CLUSTER}"}} == 6'),
            what="exporter scraped",
        )
        # a log dir error and a pre-KIP-827 broker: pending (for: 5m) by reason
        control.set_faults(0, log_dir_error={"index": 1, "code": 56})
        control.set_faults(2, max_describe_log_dirs_version=3)
        unusable = "KafkaVolumeQuotaUnusableLogDirs"
        prom.wait_for(
            lambda: (
                alert(unusable, "pending", reason="error")
                and alert(unusable, "pending", reason="unknown_size")
            ),
            what="unusable log dirs pending",
        )
        control.clear_faults(0)
        control.clear_faults(2)
        prom.wait_for(
            lambda: not [a for a in prom.alerts() if a["labels"]["alertname"] == unusable]
        )

        # every poll fails: after 3 intervals NoSuccessfulPoll; after the validity the fallback
        # factor 0.5 fires the throttle alert with throttle_factor 0.5
        control.set_faults(1, fail_describe_log_dirs=True)
        (stale,) = prom.wait_for(
            lambda: alert("KafkaVolumeQuotaNoSuccessfulPoll", cluster=CLUSTER), what="no poll"
        )
        assert stale["labels"]["instance"] == target
        (throttle,) = prom.wait_for(lambda: prom.firing(THROTTLE, cluster=CLUSTER), what="fallback")
        assert throttle["annotations"]["throttle_factor"] == "0.5"
        assert "fallback throttle factor applies" in throttle["annotations"]["summary"]
        assert prom.wait_for(lambda: alert("KafkaVolumeQuotaFallbackApplied", cluster=CLUSTER))

        # polls succeed again: throttle and staleness resolve; the fallback event stays reported
        control.clear_faults(1)
        prom.wait_for(
            lambda: (
                not prom.firing(THROTTLE) and not prom.firing("KafkaVolumeQuotaNoSuccessfulPoll")
            ),
            what="recovered",
        )
        assert alert("KafkaVolumeQuotaFallbackApplied", cluster=CLUSTER)
