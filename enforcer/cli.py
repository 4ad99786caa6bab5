"""`kvq-enforcer`: an Alertmanager webhook that sets Kafka client quotas to base x factor and
restores them exactly when the alert resolves."""

from __future__ import annotations

import argparse
import contextlib
import logging
import signal
import sqlite3
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import fields
from operator import attrgetter
from pathlib import Path

from enforcer.applier import Applier
from enforcer.auth import AuthConfigError, Credentials
from enforcer.enforcer import Enforcer
from enforcer.failsafe import ExporterFactor, FactorSource, FailSafe
from enforcer.journal import Journal, JournalError
from enforcer.journal_filesystem import wal_problem
from enforcer.journal_rows import RowSink
from enforcer.metrics import EnforcerMetrics
from enforcer.observed_rates import OBSERVED_RATE, ObservedRates
from enforcer.prometheus_check import PrometheusFactor
from enforcer.quota_client import KafkaQuotaClient
from enforcer.quota_plan import (
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    QuotaPolicy,
)
from enforcer.replica import Replica
from enforcer.replicated_app import import_journal, replica_of
from enforcer.settings import (
    BASIC_FILE,
    DRY_RUN,
    JOURNAL,
    KAFKA,
    LISTEN,
    LOCAL,
    PROMETHEUS_URL,
    QUOTA_KEYS,
    STATE_STORE,
    THROTTLE_REFERENCE,
    TOKEN_FILE,
    EnforcerSettings,
)
from enforcer.webhook_app import OTHER_PATHS, enforcer_server
from kvq.contract.cluster_identity import ClusterIdentity
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
from kvq.settings.config import CLUSTER_LABEL, shown_value
from kvq.web.web_config import WebConfig, load_web_config_or_exit

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

SERVER_WIDE = (
    "listen",
    "journal",
    "token_file",
    "basic_file",
    "alert_name",
    "prometheus_url",
    "alert_expiry",
    "stale_window",
    "reconcile_interval",
    "throttle_check_interval",
    "heartbeat_alert_name",
    "failsafe_after",
    "failsafe_interval",
    "state_store",
    "state_group",
)
"""EnforcerSettings fields the whole server has once, whichever cluster a file describes."""


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
            PROMETHEUS_URL: args.prometheus_url,
            CLUSTER_LABEL: args.cluster_label,
            DRY_RUN: "true" if args.dry_run else None,
        }
    )


def server_wide_disagreement(all_settings: Sequence[EnforcerSettings]) -> str | None:
    """What two --config files say differently about a SERVER_WIDE setting (or the shared
    kvq.cluster.label: one name matches every alert), or None."""
    first = all_settings[0]
    server_wide = {
        field.metadata["setting"].key: attrgetter(field.name)
        for field in fields(EnforcerSettings)
        if field.name in SERVER_WIDE
    }
    server_wide[CLUSTER_LABEL] = attrgetter("config.cluster_label")
    for key, value_of in server_wide.items():
        for other in all_settings[1:]:
            if value_of(other) != value_of(first):
                return (
                    f"{key} differs between {first.config.source} ({_written(first, key)}) and "
                    f"{other.config.source} ({_written(other, key)}); the server has one: set it "
                    "alike in every --config file"
                    + (f" or with {SERVER_WIDE_FLAGS[key]}" if key in SERVER_WIDE_FLAGS else "")
                )
    return None


SERVER_WIDE_FLAGS = {
    LISTEN: "--web.listen-address",
    JOURNAL: "--journal",
    PROMETHEUS_URL: "--prometheus-url",
    CLUSTER_LABEL: "--cluster-label",
}


def _written(settings: EnforcerSettings, key: str) -> str:
    raw = settings.config.raw
    return f"{key}={shown_value(key, raw[key])}" if key in raw else "unset: the default"


def policy_of(settings: EnforcerSettings) -> QuotaPolicy:
    config = settings.config
    keys = settings.quota_keys
    if PRODUCER_BYTE_RATE not in keys:
        keys = (PRODUCER_BYTE_RATE, *keys)
    bases = {
        PRODUCER_BYTE_RATE: config.produce,
        CONSUMER_BYTE_RATE: config.fetch,
        REQUEST_PERCENTAGE: config.request,
    }
    excluded = frozenset(p.removeprefix("User:") for p in config.excluded_principals)
    return QuotaPolicy(
        keys=keys,
        bases=bases,
        excluded_users=excluded,
        byte_rate_floor=float(settings.byte_rate_floor),
    )


def observed_rates_of(
    settings: EnforcerSettings, prometheus: PrometheusFactor | None
) -> ObservedRates | None:
    """Where a cluster's episodes take their reference rates from (observed-rate only)."""
    if settings.throttle_reference != OBSERVED_RATE or prometheus is None:
        return None
    return ObservedRates(prometheus, settings.observed_rate_query, settings.observed_rate_lookback)


def _fail(message: str) -> SystemExit:
    print(f"kvq-enforcer: {message}", file=sys.stderr)
    return SystemExit(EXIT_CONFIG_ERROR)


def open_journal(path: str, sink: RowSink | None = None) -> Journal:
    """The journal, checked page by page first: a corrupt one is a clear error, not a traceback
    on the first webhook. `sink`: where its rows go too (the state in Kafka)."""
    check_journal(path)
    try:
        return Journal(path, sink=sink)
    except JournalError as exc:
        raise _fail(str(exc)) from None


def check_journal(path: str) -> None:
    """Exit 2 when the journal is on a file system where SQLite's WAL cannot work, or when an
    existing journal fails SQLite's page-by-page check."""
    problem = wal_problem(path)  # first: a dead network mount would hang or fail the rest
    if problem:
        raise _fail(f"{JOURNAL}={path} {problem}")
    if Path(path).is_file():
        try:
            with contextlib.closing(sqlite3.connect(path)) as db:
                rows = [row[0] for row in db.execute("PRAGMA quick_check(3)")]
        except sqlite3.Error as exc:
            rows = [str(exc)]
        if rows != ["ok"]:
            lines = [line for row in rows for line in row.splitlines() if not line.startswith("*")]
            raise _fail(
                f"{JOURNAL}={path} is corrupt ({'; '.join(lines)}): restore it from a backup "
                "or move it away"
            )


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    start_logging(args)
    overrides = flag_overrides(args)
    all_settings = [load_or_exit(EnforcerSettings, path, overrides) for path in args.config]
    names = [s.config.cluster_name for s in all_settings]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise _fail(f"kvq.cluster.name must differ between --config files; repeated: {duplicates}")
    disagreement = server_wide_disagreement(all_settings)
    if disagreement:
        raise _fail(disagreement)
    first = all_settings[0]
    web_config = load_web_config_or_exit("kvq-enforcer", args.web_config_file)
    policies = {}
    for settings in all_settings:
        try:
            policies[settings.config.cluster_name] = policy_of(settings)
        except ValueError as exc:
            raise _fail(f"{QUOTA_KEYS} in {settings.config.source}: {exc}") from None
    for settings in all_settings:
        if settings.throttle_reference == OBSERVED_RATE and not first.prometheus_url:
            raise _fail(
                f"{THROTTLE_REFERENCE}={OBSERVED_RATE} in {settings.config.source} needs "
                f"{PROMETHEUS_URL} (or --prometheus-url): the observed rates are read from "
                "Prometheus"
            )
    try:
        credentials = Credentials.from_files(first.token_file, first.basic_file)
    except AuthConfigError as exc:
        raise _fail(str(exc)) from None
    if credentials is None and not args.insecure_no_auth:
        raise _fail(
            f"no webhook credentials: set {TOKEN_FILE} (a file with one token) and/or "
            f"{BASIC_FILE} (a file of user:password lines) in {first.config.source}, "
            "or start with --insecure-no-auth"
        )
    if args.check_config:
        check_journal(first.journal)
        for settings in all_settings:
            print_effective(settings)
        return 0
    if args.import_journal and first.state_store != KAFKA:
        raise _fail(f"--import-journal needs {STATE_STORE}={KAFKA} (it is {first.state_store})")
    if args.import_journal:
        return import_into_kafka(all_settings, args.import_journal)
    app: Enforcer | Replica
    if first.state_store == KAFKA:
        app = replica_of(
            all_settings,
            lambda state: open_journal(first.journal, state),
            lambda journal, metrics: build_enforcer(all_settings, policies, journal, metrics),
        )
    else:
        app = build_enforcer(all_settings, policies, open_journal(first.journal))
    return serve(app, credentials, first.listen, args.threads, web_config, args.telemetry_path)


def import_into_kafka(all_settings: Sequence[EnforcerSettings], path: str) -> int:
    """--import-journal: exit 0 once every cluster's state is in Kafka."""
    if not Path(path).is_file():
        raise _fail(f"--import-journal {path}: no such file")
    journal = open_journal(path)
    try:
        imported = import_journal(all_settings, journal)
    except JournalError as exc:
        raise _fail(f"--import-journal {path}: {exc}") from None
    finally:
        journal.close()
    for cluster, rows in imported.items():
        if rows is None:
            print(f"cluster {cluster}: Kafka holds its state already; nothing imported")
        else:
            print(f"cluster {cluster}: {rows} rows imported from {path}")
    return 0


def build_enforcer(
    all_settings: Sequence[EnforcerSettings],
    policies: Mapping[str, QuotaPolicy],
    journal: Journal,
    metrics: EnforcerMetrics | None = None,
) -> Enforcer:
    """The Enforcer of the clusters `all_settings` describe, with their appliers, metrics (new
    unless given) and fail-safe (the server-wide settings are the first file's: they agree)."""
    first = all_settings[0]
    cluster_label = first.config.cluster_label
    names = tuple(s.config.cluster_name for s in all_settings)
    metrics = metrics or EnforcerMetrics(names, cluster_label)
    prometheus = PrometheusFactor(first.prometheus_url) if first.prometheus_url else None
    appliers = {
        s.config.cluster_name: Applier(
            s.config.cluster_name,
            policies[s.config.cluster_name],
            KafkaQuotaClient(s.config.admin_properties),
            journal,
            metrics,
            dry_run=s.dry_run,
            settle_s=s.alter_settle.total_seconds(),
            observed_rates=observed_rates_of(s, prometheus),
        )
        for s in all_settings
    }
    return Enforcer(
        appliers,
        journal,
        metrics,
        cluster_label,
        alert_name=first.alert_name,
        prometheus=prometheus,
        alert_expiry=first.alert_expiry,
        stale_window=first.stale_window,
        reconcile_interval=first.reconcile_interval.total_seconds(),
        throttle_check_interval=first.throttle_check_interval.total_seconds(),
        failsafe=failsafe_of(all_settings, journal, metrics, prometheus),
        heartbeat_name=first.heartbeat_alert_name,
    )


def failsafe_of(
    all_settings: Sequence[EnforcerSettings],
    journal: Journal,
    metrics: EnforcerMetrics,
    prometheus: PrometheusFactor | None,
) -> FailSafe | None:
    """The fail-safe (None with kvq.enforcer.failsafe.after=PT0S): Prometheus first, then each
    cluster's exporters."""
    first = all_settings[0]
    if not first.failsafe_after:
        return None
    sources: list[FactorSource] = [prometheus] if prometheus is not None else []
    urls = {s.config.cluster_name: s.failsafe_exporter_urls for s in all_settings}
    if any(urls.values()):
        sources.append(ExporterFactor(urls))
    return FailSafe(
        [ClusterIdentity(s.config.cluster_name, s.config.cluster_label) for s in all_settings],
        journal.alerts,
        metrics,
        first.failsafe_after.total_seconds(),
        first.failsafe_interval.total_seconds(),
        sources,
    )


def serve(
    app: Enforcer | Replica,
    credentials,
    listen: tuple[str, int],
    threads: int,
    web_config: WebConfig | None = None,
    metrics_path: str = "/metrics",
) -> int:
    """Serve until SIGTERM/SIGINT; reconcile at start and retry failures (a Replica: join the
    election, acting when elected)."""
    log = logging.getLogger("kvq.enforcer")
    server = enforcer_server(
        app, credentials, listen, web_config, threads, metrics_path=metrics_path
    )
    host, port = listen
    try:
        server.start()
    except OSError as exc:
        reason = getattr(exc, "strerror", None) or exc
        raise _fail(f"cannot listen on {host}:{port}: {reason}") from None
    stop = threading.Event()

    def shutdown(signum, _frame) -> None:
        log.info("signal %s: stopping", signum)
        stop.set()

    signal.signal(signal.SIGTERM, shutdown)
    signal.signal(signal.SIGINT, shutdown)
    if isinstance(app, Replica):
        app.start()
        clusters = list(app.clusters)
    else:
        threading.Thread(
            target=app.reconcile_forever,
            args=(stop, app.reconcile_interval),
            name="kvq-reconcile",
            daemon=True,
        ).start()
        clusters = sorted(app.appliers)
    log.info(
        "listening on %s (clusters: %s; auth: %s)",
        server.url,
        ", ".join(clusters),
        "+".join(credentials.schemes) if credentials else "NONE (--insecure-no-auth)",
    )
    stop.wait()
    server.stop()
    app.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
