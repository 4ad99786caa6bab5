"""How a benchmark runs, whether through `python -m bench NAME` or `python -m bench.NAME ARGS`:
inside a `devkit.results_page.Recording`, so that a completed run writes its figures, with the
date, machine, commit and load, to docs/results/<page>.md (docs/benchmarks.md lists them).

A benchmark's `main(argv)` parses its arguments and tells the recording about them
(`results_page.arguments(parser, args)`): a run with other arguments than the defaults gets a page
of its own. A benchmark never fails on a number: its page is written when its `main` returns
(0 or None), not when it raises or is interrupted. The scenarios that are benchmarks too
(`versus`, `slowdown`: `make demo` runs them) record themselves (`RECORDED_BY_MAIN`), pictures
included.
"""

from __future__ import annotations

import shlex
import sys
from types import ModuleType

from devkit.results_page import Recording


def name_of(module: ModuleType) -> str:
    """`bench.poll_fanout` -> `poll_fanout` (also when it runs as `__main__`)."""
    spec = module.__spec__
    return (spec.name if spec is not None else module.__name__).removeprefix("bench.")


def run(module: ModuleType, argv: list[str], alone: bool = True) -> int:
    """The benchmark's `main(argv)` recorded; returns its exit code. `alone`: the command ran
    this benchmark only (else its page also says how to run it alone)."""
    name = name_of(module)
    if getattr(module, "RECORDED_BY_MAIN", False):
        return module.main(argv) or 0
    description = (module.__doc__ or "").strip().splitlines()[0]
    by_itself = None if alone else shlex.join(["python", "-m", f"bench.{name}", *argv])
    with Recording(name, description, alone=by_itself) as recording:
        code = module.main(argv) or 0
        if code == 0:
            recording.complete()
    return code


def command_line(module_name: str) -> int:
    """`python -m bench.NAME ARGS`: the module run as `__main__`, recorded, stopped cleanly by
    SIGINT or SIGTERM (nothing written then)."""
    from devkit.processes import run_until_interrupted

    module = sys.modules[module_name]
    return run_until_interrupted(lambda: run(module, sys.argv[1:]))
