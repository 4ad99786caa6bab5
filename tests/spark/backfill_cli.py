"""Run `kvq-backfill` in-process with its three required flags: one place for the argv block."""

from __future__ import annotations

from pathlib import Path

from spark.cli import main


def run_backfill(archive: Path, config: Path, output: Path, *extra: str) -> int:
    """`kvq-backfill --archive A --config C --output O [extra...]`; returns the exit code."""
    return main(
        ["--archive", str(archive), "--config", str(config), "--output", str(output), *extra]
    )
