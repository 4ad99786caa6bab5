"""Every benchmark writes its results page (bench/results.py), whether run through
`python -m bench NAME` or `python -m bench.NAME ARGS`."""

from __future__ import annotations

import argparse
import ast
import importlib
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from bench import results
from bench.__main__ import BENCHMARKS
from devkit.results_page import RESULTS_DIR_ENV

ROOT = Path(__file__).resolve().parents[2]


def fake_benchmark(body) -> ModuleType:
    """A module `bench.fake` whose main parses --rounds and runs `body(args)`."""
    module = ModuleType("bench.fake", "Fake: prints one figure.")
    module.__spec__ = importlib.machinery.ModuleSpec("bench.fake", None)

    def main(argv: list[str] | None = None):
        from devkit import results_page

        parser = argparse.ArgumentParser()
        parser.add_argument("--rounds", type=int, default=3)
        args = parser.parse_args(argv)
        results_page.arguments(parser, args)
        return body(args)

    module.main = main  # type: ignore[attr-defined]
    return module


def test_a_completed_benchmark_writes_its_page_named_by_its_arguments(tmp_path, monkeypatch):
    monkeypatch.setenv(RESULTS_DIR_ENV, str(tmp_path))
    module = fake_benchmark(lambda args: print(f"one figure: {args.rounds} rounds"))
    assert results.run(module, []) == 0
    assert results.run(module, ["--rounds", "9"], alone=False) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fake-rounds-9.md", "fake.md"]
    default = (tmp_path / "fake.md").read_text()
    assert "Fake: prints one figure." in default and "one figure: 3 rounds" in default
    assert "this benchmark alone" not in default
    varied = (tmp_path / "fake-rounds-9.md").read_text()
    assert varied.startswith("# fake (--rounds 9)\n")
    assert "| this benchmark alone | `python -m bench.fake --rounds 9` |" in varied


def test_a_benchmark_that_crashes_or_fails_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv(RESULTS_DIR_ENV, str(tmp_path))

    def crash(args):
        print("half the figures")
        raise RuntimeError("cannot run here")

    with pytest.raises(RuntimeError):
        results.run(fake_benchmark(crash), [])
    assert results.run(fake_benchmark(lambda args: 1), []) == 1
    assert list(tmp_path.iterdir()) == []


def test_a_scenario_that_records_itself_is_not_recorded_twice(tmp_path, monkeypatch):
    monkeypatch.setenv(RESULTS_DIR_ENV, str(tmp_path))
    module = fake_benchmark(lambda args: print("recorded by its own main"))
    module.RECORDED_BY_MAIN = True  # type: ignore[attr-defined]
    assert results.run(module, []) == 0
    assert list(tmp_path.iterdir()) == []  # (its main, not this fake, would have written)


def main_block(path: Path) -> str:
    tree = ast.parse(path.read_text())
    (block,) = [
        node
        for node in tree.body
        if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test)
    ]
    return ast.unparse(block)


@pytest.mark.parametrize("module", BENCHMARKS)
def test_every_benchmark_runs_recorded_and_names_its_page_by_its_arguments(module):
    """`python -m bench.NAME` goes through bench.results; main tells the recording its arguments
    (or, for the scenarios, records itself)."""
    path = ROOT / (module.replace(".", "/") + ".py")
    assert "command_line(__name__)" in main_block(path), path
    loaded = importlib.import_module(module)
    if getattr(loaded, "RECORDED_BY_MAIN", False):
        scenario = ROOT / "demo" / f"{module.removeprefix('bench.')}.py"
        assert (
            "Recording(" in scenario.read_text() and "recording.arguments(" in scenario.read_text()
        )
    else:
        assert "results_page.arguments(" in path.read_text(), path


def test_python_m_bench_name_writes_the_page(tmp_path):
    """The module run as a command, as a user runs it (a small metrics_render)."""
    done = subprocess.run(
        [sys.executable, "-m", "bench.metrics_render", "--brokers", "4", "--log-dirs", "2"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, RESULTS_DIR_ENV: str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr
    page = (tmp_path / "metrics_render-brokers-4-log-dirs-2.md").read_text()
    assert "bench.metrics_render --brokers 4 --log-dirs 2`" in page
    assert "first scrape after a poll" in page
