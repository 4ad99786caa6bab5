"""`make bench`: every benchmark, each printing ratios measured side by side in one run.

Benchmarks never fail on a number; a benchmark that cannot run says why and the rest go on.
`python -m bench NAME...` runs only those (the module names without `bench.`, e.g.
`python -m bench exporter_poll_kafka enforcer_kafka versus`). Each completed benchmark writes its
results page, docs/results/NAME.md (bench/results.py).
"""

from __future__ import annotations

import importlib
import sys
import time
import traceback

from bench import results

BENCHMARKS = (
    "bench.poll_fanout",
    "bench.metrics_render",
    "bench.metrics_gzip",
    "bench.http_idle_connections",
    "bench.basic_auth_flood",
    "bench.enforcer_webhooks",
    "bench.detect_to_enforce",
    "bench.backfill",
    "bench.produce_throughput",
    "bench.producers_headroom",
    "bench.exporter_poll_kafka",
    "bench.enforcer_kafka",
    "bench.throttle_check",
    "bench.versus",
    "bench.slowdown",
    "bench.factor_zero",
    "bench.retention_forecast",
    "bench.policy_study",
    "bench.kafka_start",
)


def selected(names: list[str]) -> list[str]:
    """The benchmarks named (all when none is); exits 2 naming an unknown one."""
    known = {module.removeprefix("bench."): module for module in BENCHMARKS}
    unknown = [n for n in names if n not in known]
    if unknown:
        print(
            f"unknown benchmark {unknown[0]!r}: the benchmarks are {', '.join(known)}",
            file=sys.stderr,
        )
        sys.exit(2)
    return [known[n] for n in names] if names else list(BENCHMARKS)


def main(argv: list[str] | None = None) -> int:
    failed = []
    for name in selected(sys.argv[1:] if argv is None else argv):
        print(f"\n=== {name} ===", flush=True)
        started = time.perf_counter()
        try:
            results.run(importlib.import_module(name), [], alone=False)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            print(f"(not built yet: {name})")
        except Exception:  # one broken benchmark must not hide the others
            traceback.print_exc()
            failed.append(name)
        print(f"({time.perf_counter() - started:.1f} s)", flush=True)
    if failed:
        print(f"\nbenchmarks that crashed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    from devkit.processes import run_until_interrupted

    raise SystemExit(run_until_interrupted(main))
