"""`kvq-enforcer`: an Alertmanager webhook that sets Kafka client quotas to base x factor and
restores them exactly when the alert resolves."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

from enforcer.server_config import ServerConfig, StartRefused, check_journal
from enforcer.settings import (
    DRY_RUN,
    JOURNAL,
    KAFKA,
    LISTEN,
    LOCAL,
    OTHER_PATHS,
    PROMETHEUS_URL,
    STATE_STORE,
    EnforcerSettings,
)
from kvq.settings.cli_support import (
    EXIT_CONFIG_ERROR,
    add_cluster_label_flag,
    add_override_flag,
    add_web_flags,
    given_overrides,
    load_or_exit,
    new_parser,
    overrides,
    print_effective,
    start_logging,
)
from kvq.settings.config import CLUSTER_LABEL
from kvq.web.web_config import load_web_config_or_exit

if TYPE_CHECKING:
    from enforcer.enforcer_app import EnforcerApp

EPILOG = """\
Each --config is one cluster's properties file (the Strimzi keys verbatim plus kvq.*), e.g.:

  kvq.cluster.name=prod-eu-1
  client.quota.callback.static.kafka.admin.bootstrap.servers=kafka-0:9092
  client.quota.callback.static.storage.per.volume.limit.min.available.ratio=0.05
  # the default user's base quota, bytes/s (comments go on their own lines)
  client.quota.callback.static.produce=10485760
  client.quota.callback.static.excluded.principal.name.list=User:admin;User:CN=mm2,O=acme
  kvq.enforcer.auth.bearer.token.file=/etc/kvq/webhook.token
  kvq.enforcer.journal=/var/lib/kvq/enforcer.sqlite3
  kvq.enforcer.quota.keys=producer_byte_rate,consumer_byte_rate

Alertmanager receiver (alert KafkaVolumeQuotaThrottle, label cluster or the one kvq.cluster.label
names, annotation throttle_factor):

  receivers:
    - name: kvq-enforcer
      webhook_configs:
        - url: http://127.0.0.1:9899/webhook
          http_config: {authorization: {credentials_file: /etc/kvq/webhook.token}}

Try a plan without changing anything:  kvq-enforcer --config kvq.properties --dry-run
Several clusters: repeat --config. What the one server has once (listen address, journal,
webhook credentials, alert name, cluster label, expiry and stale window, Prometheus URL, reconcile
and throttle check intervals) must be the same in every file, or be set by a flag; files that
disagree are refused.
"""


def build_parser() -> argparse.ArgumentParser:
    parser = new_parser("kvq-enforcer", __doc__, EPILOG)
    parser.add_argument(
        "--config",
        required=True,
        action="append",
        metavar="FILE",
        help="properties file of one cluster; repeat for several clusters",
    )
    parser.add_argument(
        "--check-config",
        action="store_true",
        help="check everything start-up checks (settings, credentials files, journal), print "
        "the effective configuration (secrets masked) and exit 0, or the errors and 2",
    )
    declared = EnforcerSettings.declaration
    add_web_flags(parser, declared(LISTEN), OTHER_PATHS, "the webhook token still applies")
    add_override_flag(parser, "--journal", declared(JOURNAL), "PATH")
    add_override_flag(
        parser,
        "--state-store",
        declared(STATE_STORE),
        f"{{{LOCAL},{KAFKA}}}",
        f"where the state lives (overrides {STATE_STORE}): what the deployment decides, so "
        "that a properties file replaced by an overlay cannot turn two replicas into two "
        "local stores acting at once",
    )
    add_cluster_label_flag(parser)
    dry_run = parser.add_argument(
        "--dry-run",
        action="store_true",
        help=f"validate every plan with Kafka (validate_only) and log it; change nothing "
        f"(sets {DRY_RUN}=true)",
    )
    overrides(dry_run, DRY_RUN)
    add_override_flag(
        parser,
        "--prometheus-url",
        declared(PROMETHEUS_URL),
        "URL",
        f"confirm a lower factor with this Prometheus first ({PROMETHEUS_URL})",
    )
    parser.add_argument(
        "--insecure-no-auth",
        action="store_true",
        help="accept unauthenticated webhooks when no credentials file is configured",
    )
    parser.add_argument(
        "--import-journal",
        metavar="FILE",
        help=f"with {STATE_STORE}={KAFKA}: copy each cluster's state from FILE (the SQLite "
        f"journal of an enforcer run with {STATE_STORE}={LOCAL}) into its state topic, unless "
        "Kafka holds it already, and exit; once, before the replicas first start",
    )
    parser.add_argument(
        "--threads",
        type=positive_int,
        default=4,
        metavar="N",
        help="HTTP worker threads (default 4)",
    )
    return parser


def positive_int(text: str) -> int:
    """argparse type: a whole number of at least 1 (argparse turns the ValueError into exit 2)."""
    value = int(text)
    if value < 1:
        raise ValueError(text)
    return value


def flag_overrides(args: argparse.Namespace) -> dict[str, str]:
    return given_overrides(
        {
            LISTEN: args.listen,
            JOURNAL: args.journal,
            STATE_STORE: args.state_store,
            PROMETHEUS_URL: args.prometheus_url,
            CLUSTER_LABEL: args.cluster_label,
            DRY_RUN: "true" if args.dry_run else None,
        }
    )


def _fail(message: str) -> SystemExit:
    print(f"kvq-enforcer: {message}", file=sys.stderr)
    return SystemExit(EXIT_CONFIG_ERROR)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    start_logging(args)
    overrides = flag_overrides(args)
    all_settings = [load_or_exit(EnforcerSettings, path, overrides) for path in args.config]
    try:
        config = ServerConfig.of(all_settings)
        web_config = load_web_config_or_exit("kvq-enforcer", args.web_config_file)
        credentials = config.credentials(args.insecure_no_auth)
        if args.check_config:
            check_journal(config.server.journal)
            for settings in config.clusters:
                print_effective(settings)
            return 0
        # The app's modules (Kafka's client, Flask) only once it runs: --help and --check-config
        # take half the time without them.
        from enforcer.enforcer_app import EnforcerApp, import_into_kafka

        if args.import_journal:
            for cluster, rows in import_into_kafka(config, args.import_journal).items():
                if rows is None:
                    print(f"cluster {cluster}: Kafka holds its state already; nothing imported")
                else:
                    print(f"cluster {cluster}: {rows} rows imported from {args.import_journal}")
            return 0
        app = EnforcerApp(config, credentials, web_config, args.threads, args.telemetry_path)
    except StartRefused as exc:
        raise _fail(str(exc)) from None
    return serve(app, config.server.listen)


def serve(app: EnforcerApp, listen: tuple[str, int]) -> int:
    """Serve until SIGTERM/SIGINT, then stop serving and reconciling and exit 0; exit 2 when
    `listen` cannot be listened on."""
    log = logging.getLogger("kvq.enforcer")
    try:
        app.start()
    except OSError as exc:
        host, port = listen
        reason = getattr(exc, "strerror", None) or exc
        raise _fail(f"cannot listen on {host}:{port}: {reason}") from None
    stop = threading.Event()

    def shutdown(signum, _frame) -> None:
        log.info("signal %s: stopping", signum)
        stop.set()

    signal.signal(signal.SIGTERM, shutdown)
    signal.signal(signal.SIGINT, shutdown)
    stop.wait()
    app.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
