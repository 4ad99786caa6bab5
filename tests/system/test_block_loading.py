"""What spark/README and `kvq-backfill --help` say about loading blocks, checked on the real
Prometheus: blocks copied into the storage of a running Prometheus are served without a restart."""

from __future__ import annotations

import shutil
import subprocess
import time

from devkit.prometheus import PROMTOOL, run_prometheus
from spark.cli import build_parser
from spark.promtool_blocks import how_to_load


def test_a_running_prometheus_loads_copied_blocks_without_a_restart(tmp_path):
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
    storage = tmp_path / "tsdb"
    with run_prometheus(tmp_path / "prom", {}, storage_path=storage, retention="10y") as prom:
        query = "count_over_time(kvq_backfill_probe[4h])"
        assert prom.query(query, at=start + 7200) == []
        for block in blocks.iterdir():  # the README's `cp -r out/blocks/* <storage.tsdb.path>/`
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
