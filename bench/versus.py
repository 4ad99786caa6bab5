"""The side-by-side table: one load on real Kafka against no guard, the Strimzi quota plugin (check
every 5 s and every 60 s), kvq with the recommended setup and the 0/1 policy, and kvq with
graceful-slowdown (demo/versus.py), each hop's moment after the crossing; `kvq-no-default` adds kvq
without the standing default-user quota. Needs root (the log dirs are tmpfs), Java and Maven's
Kafka jars (`make kafka-deps`); about 15 minutes.
    python -m bench.versus [--guards none,plugin-5s,plugin-60s,kvq,kvq-graceful,kvq-no-default]
"""

from __future__ import annotations

RECORDED_BY_MAIN = True
"""demo.versus.main writes its results page and pictures itself (docs/results/versus.md,
versus-available-bytes.png, versus-producer-rates.png): `make demo SCENARIO=versus` does too."""


def main(argv: list[str] | None = None) -> None:
    from demo import versus

    versus.main(argv)  # a benchmark prints its numbers; it never fails on one


if __name__ == "__main__":
    from bench.results import command_line

    raise SystemExit(command_line(__name__))
