"""`kvq-exporter`: poll every broker's log dirs and publish the throttle factor for Prometheus."""

from __future__ import annotations

import argparse
import sys

from exporter.cli_support import load_or_exit
from exporter.config import CLUSTER_NAME, Config

EPILOG = """\
The properties file uses the Strimzi quota plugin's keys verbatim, e.g.:

  client.quota.callback.static.kafka.admin.bootstrap.servers=kafka-0:9092
  client.quota.callback.static.storage.per.volume.limit.min.available.ratio=0.05
  client.quota.callback.static.storage.check.interval=PT30S
  client.quota.callback.static.throttle.factor.validity.duration=PT5M
  client.quota.callback.static.throttle.factor.fallback=1.0
  kvq.cluster.name=prod-eu-1

Check it first:  kvq-exporter --config kvq.properties --check-config
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kvq-exporter",
        description=__doc__,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--config", required=True, metavar="FILE", help="properties file")
    parser.add_argument(
        "--check-config",
        action="store_true",
        help="print the effective configuration (secrets masked) and exit 0, or the errors and 2",
    )
    parser.add_argument("--listen", metavar="HOST:PORT", help="overrides kvq.exporter.listen")
    parser.add_argument("--cluster-name", metavar="NAME", help="overrides kvq.cluster.name")
    parser.add_argument("--archive-dir", metavar="DIR", help="overrides kvq.exporter.archive.dir")
    parser.add_argument(
        "--once",
        action="store_true",
        help="poll once, print observation and factor as JSON; exit 0 on success, 1 otherwise",
    )
    return parser


def flag_overrides(args: argparse.Namespace) -> dict[str, str]:
    """Map command-line flags onto the properties they override."""
    pairs = {
        "kvq.exporter.listen": args.listen,
        CLUSTER_NAME: args.cluster_name,
        "kvq.exporter.archive.dir": args.archive_dir,
    }
    return {key: value for key, value in pairs.items() if value is not None}


def print_effective(config: Config) -> None:
    print(f"# effective configuration of {config.source}")
    for key, value in config.effective():
        print(f"{key}={value}")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    config = load_or_exit(args.config, flag_overrides(args))
    if args.check_config:
        print_effective(config)
        return 0
    print("kvq-exporter: polling is not built yet; use --check-config", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
