"""Which AlterClientQuotas requests the brokers completed, from their request logs.

KafkaCluster(request_log=True) has every node log each request it completes to its
`requests.log` (devkit/kafka/log4j2-requests.properties), a UTC timestamp ahead of Kafka's JSON
description of the request, which names the client.id that sent it. Whether a replica that lost
the right to act got a quota write through is read there: the brokers' word, not the client's.
"""

from __future__ import annotations

import base64
import re
from datetime import UTC, datetime
from pathlib import Path

from devkit.kafka_cluster import KafkaCluster


def is_write_of(line: str, client: str) -> bool:
    """Whether a request log line is an AlterClientQuotas `client` sent to a broker (not the
    broker's forward of it to the controller), not a validation."""
    return (
        '"ALTER_CLIENT_QUOTAS"' in line
        and f'"clientId":"{client}"' in line
        and '"isForwarded":true' not in line
        and '"validateOnly":true' not in line
    )


def request_logs(kafka: KafkaCluster) -> list[Path]:
    return [kafka.node(n).logs_dir / "requests.log" for n in kafka.node_ids]


def write_times(kafka: KafkaCluster, client: str) -> list[float]:
    """The Unix times at which the brokers completed each quota write of `client`."""
    times = []
    for path in request_logs(kafka):
        for line in path.read_text(errors="replace").splitlines():
            if is_write_of(line, client):
                stamp = datetime.fromisoformat(line.split()[0]).replace(tzinfo=UTC)
                times.append(stamp.timestamp())
    return sorted(times)


def writes_after(kafka: KafkaCluster, client: str, since: float) -> int:
    """How many quota writes of `client` the brokers completed after `since` (Unix time)."""
    return sum(1 for at in write_times(kafka, client) if at > since)


class RequestLog:
    """The quota writes of one client the brokers complete from now on, read from the end of
    every broker's request log as it grows."""

    def __init__(self, kafka: KafkaCluster, client: str) -> None:
        self.paths = request_logs(kafka)
        self.offsets = {path: path.stat().st_size for path in self.paths}
        self.client = client
        self.seen = 0
        self._partial = {path: b"" for path in self.paths}

    def count(self) -> int:
        for path in self.paths:
            with path.open("rb") as log:
                log.seek(self.offsets[path])
                data = self._partial[path] + log.read()
                self.offsets[path] = log.tell()
            *lines, self._partial[path] = data.split(b"\n")
            self.seen += sum(
                1 for line in lines if is_write_of(line.decode(errors="replace"), self.client)
            )
        return self.seen


def join_claims(kafka: KafkaCluster, listener: str, since: float) -> list[list[int]]:
    """For each JoinGroup that reached the brokers through `listener` after `since` (Unix time),
    the partitions the joining member claims to own (its subscription's owned partitions,
    KIP-429), in the order the brokers completed them."""
    from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription

    claims = []
    for path in request_logs(kafka):
        for line in path.read_text(errors="replace").splitlines():
            if '"JOIN_GROUP"' not in line or f'"listener":"{listener}"' not in line:
                continue
            at = datetime.fromisoformat(line.split()[0]).replace(tzinfo=UTC).timestamp()
            found = re.search(r'"metadata":"([^"]*)"', line)
            if at > since and found:
                subscription = ConsumerProtocolSubscription.decode(base64.b64decode(found[1]))
                owned = [p for tp in subscription.owned_partitions or () for p in tp.partitions]
                claims.append((at, owned))
    return [owned for _, owned in sorted(claims)]
