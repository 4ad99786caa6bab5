"""Many principals held at factor 0 on real Kafka: their minimums, throttle times and restore.

How low each entity's minimum goes, against Kafka's throttle times and the restore.

N SASL users each offering 30 kB/s to one broker (Kafka's default 11 s quota window, or
--quota-window-samples N: N s, which the enforcer reads and its own minimums follow), half with a
quota of their own and half under the default user's, held at factor 0 by the enforcer's plan
with observed-rate references (devkit/factor_zero.py), with two minimums: the enforcer's defaults,
each entity's own (kvq.enforcer.throttle.longest.throttle.time, PT1M: 4,647 B/s; the request
minimum, kvq.enforcer.throttle.request.bytes, is scaled by the factor and gives way at factor
0); and the constant 8 KiB/s floor for every entity that per-entity minimums replaced. Printed
per N and minimum: the rate before and at factor 0 (once the first mute is over), its share, the
quotas set, the longest throttle time a broker handed out, in all and once held at the minimum,
and when every producer was back after the restore; and what the share means for 500
principals. Each producer blocks once 64 kB
are queued (the demo's), or --producer-buffer KB: librdkafka's own default is 1 GB, and a
backlog is sent in requests of up to 1 MB, whose throttle times can outlast the producer's
socket.timeout.ms (60 s; it then reconnects, and a new connection is not muted: the requests
timed out are printed). About 3 minutes per N and minimum, each on a fresh one-broker cluster
(--held S longer); --librdkafka KEY=VALUE sets a property of every producer (e.g.
batch.size=65536 message.max.bytes=65536: smaller requests). --longest-throttle-time adds each
entity's own minimum at other longest throttle times: a shorter one mutes less long and holds
less back.
    python -m bench.factor_zero [--principals 10 40] [--quota-window-samples 3]
        [--longest-throttle-time PT5S PT15S] [--producer-buffer 1024 --held 180]
        [--librdkafka batch.size=65536 --librdkafka message.max.bytes=65536]
"""

from __future__ import annotations

import argparse
import tempfile
from dataclasses import replace
from pathlib import Path

from devkit import factor_zero, results_page
from devkit.producer_load import librdkafka_refuses, librdkafka_settings
from enforcer.quota_plan import BYTE_RATE_FLOOR, KAFKA_QUOTA_WINDOW_SECONDS, QuotaPolicy
from enforcer.server_config import policy_of
from enforcer.settings import LONGEST_THROTTLE, EnforcerSettings
from kvq.model.graceful_slowdown import GracefulSlowdown
from kvq.model.limits import MIN_AVAILABLE_RATIO
from kvq.settings.config import BOOTSTRAP_SERVERS, ConfigError

P = factor_zero.P
OFFERED = 30_000.0
SETTLE_S = 70.0
"""Longer than the first mute at factor 0: (30 kB/s / minimum - 1) x 11 s, 60 s with the own
minimum, 29 s at 8,192 B/s."""
MEASURED_S = 30.0
WATCH_AFTER_S = 75.0


def defaults(**overrides: str) -> QuotaPolicy:
    """The enforcer's policy with every setting at its default (its minimums) but `overrides`
    (property name to value, checked as the enforcer checks its configuration)."""
    raw = {BOOTSTRAP_SERVERS: "localhost:9092", MIN_AVAILABLE_RATIO: "0.05", **overrides}
    return policy_of(EnforcerSettings.build(raw, environ={}))


MINIMUMS = {
    "the enforcer's defaults (own minimum, PT1M)": defaults(),
    "a constant 8 KiB/s floor for every entity": QuotaPolicy(
        (P,), {P: None}, byte_rate_floor=BYTE_RATE_FLOOR
    ),
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--principals",
        type=int,
        nargs="+",
        default=[10, 40],
        metavar="N",
        help="how many principals, one run each (default: 10 40)",
    )
    parser.add_argument(
        "--quota-window-samples",
        type=int,
        metavar="N",
        help="the broker's quota.window.num (Kafka's default 11): Kafka measures quotas over N "
        "1 s samples, and each entity's own minimum follows that window",
    )
    parser.add_argument(
        "--longest-throttle-time",
        nargs="+",
        default=[],
        metavar="DURATION",
        help=f"also run each entity's own minimum with {LONGEST_THROTTLE} at each of these "
        "(ISO 8601, PT1S to PT1H; the enforcer's default: PT1M)",
    )
    parser.add_argument(
        "--producer-buffer",
        type=int,
        default=factor_zero.BUFFER_KBYTES,
        metavar="KB",
        help="each producer's queue.buffering.max.kbytes: it blocks once this much is queued "
        f"(default: {factor_zero.BUFFER_KBYTES}; librdkafka's own: 1048576, 1 GB)",
    )
    parser.add_argument(
        "--held",
        type=float,
        default=MEASURED_S,
        metavar="SECONDS",
        help=f"how long the rate at factor 0 is measured, after {SETTLE_S:.0f} s to settle "
        f"(default: {MEASURED_S:.0f}; longer than a librdkafka timeout's cycle, 60 s, with "
        "large buffers)",
    )
    parser.add_argument(
        "--descend-to",
        type=float,
        metavar="FACTOR",
        help="before factor 0, lower the factor from 1 to FACTOR in graceful slowdown's steps "
        f"({GracefulSlowdown.MAX_DROP * 100:.0f} %% lower every "
        f"{factor_zero.DESCENT_STEP_S:g} s) and hold it "
        f"{factor_zero.DESCENT_HELD_S:g} s: the limit reached after graceful slowdown had "
        "slowed the load that far (default: factor 0 at once, as the 0/1 policy goes there)",
    )
    parser.add_argument(
        "--librdkafka",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a librdkafka property of every producer (repeatable), e.g. batch.size=65536: a "
        "held producer's requests are at most one batch per partition, and message.max.bytes "
        "in all",
    )
    args = parser.parse_args(argv)
    minimums = dict(MINIMUMS)
    for text in args.longest_throttle_time:
        try:
            minimums[f"own minimum, {text}"] = defaults(**{LONGEST_THROTTLE: text})
        except ConfigError as exc:
            parser.error(f"--longest-throttle-time: {str(exc).splitlines()[-1].strip()}")
    if any(not 1 <= n <= 200 for n in args.principals):
        parser.error(f"--principals: {args.principals} must each be from 1 to 200")
    if args.quota_window_samples is not None and args.quota_window_samples < 1:
        parser.error(f"--quota-window-samples: {args.quota_window_samples}; give 1 or more")
    if not 1 <= args.producer_buffer <= 2_147_483_647:
        parser.error(
            f"--producer-buffer: {args.producer_buffer} must be from 1 to 2147483647 kB "
            "(librdkafka's range for queue.buffering.max.kbytes)"
        )
    for given in args.librdkafka:
        if reason := librdkafka_refuses(given):
            parser.error(f"--librdkafka: {given!r}: {reason}")
    if args.descend_to is not None and not 0.0 < args.descend_to < 1.0:
        parser.error(f"--descend-to: {args.descend_to:g} must be above 0 and below 1")
    if not 10 <= args.held <= 3600:
        parser.error(f"--held: {args.held:g} must be from 10 to 3600 seconds")
    results_page.arguments(parser, args)
    window = float(args.quota_window_samples or KAFKA_QUOTA_WINDOW_SECONDS)
    own = replace(defaults(), quota_window_seconds=window).minimum(P, OFFERED)
    print(
        f"each principal offers {OFFERED / 1000:.0f} kB/s to one broker, which measures quotas "
        f"over {window:g} s; its minimum with the enforcer's defaults: {own:,.0f} B/s; "
        f"{args.producer_buffer:,} kB buffered at most"
    )
    descent = () if args.descend_to is None else factor_zero.paced_descent(args.descend_to)
    if descent:
        print(f"factor 0 comes after a paced descent: {', '.join(f'{f:.2f}' for f in descent)}")
    with tempfile.TemporaryDirectory(prefix="kvq-bench-factor-zero-") as temp:
        for count in args.principals:
            for n, (name, policy) in enumerate(minimums.items()):
                work = Path(temp) / f"{count}-{n}"  # a fresh cluster each: fresh references
                samples = args.quota_window_samples
                with factor_zero.cluster(work, count, None, samples) as (kafka, prometheus):
                    held = factor_zero.hold_at_factor_zero(
                        kafka,
                        prometheus,
                        work / "journal.sqlite3",
                        policy,
                        OFFERED,
                        SETTLE_S,
                        MEASURED_S,
                        WATCH_AFTER_S,
                        measured_held=args.held,
                        buffer_kbytes=args.producer_buffer,
                        producer_config=librdkafka_settings(args.librdkafka),
                        descent=descent,
                    )
                report(count, name, held)


def report(count: int, name: str, held: factor_zero.Held) -> None:
    quotas = sorted(held.quotas.values())
    back = (
        f"{held.back_s:.1f} s" if held.back_s is not None else f"not within {WATCH_AFTER_S:.0f} s"
    )
    per_principal = held.during / count
    print(f"\n{count} principals, {name}:")
    print(f"  before                                {held.before / 1000:9.1f} kB/s")
    print(
        f"  at factor 0 (after {SETTLE_S:.0f} s)               {held.during / 1000:9.1f} kB/s "
        f"({held.share:.1%} of it)"
    )
    print(
        f"  quotas set ({len(quotas)} entities)           {quotas[0]:,.0f} - {quotas[-1]:,.0f} B/s"
    )
    if held.longest_descent_throttle_s:
        print(f"  longest throttle time in the descent  {held.longest_descent_throttle_s:9.1f} s")
    print(f"  longest throttle time handed out      {held.longest_throttle_s:9.1f} s")
    print(f"    once held at the minimum            {held.longest_held_throttle_s:9.1f} s")
    print(f"  restore -> every producer back        {back:>9}")
    print(
        f"  requests timed out while held         {held.timed_out:9d} "
        f"({held.timing_out} of {count} producers reconnected)"
    )
    print(
        f"  500 such principals at factor 0       {500 * per_principal / 1e6:9.2f} MB/s "
        f"({500 * per_principal * 3600 / 1e9:.1f} GB an hour)"
    )


if __name__ == "__main__":
    from bench.results import command_line

    raise SystemExit(command_line(__name__))
