"""Java producers for the demo and bench: Kafka's own `ProducerPerformance` (kafka-tools, from the
Maven jars devkit/kafka_dist.py fetches), over SASL/PLAIN, at a fixed rate.

The Java client differs from librdkafka where it matters here: it honours the throttle time a
broker returns (KIP-219) by not sending to that broker until it has passed. `ProducerPerformance`
reports only 5 s averages, so what it got acknowledged is read from Kafka instead: each Java
producer writes its own topic, and a thread reads the topic's high watermarks (ListOffsets) every
quarter second; with `acks=all` a record below the high watermark is acknowledged. The result is
a `DeliveryLog` like librdkafka's `LoadProducer` keeps. Its throttles are the throttle times the
brokers returned, as the client logged them (NetworkClient, "Connection to node N is throttled for
T ms until timestamp U": our log4j2 config writes those lines alone to `throttles.log`, read by the
same thread; U - T is when the response arrived, on the wall clock). Its errors are the exceptions
the tool printed, by class name.

`ProducerPerformance` keeps its *average* rate (its ThroughputThrottler compares records sent with
the time since the start): after a stall it sends faster than `--throughput` until it has caught
up, as a batch job with a backlog would.
"""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition

from devkit.kafka_cluster import KafkaCluster, plain_jaas, write_properties
from devkit.kafka_dist import PRODUCER_LOG4J2_CONFIG
from devkit.processes import ManagedProcess
from devkit.producer_load import DeliveryLog

MAIN_CLASS = "org.apache.kafka.tools.ProducerPerformance"
JVM_OPTIONS = ("-Xms16m", "-Xmx96m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
WATERMARK_INTERVAL = 0.25
_EXCEPTION = re.compile(r"org\.apache\.kafka\.common\.errors\.(\w+)")
_THROTTLED = re.compile(r"is throttled for (\d+) ms until timestamp (\d+)")


class JavaPerfProducer:
    """One `ProducerPerformance` JVM offering `rate` value bytes/s of `record_bytes` records to
    `topic` as `user`, with `client_id`; `log` fills from the topic's high watermarks."""

    kind = "Java"

    def __init__(
        self,
        kafka: KafkaCluster,
        work_dir: Path,
        topic: str,
        partitions: int,
        rate: float,
        user: str,
        client_id: str,
        record_bytes: int = 1000,
        config: dict[str, str] | None = None,
    ) -> None:
        self.user = user
        self.client_id = client_id
        self.topic = topic
        self.record_bytes = record_bytes
        self.log = DeliveryLog()
        self.work_dir = Path(work_dir)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self._stop = threading.Event()
        self._partitions = [TopicPartition(topic, p) for p in range(partitions)]
        self._consumer = Consumer(
            {"bootstrap.servers": kafka.bootstrap, "group.id": f"kvq-hwm-{topic}", "log_level": 0}
        )
        self._watermarks = self._read_watermarks()
        self._throttles_log = self.work_dir / "throttles.log"
        self._throttles_read = 0
        self._thread = threading.Thread(target=self._watch, name=f"hwm-{topic}", daemon=True)
        self._thread.start()
        properties = self.work_dir / "producer.properties"
        properties.touch(mode=0o600)  # a password
        write_properties(properties, self._producer_properties(kafka, config or {}))
        assert kafka.dist is not None
        argv = kafka.dist.java_argv(
            MAIN_CLASS,
            [
                "--topic", topic,
                "--num-records", str(10**12),
                "--record-size", str(record_bytes),
                "--throughput", f"{rate / record_bytes:g}",
                "--producer.config", str(properties),
            ],
            self.work_dir,
            list(JVM_OPTIONS),
            PRODUCER_LOG4J2_CONFIG,
        )  # fmt: skip
        self.process = ManagedProcess(argv, self.work_dir / "producer-performance.log")

    def _producer_properties(self, kafka: KafkaCluster, extra: dict[str, str]) -> dict[str, str]:
        jaas = plain_jaas(self.user, {self.user: kafka.users[self.user]})
        return {
            "bootstrap.servers": kafka.sasl_bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            # PlainLoginModule's client side reads username/password; the user_ entry is unused
            "sasl.jaas.config": jaas,
            "client.id": self.client_id,
            "acks": "all",
            "linger.ms": "5",
            # An application's buffer, like the librdkafka producers' 64 kB (the demo's
            # `Setup.producer_buffer`): send() blocks while throttled instead of queueing a
            # backlog ...
            "buffer.memory": "65536",
            # ... for as long as it takes, rather than failing records after the defaults
            # (60 s blocked, 120 s per record)
            "max.block.ms": "3600000",
            "delivery.timeout.ms": "3600000",
            **extra,
        }

    def _read_watermarks(self) -> dict[int, int]:
        marks = {}
        for tp in self._partitions:
            try:
                marks[tp.partition] = self._consumer.get_watermark_offsets(
                    tp, timeout=2, cached=False
                )[1]
            except Exception:  # noqa: BLE001 - a leader away: read it next time
                continue
        return marks

    def _read_throttles(self) -> None:
        """Append the throttle times logged since the last call to `log.throttles`."""
        try:
            with self._throttles_log.open("rb") as file:
                file.seek(self._throttles_read)
                text = file.read()
        except FileNotFoundError:  # no throttle yet
            return
        complete = text[: text.rfind(b"\n") + 1]  # a line still being written: next time
        self._throttles_read += len(complete)
        wall_to_monotonic = time.monotonic() - time.time()
        found = []
        for match in _THROTTLED.finditer(complete.decode(errors="replace")):
            throttle_ms, until_ms = int(match[1]), int(match[2])
            found.append(((until_ms - throttle_ms) / 1000 + wall_to_monotonic, throttle_ms))
        if found:
            with self.log.lock:
                self.log.throttles.extend(found)

    def _watch(self) -> None:
        while not self._stop.wait(WATERMARK_INTERVAL):
            self._read_throttles()
            now = time.monotonic()
            for partition, high in self._read_watermarks().items():
                before = self._watermarks.get(partition)
                self._watermarks[partition] = max(high, before or 0)
                if before is not None and high > before:
                    with self.log.lock:
                        self.log.acked.append((now, (high - before) * self.record_bytes))

    @property
    def running(self) -> bool:
        return self.process.running

    def read_errors(self) -> None:
        """Count the exceptions the tool printed so far (by class) into `log.errors`."""
        found = _EXCEPTION.findall(self.process.log_text())
        with self.log.lock:
            self.log.errors.clear()
            self.log.errors.update(found)

    def close(self) -> None:
        """Stop the JVM and the watermark thread; the errors it printed stay in `log.errors`."""
        self.read_errors()
        self.process.stop(timeout=10)
        self._stop.set()
        self._thread.join(5)
        self._read_throttles()
        self._consumer.close()
