"""kvq-devcluster: start N Kafka brokers and the control API; stop on SIGINT/SIGTERM.

Once everything listens it prints exactly three lines on stdout, for people and for scripts:

    bootstrap=127.0.0.1:19092,127.0.0.1:19093,127.0.0.1:19094
    control=http://127.0.0.1:19100
    ready
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

from kvq.settings.cli_support import new_parser, start_logging

from .broker_configs import check_class_name
from .cluster import DEFAULT_HOST, DevCluster
from .cluster_acls import ClusterAcls
from .kafka_version import DEFAULT as DEFAULT_KAFKA_VERSION
from .kafka_version import parse
from .sasl import SaslUsers

DEFAULT_BASE_PORT = 19092
DEFAULT_CONTROL_PORT = 19100

EPILOG = """\
examples:
  kvq-devcluster --brokers 3 --log-dirs-per-broker 2 --data-dir /tmp/kvq
  kvq-devcluster --brokers 200 --log-dirs-per-broker 1 --data-dir /tmp/big \\
      --base-port 0 --control-port 0 --capacity-bytes 1000000000

then drive it with the control API (see devcluster/README.md), e.g.
  curl -s localhost:19100/state
  curl -s -X PUT localhost:19100/brokers/0/log-dirs/1 -d '{"fill_bytes": 5000000}'
  curl -s -X PUT localhost:19100/brokers/2/faults -d '{"latency_ms": 500}'
  curl -s -X POST localhost:19100/brokers/1/stop
  curl -s -X PUT localhost:19100/brokers/0/faults -d '{"alter_client_quotas": {"delay_ms": 6000}}'
"""


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a port number, got {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be a port 0-65535 (0: any free port), got {value}")
    return value


def _class_name(text: str) -> str | None:
    try:
        return check_class_name("the value", text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def parser() -> argparse.ArgumentParser:
    p = new_parser(
        "kvq-devcluster",
        "Run N Kafka brokers in one process: a Kafka wire-protocol server "
        "(ApiVersions, Metadata, DescribeCluster, DescribeLogDirs v1-v4, Describe/Alter"
        "ClientQuotas, DescribeConfigs of brokers, CreateTopics, Produce with replication, "
        "SASL/PLAIN) whose log dirs are real directories that produced bytes are written to, "
        "with client quotas stored as KRaft does and produce quotas enforced as Kafka brokers "
        "do, and faults injected through a JSON control API. Prints bootstrap=..., control=... "
        "and ready on stdout once every port listens; SIGINT/SIGTERM stop it.",
        EPILOG,
        log_level="warn",
    )
    p.add_argument(
        "--brokers", type=_count, default=3, metavar="N", help="brokers, ids 0..N-1 (default 3)"
    )
    p.add_argument(
        "--log-dirs-per-broker",
        type=_count,
        default=2,
        metavar="M",
        help="log dirs of each broker (default 2)",
    )
    p.add_argument(
        "--data-dir",
        required=True,
        metavar="DIR",
        help="log dir J of broker I is DIR/broker-I/logdir-J (created if missing); the cluster "
        "id and the quotas are kept in DIR too",
    )
    p.add_argument(
        "--host",
        default=DEFAULT_HOST,
        help=f"address to listen on and to advertise to clients (default {DEFAULT_HOST})",
    )
    p.add_argument(
        "--base-port",
        type=_port,
        default=DEFAULT_BASE_PORT,
        metavar="PORT",
        help=f"broker I listens on PORT+I (default {DEFAULT_BASE_PORT}; 0: each broker takes a "
        "free port)",
    )
    p.add_argument(
        "--control-port",
        type=_port,
        default=None,
        metavar="PORT",
        help=f"port of the control API (default {DEFAULT_CONTROL_PORT}, or the first port after "
        "the brokers' when they cover it; 0: a free port)",
    )
    p.add_argument(
        "--capacity-bytes",
        type=_count,
        default=None,
        metavar="B",
        help="give every log dir a virtual size: total = B, usable = B minus the bytes of the "
        "files in it (default: the real file system's numbers from statvfs)",
    )
    p.add_argument(
        "--cluster-id",
        default=None,
        help="cluster id to report (default: the one recorded in DIR, else a new one)",
    )
    p.add_argument(
        "--client-quota-callback-class",
        type=_class_name,
        default=None,
        metavar="CLASS",
        help="report this client.quota.callback.class in every broker's DescribeConfigs, as a "
        "broker running a quota plugin does (e.g. io.strimzi.kafka.quotas.StaticQuotaCallback); "
        "default: unset, as Kafka's built-in quotas",
    )
    p.add_argument(
        "--sasl-users",
        type=Path,
        default=None,
        metavar="FILE",
        help="JSON object of SASL/PLAIN users, name -> password: every broker also opens a "
        "SASL_PLAINTEXT listener (printed as sasl_bootstrap=...); users can be changed through "
        "the control API (/sasl-users)",
    )
    p.add_argument(
        "--cluster-acls",
        type=Path,
        default=None,
        metavar="FILE",
        help='JSON object of ACLs on the cluster resource, {"User:kvq": ["Describe", '
        '"DescribeConfigs", "AlterConfigs"]}: the brokers then authorize DescribeLogDirs, '
        "DescribeConfigs, Describe/AlterClientQuotas as Kafka's StandardAuthorizer does "
        "(default: no authorizer, everything allowed); changeable through the control API (/acls)",
    )
    p.add_argument(
        "--kafka-version",
        type=_kafka_version,
        default=DEFAULT_KAFKA_VERSION,
        metavar="X.Y.Z",
        help="the Apache Kafka release to answer as where releases differ, e.g. 4.4.0 refuses "
        f"NaN quotas (default {DEFAULT_KAFKA_VERSION})",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="log connections and faults")
    return p


def _kafka_version(text: str) -> str:
    try:
        parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def control_port(asked: int | None, base_port: int, brokers: int) -> int:
    """The port asked for, else 19100, else (when brokers use 19100) the one after the brokers'."""
    if asked is not None:
        return asked
    if base_port and base_port <= DEFAULT_CONTROL_PORT < base_port + brokers:
        return base_port + brokers
    return DEFAULT_CONTROL_PORT


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.verbose and args.log_level == "warn":
        args.log_level = "info"
    start_logging(args)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        users = None if args.sasl_users is None else SaslUsers.from_file(args.sasl_users)
        acls = None if args.cluster_acls is None else ClusterAcls.from_file(args.cluster_acls)
        dc = DevCluster(
            brokers=args.brokers,
            log_dirs_per_broker=args.log_dirs_per_broker,
            data_dir=args.data_dir,
            host=args.host,
            base_port=args.base_port,
            control_port=control_port(args.control_port, args.base_port, args.brokers),
            capacity_bytes=args.capacity_bytes,
            cluster_id=args.cluster_id,
            client_quota_callback_class=args.client_quota_callback_class,
            sasl_users=users,
            cluster_acls=acls,
            kafka_version=args.kafka_version,
        )
        dc.start()
    except (ValueError, OSError) as exc:
        print(f"kvq-devcluster: {exc}", file=sys.stderr)
        return 2
    try:
        print(f"bootstrap={dc.bootstrap}", flush=True)
        print(f"control={dc.control_url}", flush=True)
        if users is not None:
            print(f"sasl_bootstrap={dc.sasl_bootstrap}", flush=True)
        print("ready", flush=True)
        print(
            f"kvq-devcluster: {args.brokers} brokers of cluster {dc.cluster_id} up, data in "
            f"{dc.data_dir}; Ctrl-C or SIGTERM stops them",
            file=sys.stderr,
            flush=True,
        )
        while not stop.wait(3600):
            pass
    finally:
        dc.stop()
    print("kvq-devcluster: stopped", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
