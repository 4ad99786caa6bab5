"""Inbox: webhooks any replica accepted, waiting in Kafka for the replica that acts.

With the state in Kafka (kvq.enforcer.state.store=kafka) Alertmanager may reach any replica of
the enforcer (a Service spreads its requests). A replica appends each webhook it accepts to the
state topic of its first cluster, keyed `["inbox", <random id>]`, and answers 200 once Kafka has
it on every in-sync replica; the acting replica reads the partition (acting_role.py) and handles
each in the order Kafka took them, then deletes it (a tombstone, written under its fence).
Whichever replica a notification reached, and whether or not the acting one dies meanwhile, it
is handled by the one that acts.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Mapping
from typing import Any

from enforcer.state_log import client_keywords, close_quietly
from kvq.kafka.admin_session import describe_error

KIND = "inbox"
_PREFIX = json.dumps([KIND])[:-1]


class InboxError(RuntimeError):
    """Kafka did not take the webhook; the message is safe to log."""


def is_inbox(key: str) -> bool:
    """Whether a state topic record's key is an inbox entry's."""
    return key.startswith(_PREFIX)


def new_key() -> str:
    return json.dumps([KIND, uuid.uuid4().hex], separators=(",", ":"))


class Inbox:
    """Appends webhook bodies to `topic` (partition 0) of the cluster `admin_properties` reach."""

    def __init__(
        self,
        admin_properties: Mapping[str, str],
        topic: str,
        timeout_seconds: float = 10.0,
        client_id: str = "kvq-enforcer-inbox",
    ) -> None:
        self.topic = topic
        self._properties = dict(admin_properties)
        self._timeout_s = timeout_seconds
        self._client_id = client_id
        self._producer: Any = None
        self._lock = threading.Lock()

    def append(self, body: bytes) -> str:
        """Append `body`; returns its key once every in-sync replica has it. Raises InboxError."""
        key = new_key()
        try:
            future = self._producer_now().send(
                self.topic, key=key.encode(), value=body, partition=0
            )
            future.get(timeout=self._timeout_s)
        except InboxError:
            raise
        except Exception as exc:
            self.close()  # connect afresh next time
            raise InboxError(f"cannot append to {self.topic}: {describe_error(exc)}") from None
        return key

    def close(self) -> None:
        with self._lock:
            producer, self._producer = self._producer, None
        if producer is not None:
            close_quietly(lambda: producer.close(timeout=1))

    def _producer_now(self) -> Any:
        from kafka import KafkaProducer

        with self._lock:
            if self._producer is None:
                keywords = client_keywords(
                    self._properties, int(self._timeout_s * 1000), self._client_id
                )
                try:
                    self._producer = KafkaProducer(
                        **keywords,
                        acks="all",
                        enable_idempotence=True,
                        linger_ms=0,
                    )
                except Exception as exc:
                    raise InboxError(
                        f"cannot reach Kafka for {self.topic}: {describe_error(exc)}"
                    ) from None
            return self._producer
