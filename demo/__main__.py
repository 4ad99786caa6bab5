"""`make demo`: not wired yet; prints what it will do and exits non-zero."""

import sys

PLAN = """\
make demo will start on loopback: a 3-broker devcluster (2 log dirs each), the exporter
(interval PT1S), the enforcer, Prometheus (1s scrape + rules) and Alertmanager routing to the
enforcer; set client quotas, fill one log dir past the limit, wait for the throttle, free the space,
wait for the exact restore, and print the timeline with the detect-to-enforce latency.
This is not built yet (see issue "demo, end-to-end test and benchmarks")."""


def main() -> int:
    print(PLAN, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
