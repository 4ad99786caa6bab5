"""Real librdkafka producers for tests, the demo and bench: what they sent, what was acknowledged.

``LoadProducer`` wraps one confluent-kafka ``Producer`` (PLAINTEXT or SASL/PLAIN) and records
every delivery report (acknowledged bytes with the time, errors by code) and every throttle the
broker reported (librdkafka's ``throttle_cb``). ``run_steady`` offers a fixed rate from a thread
until stopped, as an application would: when the broker throttles, librdkafka's queue absorbs
the difference and the achieved (acknowledged) rate drops.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field

from confluent_kafka import KafkaError, Producer


@dataclass
class DeliveryLog:
    acked: list[tuple[float, int]] = field(default_factory=list)
    """(monotonic time, value bytes) of each acknowledged message."""
    errors: Counter = field(default_factory=Counter)
    """Kafka error code -> count of messages that failed."""
    error_times: dict[int, float] = field(default_factory=dict)
    """Kafka error code -> monotonic time of its first failure."""
    throttles: list[tuple[float, int]] = field(default_factory=list)
    """(monotonic time, throttle time ms) reported by brokers."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def acked_bytes(self, start: float = float("-inf"), end: float = float("inf")) -> int:
        with self.lock:
            return sum(n for t, n in self.acked if start <= t < end)

    def rate(self, start: float, end: float) -> float:
        """Acknowledged value bytes per second over [start, end)."""
        return self.acked_bytes(start, end) / max(end - start, 1e-9)


class LoadProducer:
    kind = "librdkafka"

    def __init__(
        self,
        bootstrap: str,
        client_id: str = "kvq-load",
        user: str | None = None,
        password: str | None = None,
        **config,
    ):
        self.client_id = client_id
        self.user = user
        self.log = DeliveryLog()
        conf = {
            "bootstrap.servers": bootstrap,
            "client.id": client_id,
            "acks": "all",
            "linger.ms": 5,
            "log_level": 3,
            "throttle_cb": self._on_throttle,
            "error_cb": lambda err: None,  # transport errors are retried; failures land below
        }
        if user is not None:
            conf.update(
                {
                    "security.protocol": "SASL_PLAINTEXT",
                    "sasl.mechanism": "PLAIN",
                    "sasl.username": user,
                    "sasl.password": password,
                }
            )
        conf.update(config)
        self.producer = Producer(conf)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _on_throttle(self, event) -> None:
        with self.log.lock:
            self.log.throttles.append((time.monotonic(), int(event.throttle_time * 1000)))

    def _on_delivery(self, err, msg) -> None:
        now = time.monotonic()
        with self.log.lock:
            if err is None:
                self.log.acked.append((now, len(msg.value())))
            elif err.code() not in _PURGED:  # our own close() dropped it: not a broker's answer
                code = err.code()
                self.log.errors[code] += 1
                self.log.error_times.setdefault(code, now)

    def send(self, topic: str, value: bytes, key: bytes | None = None) -> bool:
        """Queue one message; False when librdkafka's queue is full (after serving callbacks)."""
        try:
            self.producer.produce(topic, value=value, key=key, on_delivery=self._on_delivery)
        except BufferError:
            self.producer.poll(0.01)
            return False
        self.producer.poll(0)
        return True

    def send_for(self, topic: str, seconds: float, size: int = 1000) -> None:
        """As fast as librdkafka takes them, for ``seconds``."""
        value = b"v" * size
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.send(topic, value)

    def run_steady(self, topics: list[str], rate: float, size: int = 1000) -> None:
        """Start offering ``rate`` value bytes/s round-robin over ``topics`` from a thread.

        Like an application whose ``produce()`` blocks while librdkafka's queue is full: what it
        could not send while blocked is not sent in a burst afterwards (at most 1 s of it is)."""
        value = b"v" * size

        def loop() -> None:
            start = time.monotonic()
            sent = 0.0
            i = 0
            while not self._stop.is_set():
                due = (time.monotonic() - start) * rate
                sent = max(sent, due - rate)  # blocked longer than 1 s: no catching up
                while sent + size <= due and not self._stop.is_set():
                    if not self.send(topics[i % len(topics)], value):
                        break
                    sent += size
                    i += 1
                self.producer.poll(0.005)

        self._thread = threading.Thread(target=loop, name=f"load-{self.client_id}", daemon=True)
        self._thread.start()

    def stop(self, flush_s: float = 5.0) -> int:
        """Stop a steady run and flush; returns how many messages were still queued."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
        return self.producer.flush(flush_s)

    def close(self) -> None:
        """Stop, drop what is still queued (a broker may be gone) and free the client."""
        self.stop(0)
        self.producer.purge()
        self.producer.flush(0)
        self.producer.close()  # destroys the librdkafka handle now, not at garbage collection


_PURGED = (KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT)
