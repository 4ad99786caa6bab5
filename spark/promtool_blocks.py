"""The block writer `--blocks` runs in its tasks (`spark.shard_blocks`): this project's
`kvq-tsdb-blocks` where installed (`make tools`), else promtool found on PATH; what to do with
the blocks, and the cores a process may use (a container's CPU limit included)."""

from __future__ import annotations

import math
import os
import shutil
import sys
from pathlib import Path

TSDB_BLOCKS = "kvq-tsdb-blocks"
"""This project's block writer (tools/tsdb-blocks), installed beside the Python running kvq."""


class PromtoolError(RuntimeError):
    """promtool is missing; the message says how to install it."""


def find_promtool(promtool: str = "promtool") -> str:
    found = shutil.which(promtool)
    if found is None:
        raise PromtoolError(
            f"{promtool!r} not found on PATH; install it (Debian: apt-get install prometheus) "
            "or drop --blocks and run promtool yourself"
        )
    return found


def block_writer(promtool: str = "promtool", installed: Path | None = None) -> str:
    """What the tasks write blocks with: `kvq-tsdb-blocks` on PATH or beside this interpreter
    (the venv's bin, where `make tools` builds it), as an absolute path (an executor without it
    at that path falls back to its promtool); else promtool (`find_promtool`)."""
    found = shutil.which(TSDB_BLOCKS)
    if found:
        return str(Path(found).absolute())
    beside = (installed or Path(sys.executable).parent) / TSDB_BLOCKS
    if os.access(beside, os.X_OK):
        return str(beside)
    return find_promtool(promtool)


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


def how_to_load(blocks_dir: Path) -> str:
    """What to do with the blocks, printed after they are built."""
    return (
        f"TSDB blocks are in {blocks_dir}. To load them:\n"
        "  1. first make sure --storage.tsdb.retention.time reaches back to the oldest sample:\n"
        "     Prometheus DELETES blocks older than its retention as it loads them (default 15d)\n"
        f"  2. copy them into Prometheus's data dir:  cp -r {blocks_dir}/* <storage.tsdb.path>/\n"
        "  3. that is all: a running Prometheus loads new blocks within a minute, no restart;\n"
        "     blocks over the same hours (parts of the volumes, existing data) are merged\n"
        "     (Prometheus >= 2.39: overlapping blocks need no flag)."
    )
