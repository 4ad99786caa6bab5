"""`kvq-exporter`: poll every broker's log dirs and publish the throttle factor for Prometheus."""

from __future__ import annotations

import argparse
import errno
import json
import logging
import os
import signal
import sys
import threading
from pathlib import Path

from exporter.settings import ARCHIVE_DIR, LISTEN, OTHER_PATHS, ExporterSettings
from kvq.contract.archive_record import to_record
from kvq.settings.cli_support import (
    EXIT_CONFIG_ERROR,
    add_cluster_label_flag,
    add_override_flag,
    add_web_flags,
    given_overrides,
    load_or_exit,
    new_parser,
    print_effective,
    start_logging,
)
from kvq.settings.config import CLUSTER_LABEL, CLUSTER_NAME, SHARED_SETTINGS
from kvq.web.web_config import WebConfig, load_web_config_or_exit

log = logging.getLogger("kvq.exporter")

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
    parser = new_parser("kvq-exporter", __doc__, EPILOG)
    parser.add_argument("--config", required=True, metavar="FILE", help="properties file")
    parser.add_argument(
        "--check-config",
        action="store_true",
        help="print the effective configuration (secrets masked) and exit 0, or the errors and 2",
    )
    add_web_flags(parser, ExporterSettings.declaration(LISTEN), OTHER_PATHS, "see docs/http.md")
    add_override_flag(parser, "--cluster-name", SHARED_SETTINGS[CLUSTER_NAME], "NAME")
    add_cluster_label_flag(parser)
    add_override_flag(parser, "--archive-dir", ExporterSettings.declaration(ARCHIVE_DIR), "DIR")
    parser.add_argument(
        "--once",
        action="store_true",
        help="poll once, print observation and factor as JSON; exit 0 on success, 1 otherwise",
    )
    return parser


def flag_overrides(args: argparse.Namespace) -> dict[str, str]:
    """Map command-line flags onto the properties they override."""
    return given_overrides(
        {
            LISTEN: args.listen,
            CLUSTER_NAME: args.cluster_name,
            CLUSTER_LABEL: args.cluster_label,
            ARCHIVE_DIR: args.archive_dir,
        }
    )


def check_archive_dir(settings: ExporterSettings, create: bool = True) -> None:
    """Exit 2 naming the setting when the archive directory cannot be created or written.

    Without `create` (`--check-config`) nothing is made: the directory, or the nearest existing
    one above it that would hold it, must be writable."""
    if settings.archive_dir is None:
        return
    path = Path(settings.archive_dir)
    try:
        if create:
            path.mkdir(parents=True, exist_ok=True)
        existing = next(p for p in (path, *path.absolute().parents) if p.exists())
        if not existing.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, f"{existing} is not a directory")
        if not os.access(existing, os.W_OK | os.X_OK):
            raise PermissionError(errno.EACCES, f"{existing} is not writable")
    except OSError as exc:
        print(
            f"kvq-exporter: {ARCHIVE_DIR}={path}: cannot write there: {exc.strerror or exc}",
            file=sys.stderr,
        )
        raise SystemExit(EXIT_CONFIG_ERROR) from None


def poll_once(settings: ExporterSettings) -> int:
    """`--once`: one observation, printed as JSON with the factor it gives; 0 if it succeeded."""
    from exporter.exporter_app import Exporter  # (its Kafka client: not for --check-config)

    exporter = Exporter(settings)
    try:
        observation = exporter.poller.poll_once()
        document = {
            "observation": to_record(observation, settings.config.cluster_name),
            "status": exporter.status(),
        }
    finally:
        exporter.stop()
    print(json.dumps(document, indent=2))
    return 0 if observation.succeeded else 1


def serve(
    settings: ExporterSettings,
    web_config: WebConfig | None = None,
    metrics_path: str = "/metrics",
) -> int:
    """Serve until SIGTERM or SIGINT, then stop polling, close the archive and exit 0."""
    from exporter.exporter_app import Exporter  # (its Kafka client: not for --check-config)

    exporter = Exporter(settings, web_config=web_config, metrics_path=metrics_path)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:
        exporter.start()
    except OSError as exc:
        host, port = settings.listen
        print(f"kvq-exporter: cannot listen on {host}:{port}: {exc.strerror}", file=sys.stderr)
        return 1
    stop.wait()
    log.info("stopping")
    exporter.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    start_logging(args)
    settings = load_or_exit(ExporterSettings, args.config, flag_overrides(args))
    web_config = load_web_config_or_exit("kvq-exporter", args.web_config_file)
    check_archive_dir(settings, create=not args.check_config)
    if args.check_config:
        print_effective(settings)
        return 0
    if args.once:
        return poll_once(settings)
    return serve(settings, web_config, args.telemetry_path)


if __name__ == "__main__":
    sys.exit(main())
