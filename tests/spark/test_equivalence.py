"""The Spark job publishes exactly what the exporter's own policy core (the plain-Python replay)
publishes for the same archive: every family, series, timestamp and value."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, fields
from pathlib import Path
from typing import ClassVar

import pytest
import responses

from devkit.archive_generator import ArchivePlan, generate, write_config
from devkit.python_replay import read_archive, replay
from kvq.contract.archive_record import to_line
from kvq.contract.metric_families import backfilled
from kvq.model.graceful_slowdown import GracefulSlowdown
from kvq.model.limits import MIN_AVAILABLE_BYTES, Limit
from kvq.model.observation import STAGE_DESCRIBE_CLUSTER, STAGE_DESCRIBE_LOG_DIRS, Observation
from kvq.model.policy_run import PolicyRun
from kvq.model.reading_trail import ReadingTrail
from kvq.model.retention_forecast import AHEAD_SECONDS
from kvq.model.throttle_factor_policy import THROTTLED, UNTHROTTLED, VolumeReading, used_bytes
from kvq.model.volume import LogDirDescription
from kvq.settings.config import (
    GRACEFUL_SLOWDOWN,
    SLOWDOWN_HORIZON,
    SLOWDOWN_PEAK_MEMORY,
    SLOWDOWN_RESPONSE,
    THROTTLE_POLICY,
    Config,
    load_config,
)
from spark.evaluation_grid import EvaluationGrid
from spark.job import BackfillRequest, run
from spark.openmetrics_text import read_openmetrics, write_openmetrics
from spark.shard_blocks import BLOCK_RANGE
from tests.kvq.model.test_graceful_slowdown import JITTER, lift_backlog, lift_policy
from tests.spark.backfill_cli import dumped_samples

NS = "kafka_volume_quota_"


OUTPUTS = {"openmetrics": None, "blocks-2h": 2 * 3600, "blocks-18h": 18 * 3600}
"""The outputs the tests compare: the OpenMetrics file, and --blocks's blocks cut at two block
spans (several shards of a few hours, and one range whose volumes are in parts)."""


def backfill_both(
    archive, config, output, step, start=None, end=None, scenario=None, gaps=None, blocks=None
):
    """(Spark samples, replay samples) as {(name, labels): {time: value}}; `blocks`: the span
    of --blocks's block ranges in seconds (the samples read back from the blocks), or None (the
    OpenMetrics file)."""
    url = "http://prometheus.test" if gaps else None
    request = BackfillRequest(
        archive,
        config,
        output,
        step,
        start,
        end,
        scenario,
        prometheus_url=url,
        blocks=blocks is not None,
        block_range=blocks or BLOCK_RANGE,
    )
    result = run(request, lambda message: None)
    contents = read_archive(archive, config.cluster_name)
    observations = contents.observations
    grid = EvaluationGrid.over(observations[0].time, observations[-1].time, step, start, end)
    if gaps:
        grid = grid.only(gaps)
    reference = output / "replay.om"
    write_openmetrics(
        reference,
        backfilled(config.limit, config.policy.gauges),
        replay(observations, config, grid, scenario),
    )
    if blocks is None:
        got = read_openmetrics(result.openmetrics)
    else:
        assert sorted(p.name for p in output.iterdir()) == ["blocks", "replay.om"]
        got = dumped_samples(output / "blocks", output.parent)
    return got, read_openmetrics(reference), result


def assert_same(spark_series, replay_series):
    assert sorted(spark_series) == sorted(replay_series)
    for key, samples in replay_series.items():
        assert spark_series[key] == samples, key


def last_value(series, name, labels='{cluster="kafka"}'):
    samples = series[(NS + name, labels)]
    return samples[max(samples)]


def peak(series, name, labels='{cluster="kafka"}'):
    return max(series[(NS + name, labels)].values())


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    root = tmp_path_factory.mktemp("generated")
    generate(ArchivePlan(brokers=3, dirs_per_broker=2, hours=4), root / "archive")
    return root


@pytest.mark.parametrize("output", OUTPUTS)
def test_generated_history_matches_the_policy_core(spark, generated, tmp_path, output):
    config = load_config(write_config(tmp_path / "kvq.properties", ratio=0.05))
    got, expected, result = backfill_both(
        generated / "archive", config, tmp_path / "out", 60, blocks=OUTPUTS[output]
    )
    # the archive exercises every rule: violations, fallback, cache + eviction, unusable dirs
    assert last_value(expected, "limit_violated_total") > 0
    assert 0.0 in expected[(NS + "throttle_factor", '{cluster="kafka"}')].values()
    assert last_value(expected, "fallback_throttle_factor_applied_total") == 1
    assert 0.5 in expected[(NS + "throttle_factor", '{cluster="kafka"}')].values()
    assert peak(expected, "cached_log_dirs") == 2
    assert last_value(expected, "log_dir_evictions_total") == 2
    assert peak(expected, "unusable_log_dirs", '{cluster="kafka",reason="error"}') == 1
    assert peak(expected, "unusable_log_dirs", '{cluster="kafka",reason="unknown_size"}') == 1
    assert result.bad_lines == 3
    assert_same(got, expected)


@pytest.mark.parametrize("output", ["openmetrics", "blocks-2h"])
def test_scenario_with_another_limit_over_a_sub_range(spark, generated, tmp_path, output):
    config = load_config(
        write_config(tmp_path / "kvq.properties", ratio=0.05),
        {MIN_AVAILABLE_BYTES: "400000000000"},
    )
    start, end = 1_763_596_800.0 + 3600, 1_763_596_800.0 + 3 * 3600
    got, expected, _ = backfill_both(
        generated / "archive",
        config,
        tmp_path / "out",
        30,
        start,
        end,
        scenario="bytes400g",
        blocks=OUTPUTS[output],
    )
    assert all('scenario="bytes400g"' in labels for _, labels in got)
    times = {t for series in got.values() for t in series}
    assert min(times) == start and max(times) == end
    assert (NS + "limit_bytes", '{cluster="kafka",scenario="bytes400g"}') in got
    assert_same(got, expected)


@dataclass(frozen=True)
class SlowDownWhileFilling:
    """A policy with history, the kind the next one is: each volume slows producers down in
    proportion to how fast it filled since its previous reading."""

    limit: Limit
    history: ClassVar[int] = 1
    growth_windows: ClassVar[tuple[float, ...]] = ()
    looks_back: ClassVar[tuple[float, ...]] = ()
    reads_forecast: ClassVar[bool] = False
    accumulates: ClassVar[bool] = False
    gauges: ClassVar[tuple[str, ...]] = ()
    bytes_per_second: float = 1e9
    """The fill rate that asks for factor 0."""

    def volume_factor(self, reading, previous, depth, ops):
        if not previous:
            return UNTHROTTLED
        elapsed = ops.greatest(reading.time - previous[0].time, 1.0)
        rate = (previous[0].available_bytes - reading.available_bytes) / elapsed
        return ops.greatest(THROTTLED, ops.least(UNTHROTTLED, 1.0 - rate / self.bytes_per_second))


class ConfigWithHistoryPolicy(Config):
    @property
    def policy(self):
        return SlowDownWhileFilling(self.limit)


def test_a_policy_with_history_is_declared_once_and_evaluated_alike(spark, generated, tmp_path):
    """The seam for the next policy: one declaration, the backfill's windows give it the same
    previous readings as the exporter's run, and any factor between 0 and 1 comes out alike."""
    config = load_config(write_config(tmp_path / "kvq.properties", ratio=0.05))
    config = ConfigWithHistoryPolicy(**{f.name: getattr(config, f.name) for f in fields(config)})
    got, expected, _ = backfill_both(generated / "archive", config, tmp_path / "out", 60)
    factors = set(expected[(NS + "throttle_factor", '{cluster="kafka"}')].values())
    assert len({f for f in factors if 0.0 < f < 1.0 and f != config.fallback_factor}) > 50
    assert_same(got, expected)


def test_graceful_slowdown_is_evaluated_alike_with_its_gauges(spark, generated, tmp_path):
    """The graceful-slowdown policy (three previous readings, a depth over restarts, two gauges
    and the per-volume factor): the backfill publishes what the exporter published, bit for
    bit."""
    config = load_config(
        write_config(tmp_path / "kvq.properties", ratio=0.05),
        {THROTTLE_POLICY: GRACEFUL_SLOWDOWN, SLOWDOWN_HORIZON: "PT6H"},
    )
    got, expected, _ = backfill_both(generated / "archive", config, tmp_path / "out", 60)
    factors = set(expected[(NS + "throttle_factor", '{cluster="kafka"}')].values())
    assert len({f for f in factors if 0.0 < f < 1.0 and f != config.fallback_factor}) > 50
    assert 0.0 in factors  # violations
    names = {name for name, _ in expected}
    for short in ("log_dir_fill_rate_bytes_per_second", "log_dir_seconds_to_limit"):
        assert NS + short in names
    per_volume = [
        [s[t] for t in sorted(s)]
        for (n, _), s in expected.items()
        if n == NS + "log_dir_throttle_factor"
    ]
    assert any(0.0 < v < 1.0 for series in per_volume for v in series)
    backs = (
        a < 1.0 == b for series in per_volume for a, b in zip(series, series[1:], strict=False)
    )
    assert any(backs)  # a throttled volume back at 1.0
    assert_same(got, expected)


def write_lines(path: Path, observations: list[Observation]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(to_line(o, "kafka") for o in observations))


def test_a_floor_at_once_is_evaluated_alike(spark, tmp_path):
    """A load step that brings a volume within its response time of its limit (14 s here, set
    as `kvq.throttle.slowdown.response.time`: both read it; readings a second apart, as the
    exporter's checks take them in): the factor falls at once, by more than the paced 20 %, to
    a floor the backfill holds as the exporter does, bit for bit."""
    total, available, rows = 32 << 20, 27_080_000, []
    times = [*range(0, 65, 5), *range(65, 71), *range(75, 125, 5)]
    for before, time in zip([0, *times], times, strict=False):
        falling = min(max(time - 62, 0), 8) - min(max(before - 62, 0), 8)
        available -= 1_900_000 * falling + 200_000 * (time - before) * (time > 70)
        rows.append(Observation(1000 + time, (0,), (LogDirDescription(0, "/d", total, available),)))
    write_lines(tmp_path / "archive" / "kafka" / "1970-01-01" / "00.jsonl", rows)
    config = load_config(
        write_config(tmp_path / "kvq.properties", ratio=0.25, interval="PT5S"),
        {THROTTLE_POLICY: GRACEFUL_SLOWDOWN, SLOWDOWN_HORIZON: "PT40S", SLOWDOWN_RESPONSE: "PT14S"},
    )
    assert config.policy.response_seconds == 14.0
    got, expected, _ = backfill_both(tmp_path / "archive", config, tmp_path / "out", 1)
    key = '{broker_id="0",cluster="kafka",log_dir="/d"}'
    factors = [f for _, f in sorted(expected[(NS + "log_dir_throttle_factor", key)].items())]
    steps = zip(factors, factors[1:], strict=False)
    assert any(0.0 < after < 0.75 * before for before, after in steps)
    assert_same(got, expected)


def test_holding_the_write_rate_at_what_retention_frees_is_evaluated_alike(spark, tmp_path):
    """Readings with grown bytes (the partitions' sizes read): graceful slowdown holds the rate
    written at what retention frees over the readings of the last 30 s (`ReadingWindows`), a
    level that the held floor paces down, and restarts once space is freed; a reading without
    them (the first, one after a log dir error, an older exporter's line) starts the window
    afresh and falls back to the net fill rate. The backfill holds it as the exporter does,
    bit for bit."""
    total, used, rows = 32 << 20, 14 << 20, []
    for time in range(0, 295, 5):
        grown = 1_000_000
        freed = 900_000 if 30 <= time < 200 else (10 << 20 if time == 200 else 0)
        used = max(used + grown - freed, 0)
        error = time == 120
        described = LogDirDescription(
            0,
            "/d",
            -1 if error else total,
            -1 if error else total - used,
            56 if error else 0,
            None if time in (0, 100, 125) or error else grown,
        )
        rows.append(Observation(1000 + time, (0,), (described,)))
    write_lines(tmp_path / "archive" / "kafka" / "1970-01-01" / "00.jsonl", rows)
    config = load_config(
        write_config(tmp_path / "kvq.properties", ratio=0.25, interval="PT5S"),
        {THROTTLE_POLICY: GRACEFUL_SLOWDOWN, SLOWDOWN_HORIZON: "PT40S", SLOWDOWN_RESPONSE: "PT14S"},
    )
    got, expected, _ = backfill_both(tmp_path / "archive", config, tmp_path / "out", 5)
    key = '{broker_id="0",cluster="kafka",log_dir="/d"}'
    factors = [f for _, f in sorted(expected[(NS + "log_dir_throttle_factor", key)].items())]
    steps = list(zip(factors, factors[1:], strict=False))
    falls = [0.0 < after < before < 1.0 for before, after in steps]
    assert any(all(falls[i : i + 5]) for i in range(len(falls)))  # the level, paced down
    assert any(before < 1.0 == after for before, after in steps)  # space freed: restarted
    assert_same(got, expected)


def test_windows_begun_at_the_reading_nearest_their_edge_are_evaluated_alike(spark, tmp_path):
    """Polls 5 s apart, each up to 0.4 s early or late, a check taken in between now and then,
    retention freeing most of what is written: a window whose first reading just missed it
    begins at the one just outside (`WINDOW_SLACK_SECONDS`) in the backfill as in the exporter,
    bit for bit."""
    times = sorted({5 * k + JITTER[k % len(JITTER)] for k in range(50)} | {101.0, 152.5})
    total, used, rows = 32 << 20, 14 << 20, []
    for index, time in enumerate(times):
        used += 1_000_000 - (900_000 if time >= 30 else 0)
        grown = 1_000_000 if index else None
        described = LogDirDescription(0, "/d", total, total - used, 0, grown)
        rows.append(Observation(1000 + time, (0,), (described,)))
    write_lines(tmp_path / "archive" / "kafka" / "1970-01-01" / "00.jsonl", rows)
    config = load_config(
        write_config(tmp_path / "kvq.properties", ratio=0.25, interval="PT5S"),
        {THROTTLE_POLICY: GRACEFUL_SLOWDOWN, SLOWDOWN_HORIZON: "PT40S", SLOWDOWN_RESPONSE: "PT14S"},
    )
    trail, begun_outside = ReadingTrail(config.policy.growth_windows, ()), 0
    for observation in rows:
        reading = VolumeReading.of(observation.volumes[0], observation.time)
        windows = trail.windows(reading)
        begun_outside += sum(
            window.start_time < observation.time - seconds
            for window, seconds in zip(windows.growth, config.policy.growth_windows, strict=True)
        )
        trail.take(reading)
    assert begun_outside >= 10
    got, expected, _ = backfill_both(tmp_path / "archive", config, tmp_path / "out", 1)
    assert_same(got, expected)


def test_foreseeing_what_retention_frees_is_evaluated_alike(spark, tmp_path):
    """Readings with what retention frees by each time ahead (the exporter's forecast, archived
    as `retention_freed_bytes`): graceful slowdown spends the headroom until retention frees
    what is written now. Some readings have none (a forecast that failed), some are unknown
    past a minute (-1), one is unknown from the first time ahead, one line has a partial
    forecast (read as none). The backfill holds it as the exporter does, bit for bit, and the
    forecast changes the factors."""
    total, used, rows = 32 << 20, 14 << 20, []
    for time in range(0, 200, 5):
        grown, freed = 1_000_000, (900_000 if time >= 30 else 0)
        used = max(used + grown - freed, 0)
        forecast = tuple(
            -1 if (ahead > 60 and time % 3) or time == 85 else 900_000 * ahead // 5
            for ahead in AHEAD_SECONDS
        )
        described = LogDirDescription(
            0,
            "/d",
            total,
            total - used,
            0,
            None if time == 0 else grown,
            retention_freed=None if time in (50, 55) else forecast,
        )
        rows.append(Observation(1000 + time, (0,), (described,)))
    archive = tmp_path / "archive" / "kafka" / "1970-01-01" / "00.jsonl"
    write_lines(archive, rows)
    lines = archive.read_text().splitlines(keepends=True)
    lines[20] = lines[20].replace('"5":', '"4":')  # a partial forecast: none
    archive.write_text("".join(lines))
    config = load_config(
        write_config(tmp_path / "kvq.properties", ratio=0.25, interval="PT5S"),
        {THROTTLE_POLICY: GRACEFUL_SLOWDOWN, SLOWDOWN_HORIZON: "PT40S", SLOWDOWN_RESPONSE: "PT14S"},
    )
    got, expected, _ = backfill_both(archive.parent.parent.parent, config, tmp_path / "out", 5)
    assert_same(got, expected)
    write_lines(archive, [replace_forecast(o, None) for o in rows])
    _, unforeseen, _ = backfill_both(archive.parent.parent.parent, config, tmp_path / "out2", 5)
    key = (NS + "log_dir_throttle_factor", '{broker_id="0",cluster="kafka",log_dir="/d"}')
    assert min(expected[key].values()) < 1.0
    assert expected[key] != unforeseen[key]


@pytest.mark.parametrize("kept", [True, False], ids=["checkpointed", "computed-for-each-read"])
def test_space_freed_on_one_volume_is_news_to_every_volume_alike(
    spark, tmp_path, monkeypatch, kept
):
    """Broker 0's space freed, and three seconds later broker 1's partitions grow 6 MB in a
    second: the backlog of the lift, no load step (`GracefulSlowdown.stepped`); 25 s after
    that, another 6 MB is one. The backfill tells each volume of a restart elsewhere in its
    cluster within the grace (a column of the cluster's restarts, broadcast) as the exporter
    does: bit for bit, the second flood slowing broker 1 and the first not. Alike whether the
    windows the restarts are read from are checkpointed (a local run) or computed for each
    read (a cluster without spark.checkpoint.dir: `spark.session.checkpoint_kind`)."""
    if not kept:
        monkeypatch.setattr("spark.session.checkpointing", lambda spark: None)
    archive = tmp_path / "archive" / "kafka" / "1970-01-01" / "00.jsonl"
    write_lines(archive, lift_backlog(60, (63, 88)))
    config = load_config(
        write_config(tmp_path / "kvq.properties", ratio=0.25, interval="PT1S"),
        {THROTTLE_POLICY: GRACEFUL_SLOWDOWN, SLOWDOWN_HORIZON: "PT30S", SLOWDOWN_RESPONSE: "PT14S"},
    )
    assert config.policy == lift_policy()
    got, expected, _ = backfill_both(archive.parent.parent.parent, config, tmp_path / "out", 1)
    assert_same(got, expected)
    key = (NS + "log_dir_throttle_factor", '{broker_id="1",cluster="kafka",log_dir="/d"}')
    factors = [f for _, f in sorted(expected[key].items())]
    assert min(factors[60:88]) >= 0.75 and min(factors[88:]) < 0.5


def replace_forecast(observation: Observation, forecast) -> Observation:
    return dataclasses.replace(
        observation,
        log_dirs=tuple(
            dataclasses.replace(d, retention_freed=forecast) for d in observation.log_dirs
        ),
    )


@dataclass(frozen=True, slots=True)
class RisesUnheld(GracefulSlowdown):
    """Graceful slowdown with the forecast's level on the peak's margin alone."""

    level_hold_seconds: ClassVar[float] = 0.0


def closed_loop(config: Config, pattern: list[int], step: int = 2) -> list[Observation]:
    """Five minutes of one volume's readings `step` s apart, written at the factor the policy
    gave the reading before (its pattern's bytes times it, in turn: bursts), retention freeing
    what was written 60 s before and foreseeing it."""
    run = PolicyRun(config.policy)
    total, used, factor = 32 << 20, 16 << 20, UNTHROTTLED
    written: dict[int, int] = {}
    rows = []
    for i, time in enumerate(range(0, 300, step)):
        written[time] = grown = int(factor * pattern[i % len(pattern)])
        used += grown - written.get(time - 60, 0)
        forecast = tuple(
            sum(written.get(t, 0) for t in range(time - 59, time - 59 + ahead))
            if ahead <= 60
            else -1
            for ahead in AHEAD_SECONDS
        )
        described = LogDirDescription(
            0, "/d", total, total - used, 0, None if time == 0 else grown, retention_freed=forecast
        )
        rows.append(Observation(1000 + time, (0,), (described,)))
        factor = run.calculate(rows[-1].volumes, time=1000.0 + time).factor
    return rows


def test_rises_held_on_the_forecast_are_evaluated_alike(spark, tmp_path):
    """With the forecast read, graceful slowdown's level falls on a margin of the window's rate
    and rises past what the peak's margin allows only as far as that level held over the last
    14 s (a maximum over a window of time of a computed column: the exporter keeps the samples,
    the backfill takes it with a window over time). Bursts written in a closed loop, where the
    held rises change most of the factors (116 of 150): the backfill gives them bit for bit."""
    config = load_config(
        write_config(tmp_path / "kvq.properties", ratio=0.25, interval="PT2S"),
        {THROTTLE_POLICY: GRACEFUL_SLOWDOWN, SLOWDOWN_HORIZON: "PT40S", SLOWDOWN_RESPONSE: "PT14S"},
    )
    rows = closed_loop(config, [200_000, 200_000, 1_200_000, 60_000, 60_000, 900_000])
    held, unheld = PolicyRun(config.policy), PolicyRun(RisesUnheld(config.limit, 40.0, 14.0))
    differ = sum(
        held.calculate(o.volumes, time=o.time).factor
        != unheld.calculate(o.volumes, time=o.time).factor
        for o in rows
    )
    assert differ >= len(rows) // 10
    archive = tmp_path / "archive" / "kafka" / "1970-01-01" / "00.jsonl"
    write_lines(archive, rows)
    got, expected, _ = backfill_both(archive.parent.parent.parent, config, tmp_path / "out", 2)
    assert_same(got, expected)


@dataclass(frozen=True, slots=True)
class PacedFromAnywhere(GracefulSlowdown):
    """Graceful slowdown with the level's drops paced from wherever the factor is."""

    def paced_reach(self, reading, peak, ops):
        return 0.0


def test_drops_paced_only_from_where_a_paced_descent_holds_are_evaluated_alike(spark, tmp_path):
    """With the forecast read, a load step (ten times the bytes for 20 s) before retention frees
    anything: the factor is held at once no higher than the one from which a paced descent fits
    in the headroom (above the level's margin, plus what retention frees over 20 s; a reading of
    one time ahead of the forecast, and the window's growth): lower factors from the step's
    first reading on (9 of the 150 readings here); the backfill gives them bit for bit."""
    config = load_config(
        write_config(tmp_path / "kvq.properties", ratio=0.25, interval="PT2S"),
        {THROTTLE_POLICY: GRACEFUL_SLOWDOWN, SLOWDOWN_HORIZON: "PT40S", SLOWDOWN_RESPONSE: "PT14S"},
    )
    rows = closed_loop(config, [60_000] * 10 + [600_000] * 10 + [60_000] * 130)
    paced, anywhere = (
        PolicyRun(config.policy),
        PolicyRun(PacedFromAnywhere(config.limit, 40.0, 14.0)),
    )
    differ = sum(
        paced.calculate(o.volumes, time=o.time).factor
        != anywhere.calculate(o.volumes, time=o.time).factor
        for o in rows
    )
    assert differ >= 5
    archive = tmp_path / "archive" / "kafka" / "1970-01-01" / "00.jsonl"
    write_lines(archive, rows)
    got, expected, _ = backfill_both(archive.parent.parent.parent, config, tmp_path / "out", 2)
    assert_same(got, expected)


def test_peaks_forgotten_after_calm_are_forgotten_alike(spark, tmp_path):
    """A 4 MB replica copied onto the disk 30 s in: the largest burst and the peak, which hold
    producers down; then calm readings (the headroom lasting far more than four horizons at
    what the partitions grow by), in which a memory of a minute forgets the copy within one to
    two minutes; a log dir error, a gap longer than the horizon, a second copy and space freed
    (a restart, the peaks kept) on the way. The backfill forgets as the exporter does, bit for
    bit."""
    total, used, rows = 32 << 20, 10 << 20, []
    for time in range(0, 600, 5):
        if 300 <= time < 360:  # the broker away
            continue
        copied = 4_000_000 if time in (30, 400) else 0
        freed = 6 << 20 if time == 500 else 100_000
        used += 100_000 + copied - freed
        error = time == 120
        described = LogDirDescription(
            0,
            "/d",
            -1 if error else total,
            -1 if error else total - used,
            56 if error else 0,
            None if time == 0 or error else 100_000 + copied,
        )
        rows.append(Observation(1000 + time, (0,), (described,)))
    write_lines(tmp_path / "archive" / "kafka" / "1970-01-01" / "00.jsonl", rows)
    config = load_config(
        write_config(tmp_path / "kvq.properties", ratio=0.25, interval="PT5S"),
        {
            THROTTLE_POLICY: GRACEFUL_SLOWDOWN,
            SLOWDOWN_HORIZON: "PT40S",
            SLOWDOWN_RESPONSE: "PT14S",
            SLOWDOWN_PEAK_MEMORY: "PT1M",
        },
    )
    got, expected, _ = backfill_both(tmp_path / "archive", config, tmp_path / "out", 5)
    key = '{broker_id="0",cluster="kafka",log_dir="/d"}'
    factor = expected[(NS + "log_dir_throttle_factor", key)]
    assert max(f for t, f in factor.items() if 1040 <= t < 1150) < 0.6  # the copy holds them down
    assert factor[1250] == 1.0  # ... until forgotten
    assert_same(got, expected)


@dataclass(frozen=True)
class SlowDownOnWindows:
    """A policy reading windows over time (`ReadingWindows`), the kind one following retention
    is: each volume slows producers down in proportion to what its partitions grew by over the
    last 30 s and 5 s, and to how fast its used bytes grew over them and since 4 and 12 s back."""

    limit: Limit
    history: ClassVar[int] = 0
    growth_windows: ClassVar[tuple[float, ...]] = (30.0, 5.0)
    looks_back: ClassVar[tuple[float, ...]] = (4.0, 12.0)
    reads_forecast: ClassVar[bool] = False
    accumulates: ClassVar[bool] = False
    gauges: ClassVar[tuple[str, ...]] = ()
    bytes_per_second: float = 4e6
    """The sum of the rates that asks for factor 0."""

    def volume_factor(self, reading, previous, depth, ops):
        used = used_bytes(reading)
        rate = 0.0
        for window in reading.windows.growth:
            elapsed = ops.greatest(reading.time - window.start_time, 1.0)
            rate = rate + window.grown / elapsed + (used - window.start_used) / elapsed
        for earlier in reading.windows.earlier:
            elapsed = ops.greatest(reading.time - earlier.time, 1.0)
            rate = rate + (used - earlier.used_bytes) / elapsed
        return ops.greatest(THROTTLED, ops.least(UNTHROTTLED, 1.0 - rate / self.bytes_per_second))


class ConfigWithWindowsPolicy(Config):
    @property
    def policy(self):
        return SlowDownOnWindows(self.limit)


def test_windows_over_a_reading_a_second_are_evaluated_alike(spark, tmp_path):
    """Readings a second apart whose growth comes in bursts (Kafka's quotas mute a producer,
    then let its backlog through), a load step, readings whose growth was not read (a window
    starts afresh after one), an error and a broker away for longer than the windows: the
    backfill's windows over time give a policy's `ReadingWindows` what the exporter's trails
    give it, bit for bit, in one pass however many readings a window holds."""
    total, used, rows = 64 << 20, 30 << 20, []
    times = [*range(0, 150), *range(190, 300)]
    for time in times:
        grown = (400_000 if time % 3 == 0 else 50_000) * (4 if 230 <= time < 240 else 1)
        used += grown - (300_000 if time % 10 == 0 else 0)
        error = time == 100
        described = LogDirDescription(
            0,
            "/d",
            -1 if error else total,
            -1 if error else total - used,
            56 if error else 0,
            None if time in (0, 60, 101, 190) or error else grown,
        )
        rows.append(Observation(1000 + time, (0,), (described,)))
    write_lines(tmp_path / "archive" / "kafka" / "1970-01-01" / "00.jsonl", rows)
    config = load_config(write_config(tmp_path / "kvq.properties", ratio=0.25, interval="PT1S"))
    config = ConfigWithWindowsPolicy(**{f.name: getattr(config, f.name) for f in fields(config)})
    got, expected, _ = backfill_both(tmp_path / "archive", config, tmp_path / "out", 1)
    factors = set(expected[(NS + "throttle_factor", '{cluster="kafka"}')].values())
    assert len({f for f in factors if 0.0 < f < 1.0}) > 100
    assert_same(got, expected)


def test_boundaries_of_validity_cache_and_grid(spark, tmp_path):
    """Exact boundaries: expiry at equality, cache age == validity, observation at a grid time,
    equal timestamps, a fallback before the first success, unusable dirs never cached."""
    d0, d1 = "/data/0", "/data/1"
    bad_cluster, bad_dirs = STAGE_DESCRIBE_CLUSTER, STAGE_DESCRIBE_LOG_DIRS
    full = LogDirDescription(1, d0, 1000, 10)
    rows = [
        Observation.failed(700, bad_cluster, "x"),
        Observation.failed(760, bad_dirs, "x", active_brokers=(0, 1)),
        Observation.failed(850, bad_cluster, "x"),  # 850 > 700 + 120: fallback before success
        Observation(
            1000,
            (0, 1),
            (LogDirDescription(0, d0, 1000, 500), full, LogDirDescription(1, d1, 1000, 5, 56)),
        ),
        Observation(1060, (0,), (LogDirDescription(0, d0, 1000, 400),)),  # broker 1 cached
        Observation(  # age == validity: evicted, at the boundary as the plugin's cache
            1120, (0,), (LogDirDescription(0, d0, 1000, 400),)
        ),
        Observation(1150, (0,), (LogDirDescription(0, d0, 1000, 400),)),
        Observation.failed(1180, bad_cluster, "x"),
        Observation.failed(1270, bad_dirs, "x", active_brokers=(0, 1)),  # == expiry: no fallback
        Observation.failed(1300, bad_cluster, "x"),  # fallback
        Observation(1330, (0,), (LogDirDescription(0, d0, 1000, 100),)),  # violates (10%)
        Observation.failed(1330, bad_dirs, "x", active_brokers=(0, 1, 2)),  # same time
        Observation(1450, (0,), (LogDirDescription(0, d0, 1000, 400),)),  # exactly at expiry: valid
        Observation(
            1460, (0, 1), (LogDirDescription(0, d0, 1000, 400), LogDirDescription(1, d0, 1000, 600))
        ),
        Observation(
            1470, (0, 1), (LogDirDescription(0, d0, 1000, 400), LogDirDescription(1, d0, -1, -1))
        ),
        Observation(
            1480, (0,), (LogDirDescription(0, d0, 1000, 400),)
        ),  # unusable before: not cached
    ]
    write_lines(tmp_path / "archive" / "kafka" / "1970-01-01" / "00.jsonl", rows)
    config = load_config(  # no violation hold: the validity boundaries alone
        write_config(
            tmp_path / "kvq.properties",
            ratio=0.2,
            validity="PT2M",
            fallback=0.25,
            extra={"kvq.departed.broker.violation.hold": "PT0S"},
        )
    )
    got, expected, _ = backfill_both(tmp_path / "archive", config, tmp_path / "out", 10)
    factor = expected[(NS + "throttle_factor", '{cluster="kafka"}')]
    assert (
        factor[850] == 0.25 and factor[1000] == 0.0 and factor[1340] == 0.0 and factor[1450] == 1.0
    )
    assert last_value(expected, "fallback_throttle_factor_applied_total") == 2
    assert last_value(expected, "log_dir_evictions_total") == 1
    cached = expected[(NS + "cached_log_dirs", '{cluster="kafka"}')]
    assert cached[1110] == 1 and cached[1120] == 0
    assert expected[(NS + "log_dir_evictions_total", '{cluster="kafka"}')][1120] == 1
    assert expected[(NS + "active_brokers", '{cluster="kafka"}')][1330] == 3
    assert_same(got, expected)


def test_zero_sized_volume_violates_and_a_disabled_check_never_falls_back(spark, tmp_path):
    """Total 0 / usable 0 is a volume with ratio 0 (it violates); with storage.check.interval=PT0S
    the factor stays 1.0 and no fallback applies, however old the last success."""
    rows = [
        Observation(
            1000, (0,), (LogDirDescription(0, "/d", 0, 0), LogDirDescription(0, "/e", -1, -1))
        ),
        Observation.failed(1060, STAGE_DESCRIBE_LOG_DIRS, "x", active_brokers=(0,)),
        Observation.failed(1400, STAGE_DESCRIBE_CLUSTER, "x"),  # long after the validity
    ]
    write_lines(tmp_path / "archive" / "kafka" / "1970-01-01" / "00.jsonl", rows)
    checked = load_config(write_config(tmp_path / "on.properties", validity="PT2M", fallback=0.0))
    got, expected, _ = backfill_both(tmp_path / "archive", checked, tmp_path / "on", 10)
    key = '{broker_id="0",cluster="kafka",log_dir="/d"}'
    assert expected[(NS + "log_dir_available_ratio", key)][1000] == 0.0
    assert expected[(NS + "log_dir_violating", key)][1000] == 1.0
    assert expected[(NS + "throttle_factor", '{cluster="kafka"}')][1000] == 0.0
    assert peak(expected, "unusable_log_dirs", '{cluster="kafka",reason="unknown_size"}') == 1
    assert last_value(expected, "fallback_throttle_factor_applied_total") == 1
    assert_same(got, expected)

    off = load_config(
        write_config(tmp_path / "off.properties", validity="PT2M", fallback=0.0, interval="PT0S")
    )
    got, expected, _ = backfill_both(tmp_path / "archive", off, tmp_path / "off", 10)
    assert set(expected[(NS + "throttle_factor", '{cluster="kafka"}')].values()) == {1.0}
    assert last_value(expected, "fallback_throttle_factor_applied_total") == 0
    assert_same(got, expected)


def test_violation_hold_of_a_departed_full_broker(spark, tmp_path):
    """Validity 2 minutes, hold 5: broker 1 leaves full and is held past the validity; broker 2
    leaves full and its hold expires (reported until it is back); broker 3 leaves full, answers
    again without that log dir, and its held volume is evicted then."""
    full, ok = 10, 900

    def dirs(*entries):
        return tuple(LogDirDescription(b, d, 1000, free) for b, d, free in entries)

    base = [(0, "/a", ok)]
    rows = [
        Observation(
            1000,
            (0, 1, 2, 3),
            dirs(*base, (1, "/a", full), (2, "/a", full), (3, "/a", full), (3, "/b", ok)),
        ),
        Observation(1060, (0,), dirs(*base)),
        Observation(1120, (0,), dirs(*base)),  # age == validity: 1, 2, 3/a held; 3/b evicted
        Observation(1180, (0, 3), dirs(*base, (3, "/b", ok))),  # 3 back without /a: evicted
        Observation(1240, (0, 3), dirs(*base, (3, "/b", ok))),  # 1 and 2 held
        # 1 back, fine; 2's hold (age == hold) ran out: released and reported
        Observation(1300, (0, 1, 3), dirs(*base, (1, "/a", ok), (3, "/b", ok))),
        Observation(1301, (0, 3), dirs(*base, (3, "/b", ok))),
        Observation(1361, (0, 3), dirs(*base, (3, "/b", ok))),
        Observation(1500, (0, 3), dirs(*base, (3, "/b", ok))),  # 1 (left fine) evicted
        Observation(1560, (0, 2, 3), dirs(*base, (2, "/a", ok), (3, "/b", ok))),  # 2 back
    ]
    write_lines(tmp_path / "archive" / "kafka" / "1970-01-01" / "00.jsonl", rows)
    config = load_config(
        write_config(
            tmp_path / "kvq.properties",
            ratio=0.05,
            validity="PT2M",
            extra={"kvq.departed.broker.violation.hold": "PT5M"},
        )
    )
    got, expected, _ = backfill_both(tmp_path / "archive", config, tmp_path / "out", 10)
    c = '{cluster="kafka"}'
    factor = expected[(NS + "throttle_factor", c)]
    held = expected[(NS + "held_log_dirs", c)]
    released = expected[(NS + "violation_hold_expired_log_dirs", c)]
    assert held[1240] == 2 and factor[1240] == 0.0
    assert max(released.values()) == 1 and released[1500] == 1 and released[1560] == 0
    assert factor[1560] == 1.0
    assert_same(got, expected)


@pytest.mark.parametrize("hold", ["PT5M", "PT1M", "PT0S"])
def test_violation_hold_of_a_full_log_dir_that_went_offline(spark, tmp_path, hold):
    """Validity 2 minutes. Full log dirs go offline (error 56, sizes -1; or sizes -1 alone) and
    are held at once; one comes back full, then with space; one's broker answers without it; one
    leaves, comes back offline and is seen with sizes again; one's hold runs out while offline
    (reported until seen again); one whose departed hold ran out comes back offline (still
    reported); one that errors with space is never held. A hold of 1 minute
    runs out on the first offline poll; a hold of zero holds nothing (the plugin's behaviour)."""
    full, ok = 10, 900

    def at(broker, free, log_dir="/a"):
        if free == "error":
            return LogDirDescription(broker, log_dir, -1, -1, 56)
        if free == "unknown":
            return LogDirDescription(broker, log_dir, -1, -1)
        return LogDirDescription(broker, log_dir, 1000, free)

    def poll(time, *dirs):
        return Observation(time, tuple(sorted({d.broker_id for d in dirs})), dirs)

    rows = [
        poll(
            1000,
            at(0, ok),
            at(1, full),
            at(2, full),
            at(3, full),
            at(3, ok, "/b"),
            at(4, ok),
            at(5, full),
            at(6, full),
            at(7, full),
        ),
        poll(  # 1, 2, 3, 6 held at once; 4 had space: not held; 5 away
            1060,
            at(0, ok),
            at(1, "error"),
            at(2, "error"),
            at(3, "error"),
            at(3, ok, "/b"),
            at(4, "error"),
            at(6, "unknown"),
        ),
        poll(  # 1 back full; 3 answers without /a: evicted; 5 back offline (age == validity)
            1120,
            at(0, ok),
            at(1, full),
            at(2, "error"),
            at(3, ok, "/b"),
            at(4, "error"),
            at(5, "error"),
            at(6, "unknown"),
        ),
        poll(1180, at(0, ok), at(1, ok), at(2, "error"), at(3, ok, "/b"), at(5, "error")),
        poll(1240, at(0, ok), at(5, "error"), at(6, full)),  # 2 away while offline
        poll(1300, at(0, ok), at(2, "error"), at(5, "error")),  # age == 5 min: 2's, 5's hold out
        # 5 seen again; 7, whose departed hold ran out at 1300, back offline: not seen again
        poll(1360, at(0, ok), at(2, "error"), at(5, ok), at(6, ok), at(7, "error")),
        poll(1420, at(0, ok), at(2, ok), at(4, ok), at(7, ok)),  # 2 and 7 seen again
    ]
    write_lines(tmp_path / "archive" / "kafka" / "1970-01-01" / "00.jsonl", rows)
    config = load_config(
        write_config(
            tmp_path / "kvq.properties",
            ratio=0.05,
            validity="PT2M",
            extra={"kvq.departed.broker.violation.hold": hold},
        )
    )
    got, expected, _ = backfill_both(tmp_path / "archive", config, tmp_path / "out", 10)
    c = '{cluster="kafka"}'
    factor = expected[(NS + "throttle_factor", c)]
    held = expected[(NS + "held_log_dirs", c)]
    released = expected[(NS + "violation_hold_expired_log_dirs", c)]
    if hold == "PT5M":
        assert held[1060] == 4 and factor[1060] == 0.0  # 1, 2, 3, 6
        assert held[1120] == 4  # 2, 5, 6 offline (5 also past the validity), 7 away; 1 fresh
        assert factor[1180] == 0.0 and held[1240] == 3 and released[1290] == 0
        assert released[1300] == 3 and released[1360] == 2 and released[1420] == 0
    elif hold == "PT1M":  # 1, 2, 3, 6 out on their first offline poll (age == hold)
        assert max(held.values()) == 0 and released[1060] == 4 and released[1420] == 0
        assert factor[1180] == 1.0
    else:
        assert set(held.values()) == set(released.values()) == {0.0}
        assert factor[1180] == 1.0
    assert_same(got, expected)


@pytest.mark.parametrize("output", ["openmetrics", "blocks-2h"])
@responses.activate
def test_only_the_gaps_prometheus_lacks_are_backfilled(spark, generated, tmp_path, output):
    config = load_config(write_config(tmp_path / "kvq.properties", ratio=0.05))
    first = 1_763_596_800 // 60 + 1
    held = [60 * k for k in range(first, first + 240) if not 60 <= k - first < 100]
    responses.get(
        "http://prometheus.test/api/v1/query_range",
        json={
            "status": "success",
            "data": {
                "resultType": "matrix",
                "result": [{"metric": {}, "values": [[t, "1"] for t in held]}],
            },
        },
    )
    gap = (first + 60, first + 99)
    got, expected, _ = backfill_both(
        generated / "archive", config, tmp_path / "out", 60, gaps=[gap], blocks=OUTPUTS[output]
    )
    times = sorted({t for series in got.values() for t in series})
    assert times == [60 * k for k in range(gap[0], gap[1] + 1)]
    assert_same(got, expected)


@responses.activate
def test_another_cluster_label_names_every_series_as_the_exporter_does(spark, generated, tmp_path):
    """kvq.cluster.label=kafka_cluster: every backfilled series (per volume, cluster-wide, with a
    scenario) carries `kafka_cluster` and no `cluster`, exactly as the exporter's families; the
    Prometheus coverage query asks by that label."""
    config = load_config(
        write_config(
            tmp_path / "kvq.properties", ratio=0.05, extra={"kvq.cluster.label": "kafka_cluster"}
        )
    )
    assert config.cluster_label == "kafka_cluster"
    first = 1_763_596_800 // 60 + 1
    responses.get(
        "http://prometheus.test/api/v1/query_range",
        json={"status": "success", "data": {"resultType": "matrix", "result": []}},
    )
    got, expected, _ = backfill_both(
        generated / "archive",
        config,
        tmp_path / "out",
        60,
        scenario="s1",
        gaps=[(first, first + 239)],
    )
    (query,) = {call.request.params["query"] for call in responses.calls}
    assert '{kafka_cluster="kafka",scenario="s1"}' in query
    assert all('kafka_cluster="kafka"' in labels for _, labels in got)
    assert not any(labels.startswith("{cluster=") or ",cluster=" in labels for _, labels in got)
    volume_series = [labels for name, labels in got if name == NS + "log_dir_available_bytes"]
    assert volume_series and all(
        labels.startswith('{broker_id="') and ',kafka_cluster="kafka",log_dir="' in labels
        for labels in volume_series
    )
    assert_same(got, expected)
