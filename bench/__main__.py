"""`make bench`: every benchmark, each printing ratios measured side by side in one run.

Benchmarks never fail on a number; a benchmark that cannot run says why and the rest go on.
"""

from __future__ import annotations

import importlib
import sys
import time
import traceback

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
    "bench.versus",
    "bench.slowdown",
)


def main() -> int:
    failed = []
    for name in BENCHMARKS:
        print(f"\n=== {name} ===", flush=True)
        started = time.perf_counter()
        try:
            importlib.import_module(name).main([])
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
    sys.exit(main())
