"""The shard script every `--blocks` task runs (`spark.shard_blocks.SHARD_SCRIPT`), fed as
Spark's `pipe` feeds it (one line per element on stdin), with the real writers (this project's
kvq-tsdb-blocks, built by `make tools`, and promtool): a block per shard, the same samples from
both, the event lines kept aside, a refusal answered in one line; and how shards are sized."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from devkit.processes import wait_until
from spark.promtool_blocks import TSDB_BLOCKS, block_writer
from spark.shard_blocks import (
    BLOCK,
    RUN_TOKEN,
    SHARD_SCRIPT,
    STOP_NOTICE_SECONDS,
    ShardError,
    ShardOutput,
    ShardPlan,
    prepared_staging,
    stop_writers,
)

START = 1_763_596_800  # 2025-11-20T00:00:00Z, a multiple of 18 h


@pytest.fixture(scope="module")
def tsdb_blocks() -> str:
    writer = block_writer()
    assert writer.endswith("/" + TSDB_BLOCKS), f"{TSDB_BLOCKS} is not built: run `make tools`"
    return writer


@pytest.fixture(params=["kvq-tsdb-blocks", "promtool"])
def writer(request, tsdb_blocks) -> str:
    return tsdb_blocks if request.param == "kvq-tsdb-blocks" else "promtool"


def run_script(staging: Path, lines: list[str], promtool: str = "promtool") -> list[str]:
    prepared_staging(staging)
    done = subprocess.run(
        ["sh", "-c", SHARD_SCRIPT, "kvq-shard-blocks", str(staging), promtool, "18"],
        input="".join(line + "\n" for line in lines),
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    # Nothing on its error output, which a driver's own script shares with the user's terminal
    # (dash once printed "Terminated" there as the script stopped its watcher).
    assert done.stderr == ""
    return done.stdout.splitlines()


def left_in(staging: Path) -> list[str]:
    """What a task left in `staging`, beside the run's token."""
    return [p.name for p in staging.iterdir() if p.name != RUN_TOKEN]


def test_a_task_whose_run_removed_its_token_stops_with_its_writer(tmp_path):
    """A Connect server's cancelled task whose input was all written goes on (Spark stops a
    script only while it feeds it): the run removes the staging folder's token, and the script
    and its writer stop at once after it, leaving nothing. The script waits for its writer: one
    that takes a moment to stop and writes on its way out (into its folder, made again) leaves
    nothing either."""
    started = tmp_path / "started"
    started.mkdir()
    stand_in = tmp_path / "kvq-tsdb-blocks"  # runs until stopped, as a writer with a long shard
    stand_in.write_text(
        f"#!/bin/sh\necho $$ > {started}/pid\n"
        'trap \'kill "$nap"; sleep 0.5; mkdir -p "$TMPDIR"; echo late > "$TMPDIR/late"; '
        "exit 0' TERM\n"
        'sleep 600 & nap=$!\nwait "$nap"\n'
    )
    stand_in.chmod(0o755)
    staging = tmp_path / "staging"
    prepared_staging(staging)
    script = subprocess.Popen(
        ["sh", "-c", SHARD_SCRIPT, "kvq-shard-blocks", str(staging), str(stand_in), "18"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
    )
    try:
        pid = wait_until(lambda: (started / "pid").is_file() and (started / "pid").read_text())
        stop_writers(staging)
        assert script.wait(timeout=STOP_NOTICE_SECONDS + 5) == 143
    finally:
        script.kill()
        script.wait()
    assert not Path(f"/proc/{pid.strip()}").exists()  # the writer stopped with it
    assert left_in(staging) == []


def test_a_task_ends_when_its_watcher_never_gets_the_signal_to_stop(tmp_path, tsdb_blocks):
    """The watcher of the run's token is stopped with a TERM when the task is done, and a TERM
    can be lost: on a loaded machine one that came as the watcher's subshell started left it
    looking at the token for good, the task waiting for it and the backfill waiting for the task
    (a Spark Connect run hung for ten minutes). Here the TERM is lost every time (ignored from
    the start, which a shell cannot trap): the task still ends, its block written."""
    staging = tmp_path / "staging"
    prepared_staging(staging)
    lines = samples("0-1-0", "/d", range(START, START + 600, 60))
    script = subprocess.Popen(
        ["sh", "-c", SHARD_SCRIPT, "kvq-shard-blocks", str(staging), tsdb_blocks, "18"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its watcher too is stopped below, whatever happens
        preexec_fn=lambda: signal.signal(signal.SIGTERM, signal.SIG_IGN),
    )
    try:
        out, err = script.communicate("".join(line + "\n" for line in lines), timeout=30)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(script.pid, signal.SIGKILL)
        script.wait()
    assert script.returncode == 0, err
    assert [line.split("\t")[0] for line in out.splitlines()] == [BLOCK]


def samples(shard: str, series: str, times: range) -> list[str]:
    return [f'{shard}\tkafka_volume_quota_x{{log_dir="{series}"}} 1 {t}' for t in times]


def test_each_shard_becomes_a_block_and_the_events_are_kept_aside(tmp_path, writer):
    a = samples("0-27216-0", "/a", range(START, START + 600, 60))
    b = samples("0-27216-1", "/b", range(START, START + 300, 60))
    events = ["0 12 1 0 0 0 0 0 1.0", "0 13 -1 0 0 0 0 0 1.0"]
    # the events come between the samples, as the runs hold them
    answers = run_script(tmp_path / "staging", [*a[:5], events[0], *a[5:], events[1], *b], writer)
    output = ShardOutput()
    output.add(answers)
    assert sorted(shard for shard, _ in output.blocks) == ["0-27216-0", "0-27216-1"]
    metas = {s: json.loads((p / "meta.json").read_text()) for s, p in output.blocks}
    assert metas["0-27216-0"]["stats"]["numSamples"] == 10
    assert metas["0-27216-1"]["stats"]["numSamples"] == 5
    assert metas["0-27216-0"]["minTime"] == START * 1000
    assert output.samples(0) == 15
    (events_file,) = output.events
    assert events_file.read_text().splitlines() == events
    # what is left in the task's folder: the blocks and the events, no shard's text
    (task,) = (p for p in (tmp_path / "staging").iterdir() if p.name != RUN_TOKEN)
    assert sorted(p.name for p in task.iterdir()) == ["0-27216-0.1", "0-27216-1.1", "events"]


def dump(blocks: list[Path]) -> list[str]:
    """Every sample of the blocks, as `promtool tsdb dump` prints them, sorted."""
    lines: list[str] = []
    for block in blocks:
        db = block.parent
        (db / "wal").mkdir(exist_ok=True)  # promtool opens the folder as a TSDB
        done = subprocess.run(
            ["promtool", "tsdb", "dump", str(db)], capture_output=True, text=True, check=True
        )
        lines += done.stdout.splitlines()
    return sorted(lines)


def test_both_writers_write_the_same_samples(tmp_path, tsdb_blocks):
    """Escaped label values, values of every form the backfill writes, series interleaved."""
    odd = r"a\\b\nc\"d e"  # a\b, a newline, c"d e: as OpenMetrics escapes it
    lines = [
        *samples("0-27216-0", "/a", range(START, START + 1200, 60)),
        f'0-27216-0\tkafka_volume_quota_ratio{{broker_id="1",log_dir="{odd}"}} 0.05 {START}',
        f'0-27216-0\tkafka_volume_quota_ratio{{broker_id="1",log_dir="{odd}"}} 1.0E-5 {START + 60}',
        f'0-27216-0\tkafka_volume_quota_ratio{{broker_id="1",log_dir="{odd}"}} NaN {START + 120}',
        f"0-27216-0\tkafka_volume_quota_up 1 {START}",
        f'0-27216-0\tkafka_volume_quota_x{{log_dir="/b"}} -3 {START + 18 * 3600 - 1}',
    ]
    blocks = {}
    for name in (tsdb_blocks, "promtool"):
        output = ShardOutput()
        output.add(run_script(tmp_path / Path(name).name, lines, name))
        blocks[name] = [path for _, path in output.blocks]
    assert len(blocks[tsdb_blocks]) == 1
    expected = dump(blocks["promtool"])
    assert len(expected) == len(lines)
    assert dump(blocks[tsdb_blocks]) == expected


def test_an_executor_without_kvq_tsdb_blocks_writes_with_promtool(tmp_path):
    lines = samples("0-27216-0", "/a", range(START, START + 300, 60))
    output = ShardOutput()
    output.add(run_script(tmp_path / "staging", lines, str(tmp_path / "bin" / TSDB_BLOCKS)))
    assert output.samples(0) == 5


def test_a_shard_seen_again_in_a_task_gets_a_block_of_its_own(tmp_path, writer):
    first = samples("0-27216-0", "/a", range(START, START + 300, 60))
    other = samples("0-27216-1", "/b", range(START, START + 300, 60))
    again = samples("0-27216-0", "/c", range(START, START + 300, 60))
    output = ShardOutput()
    output.add(run_script(tmp_path / "staging", [*first, *other, *again], writer))
    shards = sorted(shard for shard, _ in output.blocks)
    assert shards == ["0-27216-0", "0-27216-0", "0-27216-1"]
    assert output.samples(0) == 15


def test_a_refused_shard_is_one_answer_and_leaves_nothing(tmp_path):
    stand_in = tmp_path / "promtool"
    stand_in.write_text('#!/bin/sh\necho "error: parse: bad line 3" >&2\nexit 1\n')
    stand_in.chmod(0o755)
    lines = samples("0-27216-0", "/a", range(START, START + 300, 60))
    answers = run_script(tmp_path / "staging", lines, str(stand_in))
    assert answers == ["failed\tpromtool on shard 0-27216-0: error: parse: bad line 3 "]
    with pytest.raises(ShardError, match="^promtool on shard 0-27216-0: error: parse: bad line 3$"):
        ShardOutput().add(answers)
    assert left_in(tmp_path / "staging") == []


def test_a_line_kvq_tsdb_blocks_cannot_read_is_one_answer_and_leaves_nothing(tmp_path, tsdb_blocks):
    lines = samples("0-27216-0", "/a", range(START, START + 300, 60))
    lines.insert(2, "0-27216-0\tkafka_volume_quota_x{log_dir=/a} 1 1763596920")
    answers = run_script(tmp_path / "staging", lines, tsdb_blocks)
    assert answers == [
        "failed\tkvq-tsdb-blocks on shard 0-27216-0: line 3: bad labels: "
        '"kafka_volume_quota_x{log_dir=/a} 1 1763596920" '
    ]
    assert left_in(tmp_path / "staging") == []


@pytest.mark.parametrize(
    ("rows", "ranges", "cores", "parts"),
    [
        (30_000, 3, 2, 2),  # every core gets two shards: 3 ranges x 2 parts
        (3_000, 1, 64, 3),  # but no shard of fewer than 1,000 rows
        (26_000_000, 1, 2, 13),  # no shard of more than 2M rows
        (13_000_000, 40, 64, 4),  # the 13M-row month on 64 cores
        (12_600_000_000, 487, 64, 13),  # a year of a 1,000-broker fleet
    ],
)
def test_shards_are_sized_for_the_rows_and_the_cores(rows, ranges, cores, parts):
    plan = ShardPlan.sized(rows, [(27_000, 27_000 + ranges - 1)], cores)
    assert plan.parts == parts
    assert plan.shards == parts * ranges
    assert plan.hours == 18


def test_every_shard_of_every_cluster_has_a_partition_of_its_own(spark):
    # Two clusters: block ranges 100-102 and 7-8, three parts each.
    plan = ShardPlan.sized(30_000, [(100, 102), (7, 8)], 7)
    assert (plan.parts, plan.shards) == (3, 15)
    shards = [(0, b, p) for b in (100, 101, 102) for p in range(3)]
    shards += [(1, b, p) for b in (7, 8) for p in range(3)]
    frame = spark.createDataFrame(shards, "cluster_index int, block long, part long")
    number = plan.number(frame.cluster_index, frame.block, frame.part)
    assert [row[0] for row in frame.select(number).collect()] == list(range(15))


def test_the_driver_writes_the_cluster_wide_ranges_in_parallel_processes_alike(
    tmp_path, tsdb_blocks
):
    from spark.shard_blocks import BLOCK_RANGE, write_shards_here_in_parallel

    # five block ranges of one cluster, one sample a minute for 2 hours of each
    pieces = [
        (
            0,
            START // BLOCK_RANGE + r,
            list(range(START + r * BLOCK_RANGE, START + r * BLOCK_RANGE + 7200, 60)),
        )
        for r in range(5)
    ]

    def family_lines(cluster_index, times, line_prefix):
        yield "".join(
            f'{line_prefix}kafka_volume_quota_up{{cluster="c{cluster_index}"}} 1 {t}\n'
            for t in times
        )

    blocks = {}
    for processes in (1, 3):
        output = ShardOutput()
        output.add(
            write_shards_here_in_parallel(
                pieces, family_lines, tmp_path / str(processes), 18, tsdb_blocks, processes
            )
        )
        assert sorted(shard for shard, _ in output.blocks) == [
            f"0-{block}-global" for _, block, _ in pieces
        ]
        assert output.samples(0) == 5 * 120
        blocks[processes] = dump([path for _, path in output.blocks])
        if processes == 3:  # a staging folder per process
            assert sorted(p.name for p in (tmp_path / "3").iterdir()) == ["0", "1", "2"]
    assert blocks[1] == blocks[3]


def test_a_failing_range_stops_every_driver_writer_and_leaves_no_process(tmp_path, tsdb_blocks):
    from spark.session import descendants
    from spark.shard_blocks import BLOCK_RANGE, write_shards_here_in_parallel

    pieces = [(0, START // BLOCK_RANGE + r, [START + r * BLOCK_RANGE]) for r in range(40)]

    def family_lines(cluster_index, times, line_prefix):
        if times[0] == START + 30 * BLOCK_RANGE:  # the third writer's
            raise OSError("the disk is full")
        yield f"{line_prefix}kafka_volume_quota_up 1 {times[0]}\n"

    before = set(descendants(os.getpid()))  # a Spark JVM of another test's, say
    with pytest.raises(OSError, match="the disk is full"):
        write_shards_here_in_parallel(pieces, family_lines, tmp_path, 18, tsdb_blocks, 4)
    assert set(descendants(os.getpid())) <= before
