"""Done-when proof: a live exporter run against devcluster (a fill event, a broker stop with cache
and eviction, a fallback) is archived, backfilled through promtool into the real Prometheus, and the
backfilled factor and counters equal what the live exporter published at the same moments. And
what docs/backfill.md and `kvq-backfill --help` say about loading blocks, checked on the real
Prometheus: blocks copied into the storage of a running Prometheus are served without a restart."""

from __future__ import annotations

import math
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from devcluster.control_client import ControlClient
from devkit.processes import ManagedProcess, http_ok, server_port, wait_until
from devkit.prometheus import PROMTOOL, Prometheus, run_prometheus
from devkit.python_replay import read_archive
from kvq.settings.config import load_config
from spark.cli import build_parser
from spark.promtool_blocks import how_to_load
from tests.spark.backfill_cli import run_backfill

pytestmark = pytest.mark.paced
"""Both tests wait at Prometheus' pace (the live run's polls, its look for new blocks once a
minute) with little CPU: `make test` runs them in the paced lane."""
P = "client.quota.callback.static."
NS = "kafka_volume_quota_"
CAPACITY = 10_000_000
VALIDITY = 5.0
COMPARED = (
    NS + "throttle_factor",
    NS + "fallback_throttle_factor_applied_total",
    NS + "limit_violated_total",
    NS + "log_dir_evictions_total",
    NS + "active_brokers",
)
MARGIN = 0.15
"""Seconds around a state change within which a scrape may see either side of it."""


@pytest.fixture(scope="module", autouse=True)
def running_prometheus(tmp_path_factory) -> Iterator[tuple[Prometheus, Path]]:
    """A Prometheus started with this module and left running, as a user's is: (it, its storage).
    A running Prometheus looks for new blocks in its storage once a minute from its start, so
    after the live run (about 40 s) its next look is seconds away, not a minute."""
    work = tmp_path_factory.mktemp("running-prometheus")
    storage = work / "tsdb"
    with run_prometheus(work, {}, storage_path=storage, retention="10y") as prom:
        yield prom, storage


def exporter_value(base: str, name: str, **labels: str) -> float:
    text = requests.get(base + "/metrics", timeout=5).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and labels.items() <= sample.labels.items():
                return sample.value
    return math.nan


def raw_samples(prom, names, start: float, end: float) -> dict[str, dict[float, float]]:
    """{name: {time: value}} of the stored samples (range selector: no lookback filling)."""
    span = math.ceil(end - start) + 2
    out: dict[str, dict[float, float]] = {}
    for name in names:
        for series in prom.query(f'{name}{{cluster="live"}}[{span}s]', at=end + 1):
            out.setdefault(name, {}).update({float(t): float(v) for t, v in series["values"]})
    return out


def record_live_history(tmp_path, cluster) -> tuple[dict, float, float]:
    """Run exporter + Prometheus through the scenario; return the live samples and the span."""
    control = ControlClient(cluster.control_url)
    config = tmp_path / "kvq.properties"
    config.write_text(
        f"{P}kafka.admin.bootstrap.servers={cluster.bootstrap}\n"
        f"{P}storage.per.volume.limit.min.available.ratio=0.1\n"
        f"{P}storage.check.interval=PT2S\n"  # scrapes every 1 s: half of them far from a poll
        f"{P}throttle.factor.validity.duration=PT5S\n"
        f"{P}throttle.factor.fallback=0.5\n"
        "kvq.exporter.request.timeout=PT1S\n"
        # Polls every 2 s while violating too: at the default 1 s every scrape while throttled
        # would follow a poll within MARGIN (polls end just before scrapes), none comparable.
        "kvq.exporter.violation.check.interval=PT0S\n"
        "kvq.cluster.name=live\n"
    )
    port = server_port()
    base = f"http://127.0.0.1:{port}"
    argv = [
        sys.executable,
        "-m",
        "exporter.cli",
        "--config",
        str(config),
        "--listen",
        f"127.0.0.1:{port}",
        "--archive-dir",
        str(tmp_path / "archive"),
    ]

    def until(name, predicate, what, **labels):
        wait_until(
            lambda: predicate(exporter_value(base, NS + name, **labels)), timeout=30, what=what
        )

    with ManagedProcess(argv, tmp_path / "exporter.log") as exporter:
        exporter.wait_ready(lambda: http_ok(base + "/ready"), timeout=30, what="exporter ready")
        with run_prometheus(tmp_path / "live", {"kvq": [f"127.0.0.1:{port}"]}) as prom:
            prom.wait_for(
                lambda: (
                    len(prom.query(f"{NS}throttle_factor[5s]"))
                    and len(prom.query(f"{NS}throttle_factor[5s]")[0]["values"]) >= 3
                ),
                what="three scrapes",
            )
            control.set_log_dir(1, 0, usable_bytes=CAPACITY // 20)  # 5% < 10%: throttle
            until("throttle_factor", lambda v: v == 0.0, "factor 0 after the fill")
            until("limit_violated_total", lambda v: v >= 3, "three violating polls")
            control.set_log_dir(1, 0, usable_bytes=None)
            until("throttle_factor", lambda v: v == 1.0, "factor 1 after the cleanup")
            control.stop_broker(2)
            until("cached_log_dirs", lambda v: v == 2, "broker 2's dirs cached")
            until("log_dir_evictions_total", lambda v: v == 2, "then evicted")
            control.start_broker(2)
            until("active_brokers", lambda v: v == 3, "broker 2 back")
            control.set_faults(1, fail_describe_log_dirs=True)
            until("fallback_active", lambda v: v == 1.0, "fallback after validity")
            until(
                "poll_failures_total", lambda v: v >= 6, "failed polls", stage="describe_log_dirs"
            )
            control.clear_faults(1)
            until("fallback_active", lambda v: v == 0.0, "recovered")
            end_marker = exporter_value(base, NS + "last_successful_poll_timestamp_seconds")
            wait_until(
                lambda: (
                    exporter_value(base, NS + "last_successful_poll_timestamp_seconds")
                    > end_marker + 2
                ),
                timeout=30,
                what="two more polls",
            )
            scraped = prom.query(f"{NS}throttle_factor[10m]")[0]["values"]
            start, end = float(scraped[0][0]), float(scraped[-1][0])
            live = raw_samples(prom, COMPARED, start, end)
        exporter.stop()
    return live, start, end


def event_times(archive, cluster: str) -> list[float]:
    """Moments the published state can change: observations, and the expiry of each success
    not followed by another within the validity (when the fallback starts)."""
    observations = read_archive(archive, cluster).observations
    successes = [o.time for o in observations if o.succeeded]
    expiries = [
        s + VALIDITY
        for s, nxt in zip(successes, successes[1:] + [math.inf], strict=True)
        if nxt > s + VALIDITY
    ]
    return sorted([o.time for o in observations] + expiries)


def comparable_grid_time(scrape: float, events: list[float]) -> int | None:
    """A whole second showing the same state as a scrape at `scrape`: no event between them."""
    for grid_time in (math.floor(scrape), math.ceil(scrape)):
        low, high = sorted((grid_time, scrape))
        if not any(low - MARGIN <= e <= high + MARGIN for e in events):
            return grid_time
    return None


@pytest.mark.e2e
def test_backfill_of_a_live_run_equals_what_the_exporter_published(spark, tmp_path, devcluster):
    cluster = devcluster(brokers=3, log_dirs_per_broker=2, capacity_bytes=CAPACITY)
    live, start, end = record_live_history(tmp_path, cluster)
    config = tmp_path / "kvq.properties"
    assert load_config(config).cluster_name == "live"
    code = run_backfill(
        tmp_path / "archive", config, tmp_path / "out", "--step", "PT1S", "--blocks"
    )
    assert code == 0
    with run_prometheus(
        tmp_path / "backfilled", {}, storage_path=tmp_path / "out" / "blocks", retention="100y"
    ) as prom:
        backfilled = raw_samples(prom, COMPARED, start - 5, end + 5)
    events = event_times(tmp_path / "archive", "live")
    compared = {name: 0 for name in COMPARED}
    factors = set()
    scrapes = len(live[NS + "throttle_factor"])
    for name in COMPARED:
        for scrape, value in live[name].items():
            grid_time = comparable_grid_time(scrape, events)
            if grid_time is None or grid_time not in backfilled[name]:
                continue
            assert backfilled[name][grid_time] == value, (name, scrape, grid_time)
            compared[name] += 1
            if name == NS + "throttle_factor":
                factors.add(value)
    assert factors == {0.0, 0.5, 1.0}  # throttled, fallback and normal moments all compared
    assert all(count >= scrapes // 4 for count in compared.values()), (compared, scrapes)
    assert max(backfilled[NS + "log_dir_evictions_total"].values()) == 2
    assert max(backfilled[NS + "fallback_throttle_factor_applied_total"].values()) == 1


@pytest.mark.e2e
def test_a_running_prometheus_loads_copied_blocks_without_a_restart(tmp_path, running_prometheus):
    prom, storage = running_prometheus
    start = (int(time.time()) // 60 - 180) * 60  # three hours ago, whole minutes
    lines = ["# TYPE kvq_backfill_probe gauge"]
    lines += [f'kvq_backfill_probe{{cluster="c"}} {i} {start + 60 * i}' for i in range(120)]
    openmetrics = tmp_path / "probe.om"
    openmetrics.write_text("\n".join([*lines, "# EOF"]) + "\n")
    blocks = tmp_path / "blocks"
    subprocess.run(
        [PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", str(openmetrics), str(blocks)],
        check=True,
        capture_output=True,
    )
    query = "count_over_time(kvq_backfill_probe[4h])"
    assert prom.query(query, at=start + 7200) == []
    for block in blocks.iterdir():  # docs/backfill.md's `cp -r out/blocks/* <storage.tsdb.path>/`
        shutil.copytree(block, storage / block.name)
    copied = time.monotonic()
    (series,) = prom.wait_for(
        lambda: prom.query(query, at=start + 7200), timeout=150, what="the copied blocks"
    )
    assert series["value"][1] == "120"
    assert prom.process.running  # the same process: no restart
    assert time.monotonic() - copied < 150
    epilog = build_parser().epilog or ""
    for text in (epilog, how_to_load(blocks)):
        assert "no restart" in " ".join(text.split())
