"""The driver's per-poll state: success numbering, expiry at the boundary, fallback counting and
the grid walk, without Spark (the equivalence tests prove the whole against the policy core)."""

from __future__ import annotations

import json

from spark.evaluation_grid import EvaluationGrid
from spark.poll_history import FallbackRules, PollHistory, PollLine, VolumeDeltas

RULES = FallbackRules(validity=120.0, fallback_factor=0.5, start_time=0.0, hold=600.0)


def ok(time: float, line: int, violating: int = 0, observed: int = 2) -> PollLine:
    return PollLine(time, "a.jsonl", line, True, brokers=2, observed=observed, violating=violating)


def test_successes_are_numbered_in_archive_order_with_their_expiry_at_the_boundary():
    lines = [
        ok(120.0, 3),
        PollLine(60.0, "a.jsonl", 2, False, stage="describe_log_dirs", brokers=2),
        ok(0.0, 1),
        # the same time as line 3: ordered by file, then line
        PollLine(120.0, "0.jsonl", 9, True, brokers=2, observed=2, violating=1),
    ]
    history = PollHistory(lines, RULES, step=60)
    got = list(history.successes())
    assert [(s.sseq, s.file, s.line, s.k) for s in got] == [
        (1, "a.jsonl", 1, 0),
        (2, "0.jsonl", 9, 2),
        (3, "a.jsonl", 3, 2),
    ]
    # 0 + 120 s validity: the first success at or after 120.0 is the earliest of the two there
    assert (got[0].expiry_sseq, got[0].expiry_k) == (2, 2)
    assert got[1].expiry_sseq is None and got[0].hold_sseq is None


def test_grid_walk_counts_failures_falls_back_after_validity_and_sums_the_volume_deltas():
    lines = [
        ok(0.0, 1, violating=1),
        PollLine(30.0, "a.jsonl", 2, False, stage="describe_cluster"),
        ok(60.0, 3),
        # nothing from 60 s to 300 s: validity 120 s runs out after 180 s
        ok(300.0, 4),
    ]
    history = PollHistory(lines, RULES, step=60)
    grid = EvaluationGrid.over(0.0, 300.0, 60)
    # success 1's violating volume: a run throttling (factor 0.0) from success 1, cached at 2,
    # evicted at 3
    deltas = {
        1: VolumeDeltas(throttling={0.0: 1}),
        2: VolumeDeltas(cached=1, cached_violating=1),
        3: VolumeDeltas(-1, -1, evicted=1, throttling={0.0: -1}),
    }
    states = {s.t: s for s in history.grid_states(grid, deltas)}
    assert states[0].throttle_factor == 0.0 and states[0].violated_total == 1
    assert states[0].failed_cluster == 0 and states[60].failed_cluster == 1
    # success 2 is not violating itself, but its cached volume still is
    assert states[60].throttle_factor == 0.0 and states[60].cached_log_dirs == 1
    assert states[60].violated_total == 2
    assert states[180].fallback_active == 0
    assert states[240].fallback_active == 1 and states[240].throttle_factor == 0.5
    assert states[240].fallback_total == 1 and states[240].last_success == 60.0
    # the gap is closed at 300 s and stays counted; the eviction too
    assert states[300].fallback_active == 0 and states[300].fallback_total == 1
    assert states[300].evictions_total == 1 and states[300].cached_log_dirs == 0
    assert states[300].throttle_factor == 1.0 and states[300].active_brokers == 2


def test_without_checking_the_factor_stays_one_and_never_falls_back():
    rules = FallbackRules(120.0, 0.5, 0.0, checking=False)
    history = PollHistory([ok(0.0, 1, violating=1), ok(600.0, 2)], rules, step=60)
    states = list(history.grid_states(EvaluationGrid.over(0.0, 600.0, 60), {}))
    assert {s.throttle_factor for s in states} == {1.0}
    assert {s.fallback_total for s in states} == {0}


def test_the_factor_is_the_smallest_any_throttling_run_asks_for():
    """A policy giving factors between 0 and 1: runs overlap, the smallest factor in force wins."""
    lines = [ok(0.0, 1), ok(60.0, 2), ok(120.0, 3), ok(180.0, 4)]
    history = PollHistory(lines, RULES, step=60)
    deltas = {
        1: VolumeDeltas(throttling={0.5: 1}),
        2: VolumeDeltas(throttling={0.25: 1}),
        3: VolumeDeltas(throttling={0.25: -1}),
        4: VolumeDeltas(throttling={0.5: -1}),
    }
    states = {
        s.t: s.throttle_factor
        for s in history.grid_states(EvaluationGrid.over(0.0, 180.0, 60), deltas)
    }
    assert states == {0: 0.5, 60: 0.25, 120: 0.5, 180: 1.0}


def test_the_successes_table_rows_are_the_json_objects_of_its_schema():
    from dataclasses import asdict
    from types import SimpleNamespace

    from spark.job import SUCCESS_SCHEMA, success_lines

    odd = 'dir "q"\\, ä/b\n.jsonl'  # quotes, a backslash, a comma, a newline, not ASCII
    lines = [ok(0.0, 1), PollLine(60.5, odd, 7, True, brokers=2, observed=2), ok(120.0, 3)]
    history = PollHistory(lines, RULES, step=60)
    plans = [SimpleNamespace(cluster='prod "eu"', history=history)]

    rows = [json.loads(line) for line in success_lines(plans)]  # type: ignore[arg-type]

    expected = [
        {"cluster": 'prod "eu"', "cluster_index": 0, **asdict(s)} for s in history.successes()
    ]
    assert rows == expected
    assert rows[1]["file"] == odd and rows[2]["expiry_sseq"] is None
    assert all(isinstance(row["time"], float) for row in rows)
    schema_names = [column.split()[0] for column in SUCCESS_SCHEMA.split(", ")]
    assert all(sorted(row) == sorted(schema_names) for row in rows)
