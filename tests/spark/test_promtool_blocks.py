"""promtool as the driver needs it: found on PATH or a clear error, and the cores a process may
use (a container's CPU limit counted)."""

from __future__ import annotations

import os

import pytest

from spark.promtool_blocks import (
    TSDB_BLOCKS,
    PromtoolError,
    block_writer,
    find_promtool,
    usable_cores,
)


def test_a_missing_promtool_says_how_to_install_it():
    with pytest.raises(PromtoolError, match="apt-get install prometheus"):
        find_promtool("kvq-no-such-promtool")


def test_the_tasks_write_with_kvq_tsdb_blocks_where_installed_else_promtool(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # promtool, no kvq-tsdb-blocks
    venv_bin, on_path = tmp_path / "venv-bin", tmp_path / "bin"
    assert block_writer(installed=venv_bin) == "/usr/bin/promtool"
    for folder in (venv_bin, on_path):
        folder.mkdir()
        (folder / TSDB_BLOCKS).write_text("#!/bin/sh\n")
        (folder / TSDB_BLOCKS).chmod(0o755)
    assert block_writer(installed=venv_bin) == str(venv_bin / TSDB_BLOCKS)
    monkeypatch.setenv("PATH", f"{on_path}:/usr/bin:/bin")
    assert block_writer(installed=venv_bin) == str(on_path / TSDB_BLOCKS)


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({}, None),  # no cgroup CPU controller: the affinity
        ({"cpu.max": "max 100000\n"}, None),
        ({"cpu.max": "50000 100000\n"}, 1),  # half a CPU: still one run
        ({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, None),
        ({"cpu/cpu.cfs_quota_us": "100000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 1),
    ],
)
def test_a_container_cpu_limit_caps_the_promtool_runs(tmp_path, files, expected):
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    affinity = len(os.sched_getaffinity(0))
    assert usable_cores(tmp_path) == (affinity if expected is None else min(affinity, expected))
