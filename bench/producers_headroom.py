"""Lowest headroom vs the bound predicted from the configured intervals, with real producers.

Runs the protected half of `make demo SCENARIO=producers` (four librdkafka producers, 600 kB/s
into a 48 MB virtual disk, most of it other data, limit 25 %) and prints the lowest usable
bytes reached on any volume next to limit - R x (poll + scrape + evaluation + group_wait +
apply), and the detection times.
    python -m bench.producers_headroom
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from devkit import results_page


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    results_page.arguments(parser, parser.parse_args(argv))
    from demo import producers
    from demo.scenario import Timeline

    with tempfile.TemporaryDirectory(prefix="kvq-bench-headroom-") as work:
        run, verdict = producers.protected_run(Path(work), Timeline(), log=lambda _: None)
    m = run.marks
    budget = sum(producers.INTERVALS.values())
    print(f"real producers, R = {verdict.fill_rate / 1000:.0f} kB/s onto the fullest volume")
    print(f"  limit                                   {run.limit:>12,} bytes")
    print(f"  predicted bound (limit - R x {budget:.0f} s)      {verdict.bound:>12,.0f} bytes")
    print(f"  lowest headroom reached                 {verdict.lowest:>12,} bytes")
    above = verdict.lowest - verdict.bound
    print(f"  headroom above the bound                {above:>12,.0f} bytes")
    print(f"  crossing -> quotas throttled            {m['applied'] - m['crossed']:>12.2f} s")
    print(f"  crossing -> producers throttled         {m['held'] - m['crossed']:>12.2f} s")
    print(f"  configured worst case                   {budget:>12.2f} s")
    print(f"  protected (no volume at 0, no error)    {verdict.ok!s:>12}")
    print(f"  lowest headroom >= bound                {verdict.within_bound!s:>12}")


if __name__ == "__main__":
    from bench.results import command_line

    raise SystemExit(command_line(__name__))
