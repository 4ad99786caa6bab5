"""Wires the enforcer together from a checked `ServerConfig`: journal -> metrics -> each cluster's
quota client and applier -> fail-safe -> Enforcer -> webhook server, and the reconcile loop."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from pathlib import Path

from enforcer.applier import Applier
from enforcer.auth import Credentials
from enforcer.enforcer import Enforcer
from enforcer.failsafe import ExporterFactor, FactorSource, FailSafe
from enforcer.journal import Journal, JournalError
from enforcer.journal_rows import RowSink
from enforcer.lost_resolutions import LostResolutions
from enforcer.metrics import EnforcerMetrics
from enforcer.observed_rates import OBSERVED_RATE, ObservedRates
from enforcer.prometheus_check import PrometheusFactor
from enforcer.quota_client import KafkaQuotaClient
from enforcer.replica import Replica
from enforcer.replicated_app import import_journal, replica_of
from enforcer.request_sizes import RequestSizes
from enforcer.server_config import ServerConfig, StartRefused, check_journal
from enforcer.settings import KAFKA, STATE_STORE, EnforcerSettings
from enforcer.webhook_app import enforcer_server
from kvq.contract.cluster_identity import ClusterIdentity
from kvq.web.server import WebServer
from kvq.web.web_config import WebConfig

log = logging.getLogger("kvq.enforcer")


class EnforcerApp:
    """The running enforcer; `start()` serves HTTP and reconciles in a thread, `stop()` ends
    both and closes the journal and every cluster's Kafka connection. With the state in Kafka
    (kvq.enforcer.state.store=kafka) it is one replica: `start()` joins the election, and the
    Enforcer is built and its loop run while the replica acts (replica.py)."""

    def __init__(
        self,
        config: ServerConfig,
        credentials: Credentials | None,
        web_config: WebConfig | None = None,
        threads: int = 4,
        metrics_path: str = "/metrics",
    ) -> None:
        """Opens the journal (StartRefused when it is unusable) and builds everything; nothing
        is served or asked of Kafka before `start`."""
        self.credentials = credentials
        self.enforcer: Enforcer | Replica
        if config.server.state_store == KAFKA:
            self.enforcer = replica_of(
                config.clusters,
                lambda state: open_journal(config.server.journal, state),
                lambda journal, metrics: build_enforcer(config, journal, metrics),
            )
        else:
            self.enforcer = build_enforcer(config, open_journal(config.server.journal))
        self.server: WebServer = enforcer_server(
            self.enforcer,
            credentials,
            config.server.listen,
            web_config,
            threads,
            metrics_path=metrics_path,
        )
        self._stop = threading.Event()

    def start(self) -> WebServer:
        """Serve, and reconcile now and every kvq.enforcer.reconcile.interval, or join the
        election (OSError when the address cannot be listened on)."""
        self.server.start()
        if isinstance(self.enforcer, Replica):
            self.enforcer.start()
            clusters = list(self.enforcer.clusters)
        else:
            threading.Thread(
                target=self.enforcer.reconcile_forever,
                args=(self._stop, self.enforcer.reconcile_interval),
                name="kvq-reconcile",
                daemon=True,
            ).start()
            clusters = sorted(self.enforcer.appliers)
        credentials = self.credentials
        log.info(
            "listening on %s (clusters: %s; auth: %s)",
            self.server.url,
            ", ".join(clusters),
            "+".join(credentials.schemes) if credentials else "NONE (--insecure-no-auth)",
        )
        return self.server

    def stop(self) -> None:
        """Stop acting (a replica leaves the election first: the other takes over while this
        one drains), stop serving, close."""
        self._stop.set()
        if isinstance(self.enforcer, Replica):
            self.enforcer.leave()
        self.server.stop()
        self.enforcer.close()


def build_enforcer(
    config: ServerConfig, journal: Journal, metrics: EnforcerMetrics | None = None
) -> Enforcer:
    """The Enforcer of the clusters `config` describes, with their appliers, metrics (new unless
    given) and fail-safe, acting through `journal`."""
    server = config.server
    cluster_label = server.config.cluster_label
    metrics = metrics or EnforcerMetrics(config.names, cluster_label)
    prometheus = PrometheusFactor(server.prometheus_url) if server.prometheus_url else None
    sources = factor_sources(config.clusters, prometheus)
    appliers = {
        s.config.cluster_name: Applier(
            s.config.cluster_name,
            config.policies[s.config.cluster_name],
            KafkaQuotaClient(s.config.admin_properties),
            journal,
            metrics,
            dry_run=s.dry_run,
            settle_s=s.alter_settle.total_seconds(),
            observed_rates=observed_rates_of(s, prometheus),
            request_sizes=request_sizes_of(s, prometheus),
        )
        for s in config.clusters
    }
    return Enforcer(
        appliers,
        journal,
        metrics,
        cluster_label,
        alert_name=server.alert_name,
        prometheus=prometheus,
        alert_expiry=server.alert_expiry,
        stale_window=server.stale_window,
        reconcile_interval=server.reconcile_interval.total_seconds(),
        throttle_check_interval=server.throttle_check_interval.total_seconds(),
        failsafe=failsafe_of(config.clusters, journal, metrics, sources),
        heartbeat_name=server.heartbeat_alert_name,
        lost_resolutions=lost_resolutions_of(config.clusters, journal, metrics, sources),
    )


def observed_rates_of(
    settings: EnforcerSettings, prometheus: PrometheusFactor | None
) -> ObservedRates | None:
    """Where a cluster's episodes take their reference rates from (observed-rate only)."""
    if settings.throttle_reference != OBSERVED_RATE or prometheus is None:
        return None
    return ObservedRates(
        prometheus,
        settings.observed_rate_query,
        settings.observed_rate_lookback,
        settings.observed_rate_step_window,
    )


def request_sizes_of(
    settings: EnforcerSettings, prometheus: PrometheusFactor | None
) -> RequestSizes | None:
    """Where a cluster's episodes take each entity's request size from (observed-rate with a
    request share only)."""
    if settings.throttle_reference != OBSERVED_RATE or prometheus is None:
        return None
    if settings.request_share <= 0.0:
        return None
    return RequestSizes(prometheus, settings.observed_throttle_query)


def factor_sources(
    all_settings: Sequence[EnforcerSettings], prometheus: PrometheusFactor | None
) -> list[FactorSource]:
    """Where the enforcer reads a cluster's factor itself: Prometheus first, then each cluster's
    exporters."""
    sources: list[FactorSource] = [prometheus] if prometheus is not None else []
    urls = {s.config.cluster_name: s.failsafe_exporter_urls for s in all_settings}
    if any(urls.values()):
        sources.append(ExporterFactor(urls))
    return sources


def identities(all_settings: Sequence[EnforcerSettings]) -> list[ClusterIdentity]:
    return [ClusterIdentity(s.config.cluster_name, s.config.cluster_label) for s in all_settings]


def failsafe_of(
    all_settings: Sequence[EnforcerSettings],
    journal: Journal,
    metrics: EnforcerMetrics,
    sources: Sequence[FactorSource],
) -> FailSafe | None:
    """The fail-safe (None with kvq.enforcer.failsafe.after=PT0S)."""
    first = all_settings[0]
    if not first.failsafe_after:
        return None
    return FailSafe(
        identities(all_settings),
        journal.alerts,
        metrics,
        first.failsafe_after.total_seconds(),
        first.failsafe_interval.total_seconds(),
        sources,
    )


def lost_resolutions_of(
    all_settings: Sequence[EnforcerSettings],
    journal: Journal,
    metrics: EnforcerMetrics,
    sources: Sequence[FactorSource],
) -> LostResolutions | None:
    """The check for resolutions that never came, and for factor 1 before the resolution comes
    (None with kvq.enforcer.resolution.check.after=PT0S, or with nowhere to read the factor)."""
    first = all_settings[0]
    after = first.resolution_check_after
    if not after or not sources:
        return None
    return LostResolutions(
        identities(all_settings),
        journal.alerts,
        sources,
        after,
        metrics,
        every=first.restore_check_interval,
    )


def import_into_kafka(config: ServerConfig, path: str) -> dict[str, int | None]:
    """--import-journal: each cluster's rows of the SQLite journal at `path` into its state
    topic, unless Kafka holds its state already (None)."""
    if config.server.state_store != KAFKA:
        raise StartRefused(
            f"--import-journal needs {STATE_STORE}={KAFKA} (it is {config.server.state_store})"
        )
    if not Path(path).is_file():
        raise StartRefused(f"--import-journal {path}: no such file")
    journal = open_journal(path)
    try:
        return dict(import_journal(config.clusters, journal))
    except JournalError as exc:
        raise StartRefused(f"--import-journal {path}: {exc}") from None
    finally:
        journal.close()


def open_journal(path: str, sink: RowSink | None = None) -> Journal:
    """The journal, checked page by page first: a corrupt one is a clear error (StartRefused),
    not a traceback on the first webhook. `sink`: where its rows go too (the state in Kafka)."""
    check_journal(path)
    try:
        return Journal(path, sink=sink)
    except JournalError as exc:
        raise StartRefused(str(exc)) from None
