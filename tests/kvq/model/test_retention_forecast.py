"""What retention frees by times ahead, from a topic's configs and its partitions' offsets."""

from __future__ import annotations

from kvq.model.retention_forecast import (
    NEVER,
    UNKNOWN,
    PartitionOffsets,
    TopicRetention,
    volume_freed_bytes,
)

DAY_MS = 86_400_000
BY_SIZE = TopicRetention(7 * DAY_MS, 7 * DAY_MS, 1 << 30, 60_000)
"""Kafka's defaults: segments rolled by size long before a week."""
BY_TIME = TopicRetention(60_000, 5_000, 1 << 30, 0)
"""The bench's: segments of 5 s, freed at once."""


def test_the_probes_are_the_retention_time_a_check_and_the_delete_delay_back_and_a_segment_more():
    by_time, by_size = BY_TIME.probes(now_ms=10 * DAY_MS, ahead_ms=30_000, check_ms=1_000)
    assert by_size == 10 * DAY_MS + 30_000 - 60_000 - 1_000
    assert by_time == by_size - 5_000


def test_segments_rolled_by_time_no_sooner_than_retention_deletes_are_not_probed_by_time():
    by_time, by_size = BY_SIZE.probes(now_ms=10 * DAY_MS, ahead_ms=30_000, check_ms=300_000)
    assert by_size == 10 * DAY_MS + 30_000 - 7 * DAY_MS - 300_000 - 60_000
    assert by_time is None  # a week before that: before the log's start
    offsets = PartitionOffsets(1_000, 2_000, ((None, NEVER),))
    assert offsets.freed_bytes(1 << 30, BY_SIZE) == (0,)  # the whole log is one segment


def test_segments_rolled_by_size_free_what_lies_a_segment_before_the_first_offset_that_late():
    # 10 GiB in 10,240 offsets (1 MiB each); segments of 1 GiB (1,024 offsets)
    offsets = PartitionOffsets(1_000, 11_240, ((1_000, 5_000), (1_000, 9_000)))  # all a week new
    freed = offsets.freed_bytes(10 << 30, BY_SIZE)
    assert freed == ((5_000 - 1_024 - 1_000) << 20, (9_000 - 1_024 - 1_000) << 20)


def test_segments_rolled_by_time_free_what_lies_before_the_first_offset_a_segment_earlier():
    offsets = PartitionOffsets(0, 600, ((100, 150), (400, 450)))
    assert offsets.freed_bytes(600_000, BY_TIME) == (100_000, 400_000)


def test_nothing_is_freed_before_the_log_start_and_no_more_than_the_replica():
    offsets = PartitionOffsets(500, 600, ((100, 150), (NEVER, NEVER)))
    assert offsets.freed_bytes(100_000, BY_TIME) == (0, 100_000)
    assert PartitionOffsets(7, 7, ((NEVER, NEVER),)).freed_bytes(0, BY_TIME) == (0,)


def test_a_volume_frees_its_replicas_sum_but_nothing_of_topics_that_do_not_delete_by_time():
    compacted = TopicRetention(60_000, 5_000, 1 << 30, 0, deletes=False)
    forever = TopicRetention(NEVER, 5_000, 1 << 30, 0)
    offsets = PartitionOffsets(0, 100, ((50, 60),))
    sizes = {
        ("a", 0, False): 1_000,
        ("a", 1, False): 2_000,
        ("a", 1, True): 2_000,  # moving in: its source frees it
        ("c", 0, False): 1_000,
        ("f", 0, False): 1_000,
        ("unknown", 0, False): 1_000,
    }
    retention = {"a": BY_TIME, "c": compacted, "f": forever}
    known = {(t, p): offsets for t, p in [("a", 0), ("a", 1), ("c", 0), ("f", 0)]}
    assert volume_freed_bytes(sizes, retention, known, (30,)) == (500 + 1_000,)
    assert volume_freed_bytes(sizes, retention, {}, (30, 60)) == (0, 0)


def test_past_the_shortest_retention_time_of_a_volumes_topics_it_is_unknown():
    # by then retention frees what is written from now on, which no offset shows
    long = TopicRetention(600_000, 5_000, 1 << 30, 0)
    sizes = {("short", 0, False): 1_000, ("long", 0, False): 1_000}
    offsets = {("short", 0): PartitionOffsets(0, 100, ((50, 60),) * 3)}
    retention = {"short": BY_TIME, "long": long}
    assert volume_freed_bytes(sizes, retention, offsets, (30, 60, 90)) == (500, 500, UNKNOWN)
    assert volume_freed_bytes({("long", 0, False): 1}, retention, {}, (90,)) == (0,)
