"""The graceful-slowdown table: one load with retention on real Kafka, under the proposal's 0/1
policy and under graceful-slowdown (demo/slowdown.py). Needs root (the log dirs are tmpfs), Java
and Maven's Kafka jars (`make kafka-deps`); about 10 minutes.
    python -m bench.slowdown
"""

from __future__ import annotations

RECORDED_BY_MAIN = True
"""demo.slowdown.main writes its results page and pictures itself (docs/results/slowdown.md,
slowdown-available-bytes.png, slowdown-producer-rates.png): `make demo SCENARIO=slowdown` does
too."""


def main(argv: list[str] | None = None) -> None:
    from demo import slowdown

    slowdown.main(argv)  # a benchmark prints its numbers; it never fails on one


if __name__ == "__main__":
    from bench.results import command_line

    raise SystemExit(command_line(__name__))
