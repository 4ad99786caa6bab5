"""Run `kvq-backfill` in-process with its three required flags: one place for the argv block;
read the samples of its blocks back."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from spark.cli import main


def run_backfill(archive: Path, config: Path, output: Path, *extra: str) -> int:
    """`kvq-backfill --archive A --config C --output O [extra...]`; returns the exit code."""
    return main(
        ["--archive", str(archive), "--config", str(config), "--output", str(output), *extra]
    )


def dumped_samples(blocks: Path, work: Path) -> dict[tuple[str, str], dict[int, float]]:
    """Every sample of the TSDB blocks in `blocks` as promtool reads them back (`promtool tsdb
    dump`, overlapping blocks merged), in `read_openmetrics`'s shape: {(name, label text):
    {time in seconds: value}}. `work`: a folder for a copy (the dump wants a `wal` folder)."""
    db = work / "dumped-db"
    shutil.rmtree(db, ignore_errors=True)
    shutil.copytree(blocks, db)
    (db / "wal").mkdir()
    dump = subprocess.run(
        ["promtool", "tsdb", "dump", str(db)], capture_output=True, text=True, check=True
    ).stdout
    shutil.rmtree(db)
    samples: dict[tuple[str, str], dict[int, float]] = {}
    for line in dump.splitlines():  # {__name__="a", b="c"} 1 1700000000000
        head, value, milliseconds = line.rsplit(" ", 2)
        labels = dict(pair.split("=", 1) for pair in head[1:-1].split(", "))
        name = json.loads(labels.pop("__name__"))
        text = "{" + ",".join(f"{k}={labels[k]}" for k in sorted(labels)) + "}"
        series = samples.setdefault((name, text if labels else ""), {})
        assert int(milliseconds) % 1000 == 0, line
        series[int(milliseconds) // 1000] = float(value)
    return samples


def replayed_samples(
    archive: Path, config: Path, step: int, work: Path
) -> dict[tuple[str, str], dict[int, float]]:
    """What the plain-Python replay (the exporter's own policy core) publishes for `archive`
    at every `step`, in `read_openmetrics`'s shape; `work`: a folder for its file."""
    from devkit.python_replay import read_archive, replay
    from kvq.contract.metric_families import backfilled
    from kvq.settings.config import load_config
    from spark.evaluation_grid import EvaluationGrid
    from spark.openmetrics_text import read_openmetrics, write_openmetrics

    loaded = load_config(config)
    observations = read_archive(archive, loaded.cluster_name).observations
    grid = EvaluationGrid.over(observations[0].time, observations[-1].time, step)
    work.mkdir(parents=True, exist_ok=True)
    path = work / "replay.om"
    families = backfilled(loaded.limit, loaded.policy.gauges)
    write_openmetrics(path, families, replay(observations, loaded, grid))
    return read_openmetrics(path)
