"""Turn the OpenMetrics files into TSDB blocks: `promtool tsdb create-blocks-from openmetrics`.

promtool parses its whole input once per block it builds, so each file is split by block range
(`spark.block_ranges`), one file per range, and promtool runs on each range's file, as many at a
time as this process may use cores, while the next ranges' files are written: the input is
parsed twice in all (its time span, then its samples), whatever its length, and the disk holds
a few ranges' copies at a time. Every run builds one block of `BLOCK_RANGE`.
"""

from __future__ import annotations

import contextlib
import math
import os
import queue
import shutil
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kvq import interrupts
from spark.block_ranges import SplitFile

BLOCK_RANGE_HOURS = 18
"""Each block holds 18 hours: the largest block a Prometheus with the default retention (15d)
builds itself (its largest compaction range at most a tenth of the retention, on the TSDB's
2h x 3^n ranges: 2h, 6h, 18h), so Prometheus's retention drops backfilled history in the same
steps as its own, and promtool's `--max-block-duration` accepts it as it is."""
BLOCK_RANGE = BLOCK_RANGE_HOURS * 3600
PROGRESS_SECONDS = 10.0
"""A plain progress line at most this often (a terminal also gets a line redrawn in place)."""


class PromtoolError(RuntimeError):
    """promtool is missing or refused the file; the message carries its output."""


def find_promtool(promtool: str = "promtool") -> str:
    found = shutil.which(promtool)
    if found is None:
        raise PromtoolError(
            f"{promtool!r} not found on PATH; install it (Debian: apt-get install prometheus) "
            "or drop --blocks and run promtool yourself"
        )
    return found


@dataclass(frozen=True)
class RangeInput:
    """One block range of one OpenMetrics file: promtool's input is written to `path` when its
    turn comes, and promtool writes the block into the same folder."""

    split: SplitFile
    index: int
    path: Path

    @property
    def source(self) -> Path:
        return self.split.openmetrics


def create_blocks(
    openmetrics: list[Path],
    blocks_dir: Path,
    work_dir: Path,
    say: Callable[[str], None] = lambda _: None,
    promtool: str = "promtool",
    workers: int | None = None,
) -> list[Path]:
    """Blocks of every sample of `openmetrics` in `blocks_dir`, built through `work_dir` (a
    folder of the caller's, removed by it however this ends: it holds copies of a few ranges of
    the input at a time); returns the block folders (one ULID folder each). Interrupted, it
    stops its promtool runs."""
    binary = find_promtool(promtool)
    blocks_dir.mkdir(parents=True, exist_ok=True)
    workers = workers or usable_cores()
    built: list[Path] = []
    with contextlib.ExitStack() as stack:
        ranges = []
        for number, source in enumerate(openmetrics):
            split = stack.enter_context(SplitFile(source, BLOCK_RANGE))
            for k in split.ranges:
                ranges.append(RangeInput(split, k, work_dir / f"{number}-{k}" / f"{k}.om"))
        say(
            f"promtool: {len(ranges)} block(s) of {BLOCK_RANGE_HOURS}h, "
            f"{min(workers, len(ranges))} at a time"
        )
        counter = _Counter(len(ranges), say)

        def finished(done: RangeInput) -> None:
            done.path.unlink()  # the copy of its samples, as soon as its block is built
            for block in done.path.parent.iterdir():
                if (block / "meta.json").is_file():
                    built.append(block.rename(blocks_dir / block.name))
            shutil.rmtree(done.path.parent)
            counter.one_more()

        _run_all(binary, ranges, workers, finished)
    return sorted(built)


def usable_cores(cgroup: Path = Path("/sys/fs/cgroup")) -> int:
    """The cores this process may use: its CPU affinity, capped by a cgroup CPU quota (a
    container's CPU limit, which the affinity does not show), as the JVM counts them for Spark."""
    cores = len(os.sched_getaffinity(0))
    quota = _cgroup_cpu_quota(cgroup)
    return cores if quota is None else max(1, min(cores, math.ceil(quota)))


def _cgroup_cpu_quota(root: Path) -> float | None:
    """CPUs' worth of time per period the cgroup allows (cgroup v2 `cpu.max`, else v1's CFS
    quota); None without a limit."""
    try:
        quota, period = (root / "cpu.max").read_text().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        pass
    try:
        quota_us = int((root / "cpu" / "cpu.cfs_quota_us").read_text())
        period_us = int((root / "cpu" / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return quota_us / period_us if quota_us > 0 and period_us > 0 else None


def promtool_command(binary: str, path: Path) -> list[str]:
    return [
        binary, "tsdb", "create-blocks-from", "openmetrics", "--quiet",
        f"--max-block-duration={BLOCK_RANGE_HOURS}h", str(path), str(path.parent),
    ]  # fmt: skip


def _run_all(
    binary: str, ranges: list[RangeInput], workers: int, finished: Callable[[RangeInput], None]
) -> None:
    """promtool on each range, `workers` at a time, each range's input written while the
    previous ones run (at most `workers` written ahead); the first failure stops the others and
    raises PromtoolError, and so does an interrupt (re-raised once they are stopped)."""
    ended: queue.Queue[tuple[RangeInput, int, str]] = queue.Queue()
    running: dict[Path, subprocess.Popen[str]] = {}

    def wait(item: RangeInput, process: subprocess.Popen[str]) -> None:
        out, err = process.communicate()
        ended.put((item, process.returncode, (err or out).strip()))

    def handle(item: RangeInput, code: int, output: str) -> None:
        del running[item.path]
        if code != 0:
            raise PromtoolError(f"promtool failed on {item.source} (exit {code}):\n{output}")
        finished(item)

    to_write, ready = deque(ranges), deque[RangeInput]()
    try:
        while to_write or ready or running:
            if ready and len(running) < workers:
                item = ready.popleft()
                with interrupts.deferred():  # no promtool may start unrecorded
                    process = subprocess.Popen(
                        promtool_command(binary, item.path),
                        stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE,
                        text=True,
                    )
                    running[item.path] = process
                threading.Thread(target=wait, args=(item, process), daemon=True).start()
            elif to_write and len(ready) < workers:
                item = to_write.popleft()
                item.path.parent.mkdir(parents=True)
                item.split.write(item.index, item.path)
                ready.append(item)
                with contextlib.suppress(queue.Empty):
                    while True:
                        handle(*ended.get_nowait())
            else:
                handle(*ended.get())
    finally:
        for process in running.values():
            process.kill()
        for process in running.values():
            process.wait()


class _Counter:
    """Blocks done out of all, as a plain line every `PROGRESS_SECONDS` and the last, and, on a
    terminal, redrawn in place at each."""

    def __init__(self, total: int, say: Callable[[str], None]) -> None:
        self.total, self.done, self.say = total, 0, say
        self.started = self.shown = time.monotonic()

    def one_more(self) -> None:
        self.done += 1
        now = time.monotonic()
        line = f"promtool: {self.done}/{self.total} blocks built"
        if self.done < self.total:
            left = (self.total - self.done) * (now - self.started) / self.done
            line += f", ~{left:.0f} s left"
        show = getattr(self.say, "show", None)
        if show is not None and getattr(self.say, "interactive", False):
            show(f"  {line}" if self.done < self.total else "")
        if self.done == self.total or now - self.shown >= PROGRESS_SECONDS:
            self.shown = now
            self.say(line)


def how_to_load(blocks_dir: Path) -> str:
    """What to do with the blocks, printed after they are built."""
    return (
        f"TSDB blocks are in {blocks_dir}. To load them:\n"
        "  1. first make sure --storage.tsdb.retention.time reaches back to the oldest sample:\n"
        "     Prometheus DELETES blocks older than its retention as it loads them (default 15d)\n"
        f"  2. copy them into Prometheus's data dir:  cp -r {blocks_dir}/* <storage.tsdb.path>/\n"
        "  3. that is all: a running Prometheus loads new blocks within a minute, no restart;\n"
        "     they are merged with existing data, overlapping blocks included (Prometheus >= 2.39)."
    )
