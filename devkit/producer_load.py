"""Real librdkafka producers for tests, the demo and bench: what they sent, what was acknowledged.

``LoadProducer`` wraps one confluent-kafka ``Producer`` (PLAINTEXT or SASL/PLAIN) and records
every delivery report (acknowledged bytes with the time, errors by code) and every throttle the
broker reported (librdkafka's ``throttle_cb``). ``run_steady`` offers a fixed rate from a thread
until stopped, as an application would: when the broker throttles, librdkafka's queue absorbs
the difference and the achieved (acknowledged) rate drops.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from dataclasses import dataclass, field, replace

from confluent_kafka import KafkaError, KafkaException, Producer

COUNTERS = {
    "connects": "connects",
    "disconnects": "disconnects",
    "request_timeouts": "req_timeouts",
    "retries": "txretries",
}
"""Transport's counters -> the per-broker fields of librdkafka's statistics that hold them."""


@dataclass(frozen=True)
class Transport:
    """librdkafka's connection counters over all its brokers since it started (`TransportTally`
    adds them up from its statistics), and what it held: whether a producer waited on its
    connections, not on a quota."""

    connects: int = 0
    disconnects: int = 0
    request_timeouts: int = 0
    retries: int = 0
    rebootstraps: int = 0
    """Times it dropped the brokers it had learned and went back to bootstrap.servers (as
    librdkafka does when none of them answers)."""
    queued: int = 0
    """Messages in librdkafka's queues, sent or not (its msg_cnt)."""
    awaiting: int = 0
    """Requests sent and not yet answered (waitresp_cnt)."""

    def since(self, earlier: Transport) -> Transport:
        """The counters' growth from `earlier` (what is held stays as now)."""
        return Transport(
            self.connects - earlier.connects,
            self.disconnects - earlier.disconnects,
            self.request_timeouts - earlier.request_timeouts,
            self.retries - earlier.retries,
            self.rebootstraps - earlier.rebootstraps,
            self.queued,
            self.awaiting,
        )


class TransportTally:
    """Adds librdkafka's per-broker counters up into one `Transport` that only grows: its
    statistics list the brokers it knows now, and a broker it dropped (and later learned
    again, from zero) would otherwise take its counts with it."""

    def __init__(self) -> None:
        self._last: dict[str, dict[str, int]] = {}
        self._totals = dict.fromkeys(COUNTERS, 0)
        self._learned: set[str] = set()
        self._rebootstraps = 0

    def take(self, statistics: dict) -> Transport:
        brokers: dict[str, dict] = statistics.get("brokers", {})
        for name, broker in brokers.items():
            last = self._last.setdefault(name, dict.fromkeys(COUNTERS, 0))
            for counter, field_name in COUNTERS.items():
                now = int(broker.get(field_name, 0))
                self._totals[counter] += now - last[counter] if now >= last[counter] else now
                last[counter] = now
        learned = {name for name, broker in brokers.items() if int(broker.get("nodeid", -1)) >= 0}
        if self._learned and not learned:
            self._rebootstraps += 1
        self._learned = learned
        return Transport(
            **self._totals,
            rebootstraps=self._rebootstraps,
            queued=int(statistics.get("msg_cnt", 0)),
            awaiting=sum(int(broker.get("waitresp_cnt", 0)) for broker in brokers.values()),
        )


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
    transport: list[tuple[float, Transport]] = field(default_factory=list)
    """(monotonic time, librdkafka's counters then), when asked for (`stats_seconds`)."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def acked_bytes(self, start: float = float("-inf"), end: float = float("inf")) -> int:
        with self.lock:
            return sum(n for t, n in self.acked if start <= t < end)

    def rate(self, start: float, end: float) -> float:
        """Acknowledged value bytes per second over [start, end)."""
        return self.acked_bytes(start, end) / max(end - start, 1e-9)

    def paced_rate(self, start: float, end: float, gap: float = 1.0) -> float:
        """Acknowledged value bytes per second over [start, end) of a producer Kafka paces: held
        to a quota, it writes its buffer in one request, then waits out its mute, so its
        acknowledgements come in bursts (no two of a burst `gap` s apart). Measured from the
        end of the first burst to the end of the last, a window's edges cannot add or drop a
        whole request (1 in 5 of what a window of 60 s holds); `rate` where there is one burst."""
        with self.lock:
            acked = [(t, n) for t, n in self.acked if start <= t < end]
        first_end = next(
            (t for (t, _), (after, _) in zip(acked, acked[1:], strict=False) if after - t >= gap),
            None,
        )
        if first_end is None:
            return self.rate(start, end)
        last_end = acked[-1][0]
        return sum(n for t, n in acked if t > first_end) / (last_end - first_end)


class LoadProducer:
    kind = "librdkafka"

    def __init__(
        self,
        bootstrap: str,
        client_id: str = "kvq-load",
        user: str | None = None,
        password: str | None = None,
        stats_seconds: float | None = None,
        **config,
    ):
        """`stats_seconds`: record librdkafka's connection counters this often (`Transport`)."""
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
        self._tally = TransportTally()
        if stats_seconds:
            conf["statistics.interval.ms"] = max(1, int(stats_seconds * 1000))
            conf["stats_cb"] = self._on_statistics
        conf.update(config)
        self.producer = Producer(conf)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _on_throttle(self, event) -> None:
        with self.log.lock:
            self.log.throttles.append((time.monotonic(), int(event.throttle_time * 1000)))

    def _on_statistics(self, text: str) -> None:
        transport = self._tally.take(json.loads(text))
        with self.log.lock:
            self.log.transport.append((time.monotonic(), transport))

    def transport_between(self, start: float, end: float) -> Transport | None:
        """The counters' growth over [start, end] as far as recorded, with the most it held
        at once in that time; None without statistics."""
        with self.log.lock:
            inside = [counters for t, counters in self.log.transport if start <= t <= end]
            before = [counters for t, counters in self.log.transport if t < start]
        if not inside:
            return None
        return replace(
            inside[-1].since(before[-1] if before else Transport()),
            queued=max(counters.queued for counters in inside),
            awaiting=max(counters.awaiting for counters in inside),
        )

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


def librdkafka_settings(given: list[str]) -> dict[str, str]:
    """KEY=VALUE properties (each checked by `librdkafka_refuses`) as a producer's config."""
    return dict(setting.split("=", 1) for setting in given)


def librdkafka_refuses(given: str) -> str | None:
    """Why librdkafka refuses the property `given` as KEY=VALUE (its own words), or None."""
    key, equals, value = given.partition("=")
    if not equals or not key:
        return "give KEY=VALUE, a librdkafka property (e.g. enable.idempotence=true)"
    try:
        Producer({key: value, "log_level": 0}).flush(0)
    except KafkaException as refused:
        return refused.args[0].str()
    return None
