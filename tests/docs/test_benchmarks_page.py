"""docs/benchmarks.md: every command it shows runs a benchmark that exists, with arguments it
takes; its table names every benchmark; its pictures are the scenarios' own."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys

from bench.__main__ import BENCHMARKS
from tests.docs.blocks import ROOT, block, command_lines

PAGE = "docs/benchmarks.md"
NAMES = {module.removeprefix("bench.") for module in BENCHMARKS}


def run(argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        argv,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def test_the_benchmarks_page_commands_name_benchmarks_that_exist() -> None:
    lines = command_lines(block(PAGE, "make bench"))
    assert lines
    for line in lines:
        words = shlex.split(line)
        if words[0] == "make":
            dry = run(["make", "-n", *words[1:]])
            assert dry.returncode == 0, dry.stderr
            expected = {"bench": "-m bench", "demo": "-m demo --scenario versus --kafka apache"}
            assert expected[words[1]] in " ".join(dry.stdout.split()), (line, dry.stdout)
            continue
        assert words[:2] == ["python", "-m"], line
        module, args = words[2], words[3:]
        if module == "bench":
            assert args and set(args) <= NAMES, line
            continue
        assert module.removeprefix("bench.") in NAMES, line
        # the arguments parse (--help after them: nothing runs)
        done = run([sys.executable, "-m", module, *args, "--help"])
        assert done.returncode == 0, (line, done.stderr)


def test_the_benchmarks_page_says_what_each_benchmark_measures() -> None:
    listed = set(re.findall(r"^\| `(\w+)` \|", (ROOT / PAGE).read_text(), re.M))
    assert listed == NAMES
