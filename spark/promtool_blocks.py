"""Turn the OpenMetrics file into TSDB blocks: `promtool tsdb create-blocks-from openmetrics`."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path


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


def create_blocks(openmetrics: Path, blocks_dir: Path, promtool: str = "promtool") -> list[Path]:
    """Run promtool; returns the block directories it created (one ULID folder per block)."""
    binary = find_promtool(promtool)
    blocks_dir.mkdir(parents=True, exist_ok=True)
    before = {p.name for p in blocks_dir.iterdir()}
    result = subprocess.run(
        [binary, "tsdb", "create-blocks-from", "openmetrics", str(openmetrics), str(blocks_dir)],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise PromtoolError(
            f"promtool refused {openmetrics} (exit {result.returncode}):\n"
            + (result.stderr or result.stdout).strip()
        )
    return sorted(p for p in blocks_dir.iterdir() if p.is_dir() and p.name not in before)


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
