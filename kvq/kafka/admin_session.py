"""KafkaAdminSession: one kafka-python admin connection, made on first use, dropped after a failure.

The exporter (DescribeLogDirs fan-out) and the enforcer (client quotas) both talk to Kafka through
kafka-python's connection manager; this is the one place that creates, runs on and drops it.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Mapping
from typing import Any

from kafka.admin import KafkaAdminClient

from kvq.kafka.client_settings import kafka_python_config


class KafkaUnavailable(Exception):
    """Kafka could not be reached or the call failed; the message is safe to log (no secrets)."""


class KafkaAdminSession:
    """Runs coroutines on a lazily created kafka-python admin client's connection manager."""

    def __init__(
        self,
        admin_properties: Mapping[str, str],
        client_id: str,
        timeout_ms: int,
        admin_factory: Callable[..., Any] = KafkaAdminClient,
    ) -> None:
        self.kwargs = kafka_python_config(admin_properties)
        self.kwargs.setdefault("request_timeout_ms", timeout_ms)
        self.kwargs.setdefault("client_id", client_id)
        self.timeout_ms = int(self.kwargs["request_timeout_ms"])
        self.kwargs["bootstrap_timeout_ms"] = self.timeout_ms
        self._factory = admin_factory
        self._admin: Any = None
        self._lock = threading.Lock()

    @property
    def bootstrap(self) -> str:
        return ",".join(self.kwargs.get("bootstrap_servers", []))

    def run(self, coroutine_function: Callable[..., Any], *args: Any) -> Any:
        """Run `coroutine_function(manager, *args)` on the client's IO loop and return its result.

        Any failure drops the client (the next call connects afresh) and raises KafkaUnavailable.
        """
        manager = self._manager()
        try:
            return manager.run(coroutine_function, manager, *args)
        except Exception as exc:  # connection errors, timeouts, protocol errors
            self.close()
            raise KafkaUnavailable(f"{type(exc).__name__}: {exc}") from None

    def _manager(self) -> Any:
        with self._lock:
            if self._admin is None:
                try:
                    self._admin = self._factory(**self.kwargs)
                except Exception as exc:  # any bootstrap failure means 'down'
                    raise KafkaUnavailable(
                        f"cannot reach Kafka at {self.bootstrap}: {type(exc).__name__}: {exc}"
                    ) from None
            return self._admin._manager

    def close(self) -> None:
        with self._lock:
            admin, self._admin = self._admin, None
        if admin is not None:
            with contextlib.suppress(Exception):  # closing a broken client may fail too
                admin.close()
