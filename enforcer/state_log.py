"""StateLog: one cluster's enforcer state in a compacted Kafka topic, fenced by a transactional id.

What the journal holds for a cluster (its throttle episode, its requests in doubt, its firing
alerts) must survive any one node and be reachable by every enforcer replica, and a replica that
has lost the right to act must not get a write through once another has taken over. Kafka gives
both, the way Kafka Connect and Kafka Streams keep their state:

- the topic (one partition, compacted, replicated) holds the latest row of every journal row as
  a record keyed by the row's table and primary key; a deleted row is a tombstone;
- every write is one transaction of the producer whose `transactional.id` is the cluster's
  (`kvq-enforcer.<cluster name>` by default). `take_over` calls InitProducerId, which bumps the
  id's epoch: from then on Kafka refuses every write of a producer that took over before
  (PRODUCER_FENCED), and a transaction such a producer had open is aborted, never read.
- `take_over` then reads what was committed (read_committed, to the end), so the new holder
  starts from the last state any holder committed, and nothing a fenced holder writes later
  can slip in behind that read.

The enforcer journals before it acts on Kafka's quotas (the unanswered request is written before
each AlterClientQuotas is sent), so a holder that is fenced fails that write and sends nothing.
What the fence cannot stop is a request the old holder had journaled and sent (or was sending)
when the new one took over: it is in the state the new holder read as a request in doubt, which
the apply protocol already treats as a value that may still land (enforcer/unanswered_alters.py).

kafka-python, not librdkafka: the enforcer's Admin API calls already go through kafka-python with
kvq's TLS (PKCS12 in memory, reloaded certificates) and OAUTHBEARER settings, which the state log
reuses as they are; and librdkafka registers a transaction's partition on a 50 ms timer, which
would add 50 ms to every journal write.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kvq.kafka.client_settings import kafka_python_config

log = logging.getLogger("kvq.enforcer.state")

PARTITION = 0
"""The topic has one partition: one cluster's state is one ordered log."""
TOPIC_CONFIG = {
    "cleanup.policy": "compact",
    # Rows rewritten in a burst (an apply of 10,000 pairs) are compacted soon, tombstones of
    # finished requests kept a day: a reader that started before they were written still sees
    # the delete.
    "min.cleanable.dirty.ratio": "0.1",
    "delete.retention.ms": str(24 * 3600 * 1000),
    "segment.ms": str(3600 * 1000),
}
LINGER_MS = 5_000
BATCH_BYTES = 512 * 1024
TRANSACTION_TIMEOUT_MS = 60_000
"""A transaction a holder left open (it died mid-write) blocks readers until it is aborted: by
the next holder's take-over at once, or by Kafka after this long."""


class StateLogError(RuntimeError):
    """The state log cannot be read or written; the message is safe to log."""


class Fenced(StateLogError):
    """Another replica has taken over this cluster's state: this one must not act on it."""


class StateLog:
    """The enforcer state of one cluster in `topic` of that cluster's Kafka, written in
    transactions of `transactional_id`."""

    def __init__(
        self,
        admin_properties: Mapping[str, str],
        topic: str,
        transactional_id: str,
        timeout_seconds: float = 30.0,
        client_id: str = "kvq-enforcer-state",
    ) -> None:
        self.topic = topic
        self.transactional_id = transactional_id
        self._properties = dict(admin_properties)
        self._timeout_ms = int(timeout_seconds * 1000)
        self._client_id = client_id
        self._producer: Any = None

    @property
    def holding(self) -> bool:
        """Whether this log took over and was not fenced since."""
        return self._producer is not None

    def take_over(self) -> dict[str, bytes]:
        """Become the only writer (fencing whoever held the transactional id) and return the
        latest committed value of every key (tombstoned keys left out)."""
        self.release()
        self.ensure_topic()
        producer = self._new_producer()
        try:
            producer.init_transactions()
        except Exception as exc:
            close_quietly(lambda: producer.close(timeout=1))
            raise StateLogError(f"cannot take over {self._where()}: {_describe(exc)}") from None
        self._producer = producer
        return self.read_committed()

    def commit(self, records: Iterable[tuple[str, bytes | None]]) -> None:
        """Write `records` (key, value or None for a delete) in one transaction. Raises Fenced
        when another replica has taken over since (nothing is written), StateLogError when
        Kafka did not confirm the transaction (it may still commit: read it back)."""
        producer = self._producer
        if producer is None:
            raise Fenced(f"{self._where()}: not taken over")
        try:
            producer.begin_transaction()
            for key, value in records:
                producer.send(self.topic, key=key.encode(), value=value, partition=PARTITION)
            producer.commit_transaction()
        except Exception as exc:
            fenced = is_fence(exc, producer)
            self.release()  # a producer whose transaction failed is not used again
            if fenced:
                raise Fenced(f"{self._where()}: another replica took over") from None
            raise StateLogError(f"cannot write {self._where()}: {_describe(exc)}") from None

    def read_committed(self) -> dict[str, bytes]:
        """Every key's latest committed value, read from the start to the end of the topic."""
        from kafka import KafkaConsumer, TopicPartition

        consumer = KafkaConsumer(
            **self._client_keywords(),
            group_id=None,
            enable_auto_commit=False,
            isolation_level="read_committed",
            auto_offset_reset="earliest",
        )
        partition = TopicPartition(self.topic, PARTITION)
        latest: dict[str, bytes] = {}
        deadline = time.monotonic() + self._timeout_ms / 1000
        try:
            consumer.assign([partition])
            consumer.seek_to_beginning(partition)
            end = consumer.end_offsets([partition])[partition]
            while consumer.position(partition) < end:
                if time.monotonic() > deadline:
                    raise StateLogError(f"reading {self._where()} took too long")
                for batch in consumer.poll(timeout_ms=500, max_records=10_000).values():
                    for record in batch:
                        key = record.key.decode()
                        if record.value is None:
                            latest.pop(key, None)
                        else:
                            latest[key] = record.value
        except StateLogError:
            raise
        except Exception as exc:
            raise StateLogError(f"cannot read {self._where()}: {_describe(exc)}") from None
        finally:
            close_quietly(lambda: consumer.close(autocommit=False))
        return latest

    def ensure_topic(self) -> None:
        """Create the topic if it does not exist (see `ensure_state_topic`)."""
        ensure_state_topic(self._properties, self.topic, self._timeout_ms)

    def release(self) -> None:
        """Stop writing (the next `commit` raises Fenced until `take_over`)."""
        producer, self._producer = self._producer, None
        if producer is not None:
            close_quietly(lambda: producer.close(timeout=1))

    def _new_producer(self) -> Any:
        from kafka import KafkaProducer

        try:
            return KafkaProducer(
                **self._client_keywords(),
                transactional_id=self.transactional_id,
                transaction_timeout_ms=TRANSACTION_TIMEOUT_MS,
                enable_idempotence=True,
                acks="all",
                # a transaction's records wait in the accumulator until the commit flushes them:
                # woken per record, the producer's IO thread costs more than the records do
                linger_ms=LINGER_MS,
                batch_size=BATCH_BYTES,
                retry_backoff_ms=10,
            )
        except Exception as exc:
            raise StateLogError(
                f"cannot reach Kafka for {self._where()}: {_describe(exc)}"
            ) from None

    def _client_keywords(self) -> dict[str, Any]:
        return client_keywords(self._properties, self._timeout_ms, self._client_id)

    def _where(self) -> str:
        return f"state topic {self.topic} (transactional id {self.transactional_id})"


def ensure_state_topic(
    admin_properties: Mapping[str, str], topic: str, timeout_ms: int = 30_000
) -> None:
    """Create `topic` if it does not exist: compacted, one partition, on up to three brokers,
    min.insync.replicas two where there are three. Kafka must not create it on first use with
    its defaults (deleted after a week: the state with it)."""
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import TopicAlreadyExistsError

    where = f"state topic {topic}"
    try:
        admin = KafkaAdminClient(**client_keywords(admin_properties, timeout_ms))
    except Exception as exc:
        raise StateLogError(f"cannot reach Kafka for {where}: {_describe(exc)}") from None
    try:
        if topic in admin.list_topics():
            return
        replicas = min(3, len(admin.describe_cluster()["brokers"]))
        config = {**TOPIC_CONFIG, "min.insync.replicas": str(min(2, replicas))}
        try:
            admin.create_topics([NewTopic(topic, 1, replicas, topic_configs=config)])
        except TopicAlreadyExistsError:
            return  # another replica created it meanwhile
        log.info("created topic %s for the enforcer's state (%d replicas)", topic, replicas)
    except Exception as exc:
        raise StateLogError(f"cannot create {where}: {_describe(exc)}") from None
    finally:
        close_quietly(admin.close)


def client_keywords(
    admin_properties: Mapping[str, str], timeout_ms: int, client_id: str = "kvq-enforcer-state"
) -> dict[str, Any]:
    """kafka-python's keywords for a client of the state topic."""
    keywords = kafka_python_config(admin_properties)
    keywords.setdefault("request_timeout_ms", timeout_ms)
    # a Kafka that cannot be reached fails the call within its timeout, not kafka-python's 30 s
    keywords["bootstrap_timeout_ms"] = keywords["request_timeout_ms"]
    keywords["client_id"] = client_id
    return keywords


def is_fence(exc: BaseException, producer: Any) -> bool:
    """Whether a failed transactional call failed because another replica took over. When the
    fence arrived in the answer to an earlier request, kafka-python's next transactional call
    raises a plain KafkaError naming it; its transaction manager holds the fence itself."""
    from kafka.errors import InvalidProducerEpochError, ProducerFencedError

    manager = getattr(producer, "_transaction_manager", None)
    held = None if manager is None else manager.last_error  # a property, not a method
    fences = (ProducerFencedError, InvalidProducerEpochError)
    return isinstance(exc, fences) or isinstance(held, fences)


def _describe(exc: BaseException) -> str:
    from kvq.kafka.admin_session import describe_error

    return describe_error(exc)


def close_quietly(close: Callable[[], object]) -> None:
    """Call `close` (of a Kafka client), logging instead of raising: closing a client that
    failed must not hide why it failed."""
    try:
        close()
    except Exception:  # noqa: BLE001
        log.debug("closing a Kafka client failed", exc_info=True)
