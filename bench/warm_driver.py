"""`python -m bench.warm_driver OUTPUT KVQ-BACKFILL-OPTIONS...`: the backfill twice in one process.

The first run writes into OUTPUT-cold (removed after it), the second into OUTPUT, on the JVM the
first one started, its classes loaded and its JIT warm: what a backfill would get from a Spark
driver that is already running (a long-lived session, a Spark Connect server) instead of the one
each `kvq-backfill` command starts. The last line of stdout is the runs' times (seconds
since the epoch), as JSON: `bench.backfill --scaling --warm-driver` models the second run.
"""

from __future__ import annotations

import json
import shutil
import sys
import time


def main(argv: list[str]) -> int:
    # What any backfill command imports (`spark.cli.main` imports them as it starts): before the
    # first run's time, so that the modelled client's start holds them.
    from spark import cli, job, progress, session  # noqa: F401

    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__, file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    output, options = argv[0], argv[1:]
    times: dict[str, float] = {}
    for run, folder in (("cold", f"{output}-cold"), ("warm", output)):
        times[f"{run}_started"] = time.time()
        code = cli.main([*options, "--output", folder])
        times[f"{run}_ended"] = time.time()
        if code != 0:
            return code
    shutil.rmtree(f"{output}-cold", ignore_errors=True)
    print(json.dumps(times), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
