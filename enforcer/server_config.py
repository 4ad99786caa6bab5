"""One server's configuration from its `--config` files (one per cluster): what the files must
agree on, each cluster's quota policy and the webhook credentials, checked before anything is
built (`ServerConfig.of`). A refusal names the setting, the file and what is allowed."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from operator import attrgetter
from pathlib import Path

from enforcer.auth import AuthConfigError, Credentials
from enforcer.journal_filesystem import wal_problem
from enforcer.observed_rates import OBSERVED_RATE
from enforcer.quota_plan import (
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    QuotaPolicy,
)
from enforcer.settings import (
    BASIC_FILE,
    JOURNAL,
    LISTEN,
    PROMETHEUS_URL,
    QUOTA_KEYS,
    STATE_STORE,
    THROTTLE_REFERENCE,
    TOKEN_FILE,
    EnforcerSettings,
)
from kvq.settings.config import CLUSTER_LABEL, shown_value


class StartRefused(Exception):
    """Start-up cannot go on: the message names the setting or file and what is allowed (the
    command line prints it and exits 2)."""


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
    "resolution_check_after",
    "restore_check_interval",
    "state_store",
    "state_group",
)
"""EnforcerSettings fields the whole server has once, whichever cluster a file describes."""

SERVER_WIDE_FLAGS = {
    LISTEN: "--web.listen-address",
    JOURNAL: "--journal",
    STATE_STORE: "--state-store",
    PROMETHEUS_URL: "--prometheus-url",
    CLUSTER_LABEL: "--cluster-label",
}
"""The flags that set a SERVER_WIDE setting for every file at once."""


@dataclass(frozen=True)
class ServerConfig:
    """The clusters one server acts on, with their policies; checked (`of`)."""

    clusters: tuple[EnforcerSettings, ...]
    policies: Mapping[str, QuotaPolicy]
    """Each cluster's quota policy, by kvq.cluster.name."""

    @property
    def server(self) -> EnforcerSettings:
        """The server-wide settings (SERVER_WIDE): the first file's, as every file agrees."""
        return self.clusters[0]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(s.config.cluster_name for s in self.clusters)

    @classmethod
    def of(cls, all_settings: Sequence[EnforcerSettings]) -> ServerConfig:
        """The server of the clusters `all_settings` describe; StartRefused when two files name
        the same cluster or disagree on a server-wide setting, when a cluster's quota keys are
        unknown, or when observed-rate references have no Prometheus to read."""
        names = [s.config.cluster_name for s in all_settings]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise StartRefused(
                f"kvq.cluster.name must differ between --config files; repeated: {duplicates}"
            )
        disagreement = server_wide_disagreement(all_settings)
        if disagreement:
            raise StartRefused(disagreement)
        policies = {}
        for settings in all_settings:
            try:
                policies[settings.config.cluster_name] = policy_of(settings)
            except ValueError as exc:
                raise StartRefused(f"{QUOTA_KEYS} in {settings.config.source}: {exc}") from None
        first = all_settings[0]
        for settings in all_settings:
            if settings.throttle_reference == OBSERVED_RATE and not first.prometheus_url:
                raise StartRefused(
                    f"{THROTTLE_REFERENCE}={OBSERVED_RATE} in {settings.config.source} needs "
                    f"{PROMETHEUS_URL} (or --prometheus-url): the observed rates are read from "
                    "Prometheus"
                )
        return cls(tuple(all_settings), policies)

    def credentials(self, insecure_no_auth: bool) -> Credentials | None:
        """The webhook's credentials, read from their files; None (no authentication) only
        with `insecure_no_auth`. StartRefused when a file cannot be read or none is set."""
        server = self.server
        try:
            credentials = Credentials.from_files(server.token_file, server.basic_file)
        except AuthConfigError as exc:
            raise StartRefused(str(exc)) from None
        if credentials is None and not insecure_no_auth:
            raise StartRefused(
                f"no webhook credentials: set {TOKEN_FILE} (a file with one token) and/or "
                f"{BASIC_FILE} (a file of user:password lines) in {server.config.source}, "
                "or start with --insecure-no-auth"
            )
        return credentials


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


def _written(settings: EnforcerSettings, key: str) -> str:
    raw = settings.config.raw
    return f"{key}={shown_value(key, raw[key])}" if key in raw else "unset: the default"


def policy_of(settings: EnforcerSettings) -> QuotaPolicy:
    """The cluster's quota policy (ValueError naming an unknown quota key)."""
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
        longest_throttle_seconds=settings.longest_throttle.total_seconds(),
        request_bytes=float(settings.request_bytes),
        request_throttle_seconds=settings.request_throttle.total_seconds(),
        burst_ratio=settings.observed_rate_burst_ratio,
        request_share=settings.request_share,
    )


def check_journal(path: str) -> None:
    """StartRefused when the journal is on a file system where SQLite's WAL cannot work, or when
    an existing journal fails SQLite's page-by-page check."""
    problem = wal_problem(path)  # first: a dead network mount would hang or fail the rest
    if problem:
        raise StartRefused(f"{JOURNAL}={path} {problem}")
    if Path(path).is_file():
        try:
            with contextlib.closing(sqlite3.connect(path)) as db:
                rows = [row[0] for row in db.execute("PRAGMA quick_check(3)")]
        except sqlite3.Error as exc:
            rows = [str(exc)]
        if rows != ["ok"]:
            lines = [line for row in rows for line in row.splitlines() if not line.startswith("*")]
            raise StartRefused(
                f"{JOURNAL}={path} is corrupt ({'; '.join(lines)}): restore it from a backup "
                "or move it away"
            )
