"""What holds a cluster's work up after a failed apply: every failure counted, logged, kept and
raised as ApplyError (`Failures.guarded`), and cleared by the next apply that succeeds."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from enforcer.apply.cluster_io import ClusterIO
from enforcer.apply.result import ApplyError, ApplyResult, QuotaCallbackActive
from enforcer.journal import JournalError
from enforcer.kafka_originals import OriginalsUnknown
from enforcer.quota_client import QuotaClientError

log = logging.getLogger("kvq.enforcer")
T = TypeVar("T")


class Failures:
    """One cluster's last failure, and the two that make the enforcer report failing."""

    def __init__(self, io: ClusterIO) -> None:
        self._io = io
        self.last_error: str | None = None
        self.quota_callback: str | None = None
        """Why Kafka ignores client quotas on this cluster (client.quota.callback.class set)."""
        self.originals_unknown: str | None = None
        """Why the originals cannot be known (the enforcer must not report success)."""

    def guarded(self, what: str, action: Callable[[], T]) -> T:
        """Run `action`; every failure is counted, logged, kept as `last_error` and raised as
        ApplyError."""
        cluster, metrics = self._io.name, self._io.metrics
        try:
            return action()
        except OriginalsUnknown as exc:
            self._failed(str(exc))
            self.originals_unknown = str(exc)
            metrics.originals_unknown.labels(cluster).set(1)
            log.critical(
                "cluster %s: CANNOT KNOW THE ORIGINAL QUOTAS, refusing to act: %s", cluster, exc
            )
            raise ApplyError(f"originals unknown: {exc}") from None
        except (QuotaClientError, JournalError) as exc:
            self._failed(str(exc))
            log.error("cluster %s: %s failed: %s", cluster, what, exc)
            raise ApplyError(str(exc)) from None
        except QuotaCallbackActive as exc:
            self._failed(str(exc))
            self.quota_callback = str(exc)
            metrics.quota_callback.labels(cluster).set(1)
            log.critical("cluster %s: %s", cluster, exc)
            raise
        except ApplyError as exc:
            self._failed(str(exc))
            log.error("cluster %s: %s", cluster, exc)
            raise

    def _failed(self, message: str) -> None:
        self._io.metrics.apply_failures.labels(self._io.name).inc()
        self.last_error = message

    def succeeded(self, result: ApplyResult) -> None:
        """An apply succeeded: nothing holds the work up (a quota callback is known gone only
        once Kafka was asked)."""
        cluster, metrics = self._io.name, self._io.metrics
        self.last_error = None
        self.originals_unknown = None
        if not result.idle:
            self.quota_callback = None
            metrics.quota_callback.labels(cluster).set(0)
        metrics.originals_unknown.labels(cluster).set(0)
