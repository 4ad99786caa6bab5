"""RetentionForecastSource against a client that answers as Kafka would (the real broker's
answers: tests/exporter/test_retention_forecast_kafka.py)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from exporter.cluster_client import ClusterError
from exporter.retention_forecast_source import EARLIEST, LATEST, RetentionForecastSource
from kvq.model.volume import LogDirDescription

NOW_S = 1_000_000.0
WRITTEN = {("t", 0): 1_000, ("t", 1): 1_000, ("u", 0): 1_000}
"""Partitions of 1,000 offsets of 1 kB each, written one offset a second until now: offset k was
written at NOW_S - 1,000 + k."""
TOPIC: dict[str, str | None] = {
    "cleanup.policy": "delete",
    "retention.ms": "100000",
    "segment.ms": "10000",
    "segment.bytes": "1073741824",
    "file.delete.delay.ms": "0",
    "remote.storage.enable": "false",
}


class Kafka:
    def __init__(self) -> None:
        self.configs: dict[str, dict[str, str | None] | ClusterError] = {"t": TOPIC, "u": TOPIC}
        self.checks: dict[int, str | ClusterError] = {0: "1000", 1: "2000"}
        self.leaders = {("t", 0): 0, ("t", 1): 1, ("u", 0): 1}
        self.topics_asked: list[set[str]] = []
        self.checks_asked = 0
        self.offsets_asked = 0

    def partition_leaders(self) -> dict[tuple[str, int], int]:
        return dict(self.leaders)

    def topic_configs(self, topics: Iterable[str], keys: Iterable[str]):
        self.topics_asked.append(set(topics))
        return {t: self.configs[t] for t in topics}

    def broker_configs(self, broker_ids: Iterable[int], key: str):
        self.checks_asked += 1
        return {b: self.checks[b] for b in broker_ids}

    def list_offsets(self, asked: Mapping[int, Mapping[tuple[str, int], int]]):
        self.offsets_asked += 1
        found = {}
        for leader, partitions in asked.items():
            for partition, timestamp in partitions.items():
                if self.leaders.get(partition) != leader:
                    continue  # NOT_LEADER_OR_FOLLOWER: left out
                end = WRITTEN[partition]
                if timestamp == EARLIEST:
                    found[partition] = 0
                elif timestamp == LATEST:
                    found[partition] = end
                else:  # the first offset written at or after it
                    first = int(timestamp / 1000 - (NOW_S - end))
                    found[partition] = -1 if first >= end else max(first, 0)
        return found


def log_dir(broker: int, *replicas: tuple[str, int]) -> LogDirDescription:
    sizes = {(t, p, False): 1_000_000 for t, p in replicas}
    return LogDirDescription(broker, f"/d{broker}", 10**9, 10**8, replica_sizes=sizes)


def test_each_log_dir_frees_what_its_replicas_wrote_a_retention_time_a_check_and_a_segment_ago():
    kafka, clock = Kafka(), [NOW_S]
    source = RetentionForecastSource(kafka, lambda: clock[0], aheads=(20, 90, 120))
    dirs = [log_dir(0, ("t", 0)), log_dir(1, ("t", 1), ("u", 0))]
    forecast = source.forecast(dirs)
    # 20 s ahead: written before now + 20 - 100 - 2 (broker 1's check, the longest) - 10, the
    # first 908 offsets; 90 s ahead, 978; 120 s, past the retention time: unknown
    assert forecast == {
        (0, "/d0"): (908_000, 978_000, -1),
        (1, "/d1"): (1_816_000, 1_956_000, -1),
    }
    assert kafka.offsets_asked == 2 + 2 * 3  # log start, log end, two probes per time ahead


def test_a_timestamp_two_times_ahead_share_is_asked_once():
    kafka = Kafka()
    # broker 0 checks every second: 10 s ahead, written before now - 91 s, and a segment (10 s)
    # before that; 20 s ahead, before now - 81 s, and now - 91 s again
    source = RetentionForecastSource(kafka, lambda: NOW_S, aheads=(10, 20))
    forecast = source.forecast([log_dir(0, ("t", 0))])
    assert forecast == {(0, "/d0"): (899_000, 909_000)}
    assert kafka.offsets_asked == 2 + 3


def test_what_cannot_be_read_is_not_foreseen_and_configs_are_read_at_every_forecast():
    """A topic's configs at every forecast: a retention time raised since the last would foresee
    deletions Kafka no longer makes. The brokers' check interval (set at their start) every
    minute."""
    kafka, clock = Kafka(), [NOW_S]
    kafka.configs["t"] = {**TOPIC, "retention.ms": "1000000"}
    kafka.configs["u"] = ClusterError("TopicAuthorizationFailedError")
    del kafka.leaders[("t", 1)]  # no leader
    kafka.checks[1] = ClusterError("broker 1: no answer")  # Kafka's default then: 300 s
    source = RetentionForecastSource(kafka, lambda: clock[0], aheads=(400,))
    dirs = [log_dir(0, ("t", 0)), log_dir(1, ("t", 1), ("u", 0))]
    # 400 s ahead: written before now + 400 - 1,000 - 300, and a segment before that: 90 offsets
    assert source.forecast(dirs) == {(0, "/d0"): (90_000,), (1, "/d1"): (0,)}
    clock[0] += 30
    kafka.configs["v"] = TOPIC
    kafka.configs["t"] = {**TOPIC, "retention.ms": "10000000"}  # raised: nothing freed soon
    assert source.forecast([*dirs, log_dir(2, ("v", 0))])[(0, "/d0")] == (0,)
    assert kafka.topics_asked == [{"t", "u"}, {"t", "u", "v"}]
    assert kafka.checks_asked == 1
    clock[0] += 30
    source.forecast(dirs)
    assert kafka.topics_asked[-1] == {"t", "u"} and kafka.checks_asked == 2  # a minute on
