"""kvq-backfill --blocks on a generated archive: the real promtool builds blocks on the executors,
the real Prometheus serves them (overlapping blocks included: no flag), and every backfilled
series reads back exactly as the OpenMetrics output and the plain-Python replay have it."""

from __future__ import annotations

import json
import re
from pathlib import Path

from devkit.archive_generator import ArchivePlan, generate, write_config
from devkit.prometheus import run_prometheus
from spark.openmetrics_text import read_openmetrics
from tests.spark.backfill_cli import replayed_samples, run_backfill

NS = "kafka_volume_quota_"
SAMPLE = re.compile(r"^([a-z_]+)(\{.*\})? (\S+) (\d+)$")


def check_layout(path: Path) -> None:
    """What promtool needs: TYPE/HELP once per family, families and series contiguous, each
    series in time order, whole-second timestamps, a final # EOF."""
    lines = path.read_text().splitlines()
    assert lines[-1] == "# EOF" and lines.count("# EOF") == 1
    seen_families: list[str] = []
    seen_series: set[str] = set()
    current_series, last_time = None, -1
    for line in lines[:-1]:
        if line.startswith("# TYPE "):
            family = line.split()[2]
            assert family not in seen_families, f"family {family} interleaved"
            seen_families.append(family)
            continue
        if line.startswith("# HELP "):
            assert line.split()[2] == seen_families[-1]
            continue
        name, labels, _, ts = SAMPLE.match(line).groups()
        assert name.removesuffix("_total") == seen_families[-1]
        series = name + (labels or "")
        if series != current_series:
            assert series not in seen_series, f"series {series} interleaved"
            seen_series.add(series)
            current_series, last_time = series, -1
        assert int(ts) > last_time and len(ts) == 10, line
        last_time = int(ts)


def stored_samples(blocks: Path, times: list[int], tmp: Path) -> dict:
    """Every sample a Prometheus serving `blocks` (kept for 100 years) holds between the first
    and last of `times`, as read_openmetrics gives them."""
    with run_prometheus(tmp, {}, storage_path=blocks, retention="100y") as prom:
        # a range selector returns the raw stored samples (no lookback filling)
        span = times[-1] - times[0] + 1
        result = prom.query(f'{{__name__=~"kafka_volume_quota_.+"}}[{span}s]', at=times[-1])
    read_back = {}
    for series in result:
        metric = dict(series["metric"])
        name = metric.pop("__name__")
        labels = "{" + ",".join(f'{k}="{metric[k]}"' for k in sorted(metric)) + "}"
        read_back[(name, labels)] = {int(t): float(v) for t, v in series["values"]}
    return read_back


def test_blocks_load_into_prometheus_and_read_back_exactly(spark, tmp_path, capsys):
    """The OpenMetrics output first (laid out as promtool needs it), then --blocks into the
    same folder: Prometheus serves the blocks' samples, exactly the file's."""
    generate(ArchivePlan(brokers=2, dirs_per_broker=2, hours=3), tmp_path / "archive")
    config = write_config(tmp_path / "kvq.properties", ratio=0.05)
    out = tmp_path / "out"
    assert run_backfill(tmp_path / "archive", config, out, "--step", "PT1M") == 0
    om = out / "kafka.om"
    check_layout(om)
    written = read_openmetrics(om)
    capsys.readouterr()
    code = run_backfill(tmp_path / "archive", config, out, "--step", "PT1M", "--blocks")
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "bad line" in captured.err and ".jsonl" in captured.err
    assert "retention" in captured.out and "cp -r" in captured.out
    assert f"{out / 'blocks'}: {sum(len(s) for s in written.values())} samples" in captured.out
    times = sorted({t for series in written.values() for t in series})
    blocks = out / "blocks"
    assert sorted(p.name for p in out.iterdir()) == ["blocks", "kafka.om"]  # no work folder
    assert all((b / "meta.json").is_file() for b in blocks.iterdir())

    read_back = stored_samples(blocks, times, tmp_path / "prom")
    factor = read_back[(NS + "throttle_factor", '{cluster="kafka"}')]
    assert set(factor.values()) == {0.0, 0.5, 1.0}  # throttled, fallback, normal
    assert (
        max(
            read_back[(NS + "fallback_throttle_factor_applied_total", '{cluster="kafka"}')].values()
        )
        == 1
    )
    # every series and sample promtool ingested equals what the job wrote: nothing dropped
    assert read_back.keys() == written.keys()
    for key, samples in written.items():
        assert read_back[key] == samples, key


def test_a_multi_day_history_is_whole_in_prometheus_in_18_hour_blocks(spark, tmp_path, capsys):
    """60 hours: the executors build blocks of the 18-hour ranges (the ranges Prometheus itself
    compacts to at its default retention), none crossing a range, the volumes' and the
    cluster-wide series' blocks of a range overlapping, and every sample of the 60 hours reads
    back from Prometheus as the replay has it."""
    plan = ArchivePlan(brokers=2, dirs_per_broker=2, hours=60, interval=60)
    generate(plan, tmp_path / "archive")
    config = write_config(tmp_path / "kvq.properties")
    code = run_backfill(
        tmp_path / "archive", config, tmp_path / "out", "--step", "PT2M", "--blocks"
    )
    err = capsys.readouterr().err
    assert code == 0, err
    expected = replayed_samples(tmp_path / "archive", config, 120, tmp_path / "replay")
    times = sorted({t for series in expected.values() for t in series})
    span = 18 * 3600 * 1000
    ranges = sorted({t * 1000 // span for t in times})
    assert len(ranges) == 4  # 2025-11-20T00:00Z + 60 h: 18 + 18 + 18 + 6 hours
    assert "4 block range(s) of 18h" in err
    blocks = tmp_path / "out" / "blocks"
    metas = [json.loads((b / "meta.json").read_text()) for b in blocks.iterdir()]
    assert sorted({m["minTime"] // span for m in metas}) == ranges
    assert len(metas) > len(ranges)  # each range: the volumes' block(s), the cluster-wide one
    assert all((m["maxTime"] - 1) // span == m["minTime"] // span for m in metas)
    assert sum(m["stats"]["numSamples"] for m in metas) == sum(len(s) for s in expected.values())

    read_back = stored_samples(blocks, times, tmp_path / "prom")
    assert read_back.keys() == expected.keys()
    for key, samples in expected.items():
        assert read_back[key] == samples, key
