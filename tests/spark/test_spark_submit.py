"""`kvq-backfill --help`'s spark-submit line, run as shown from outside a source checkout: it
finds the installed module, not a path that only exists in a checkout."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from devkit.archive_generator import ArchivePlan, generate, write_config
from spark.cli import build_parser


def help_spark_submit_line() -> str:
    epilog = build_parser().epilog or ""
    joined = re.sub(r"\\\n\s*", "", epilog)
    (line,) = [s.strip() for s in joined.splitlines() if s.strip().startswith("spark-submit")]
    return line


@pytest.mark.timeout(900)  # Spark: minutes on a loaded machine
def test_the_help_spark_submit_line_runs_the_installed_module(tmp_path):
    line = help_spark_submit_line()
    assert "spark/cli.py" not in line
    generate(ArchivePlan(brokers=1, dirs_per_broker=1, hours=1), tmp_path / "archive")
    config = write_config(tmp_path / "kvq.properties", ratio=0.05)
    output = tmp_path / "out"
    command = (
        line.replace("spark://host:7077", "'local[1]'")
        .replace("--archive ...", f"--archive {tmp_path / 'archive'}")
        .replace("--config ...", f"--config {config}")
        .replace("--output ...", f"--output {output}")
    )
    venv_bin = str(Path(sys.executable).parent)
    env = {
        **os.environ,
        "PATH": f"{venv_bin}:{os.environ['PATH']}",
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }
    workdir = tmp_path / "elsewhere"  # not a source checkout
    workdir.mkdir()
    result = subprocess.run(
        ["bash", "-c", command], cwd=workdir, env=env, capture_output=True, text=True, timeout=900
    )
    assert result.returncode == 0, command + "\n" + result.stderr[-3000:]
    assert (output / "kafka.om").read_text().endswith("# EOF\n")
