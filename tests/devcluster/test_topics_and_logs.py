"""Topic placement checks (ReplicationControlManager's cases) and one replica's segment: offsets,
recovery after a torn write, no partial batch on a full disk."""

from __future__ import annotations

import pytest
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

from devcluster.partition_log import CorruptBatch, NoSpace, PartitionLog, batches
from devcluster.topics import NewTopic, TopicError, TopicRegistry, place_replicas, validate_name


def test_striped_placement_spreads_leaders():
    placement = place_replicas(NewTopic("t", 3, 2), [0, 1, 2])
    assert placement == {0: [0, 1], 1: [1, 2], 2: [2, 0]}
    assert place_replicas(NewTopic("t"), [5]) == {0: [5]}  # -1 / -1: the broker defaults


@pytest.mark.parametrize(
    "topic, code, words",
    [
        (NewTopic("t", 1, 0), 38, "Replication factor must be larger than 0"),
        (NewTopic("t", 0, 1), 37, "non-positive"),
        (NewTopic("t", 1, 4), 38, "only 3 broker(s) are registered"),
        (NewTopic("t", 2, -1, ((0, (0,)),)), 42, "numPartitions was not set to -1"),
        (NewTopic("t", -1, 1, ((0, (0,)),)), 42, "replication factor was not set to -1"),
        (NewTopic("t", assignments=((0, (0,)), (0, (1,)))), 39, "multiple manual"),
        (NewTopic("t", assignments=((0, (0, 0)),)), 39, "the broker 0 more than once"),
        (NewTopic("t", assignments=((0, ()),)), 39, "empty replica list"),
        (NewTopic("t", assignments=((0, (0,)), (1, (0, 1)))), 39, "not consistent"),
        (NewTopic("t", assignments=((1, (0,)),)), 39, "consecutive 0-based"),
    ],
)
def test_kraft_rejects_what_it_rejects(topic, code, words):
    with pytest.raises(TopicError) as info:
        place_replicas(topic, [0, 1, 2])
    assert info.value.code == code and words in info.value.message


@pytest.mark.parametrize("name", ["", ".", "..", "a" * 250, "has space", "slash/"])
def test_illegal_topic_names(name):
    with pytest.raises(TopicError) as info:
        validate_name(name)
    assert info.value.code == 17


def test_registry_survives_reopening(tmp_path):
    registry = TopicRegistry(tmp_path / "topics.json")
    registry.add("kept", {0: [1, 0]})
    with pytest.raises(TopicError) as info:
        registry.add("kept", {0: [0]})
    assert info.value.code == 36
    assert TopicRegistry(tmp_path / "topics.json").replicas("kept", 0) == [1, 0]


def batch(*values: bytes) -> bytes:
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    for value in values:
        builder.append(timestamp=None, key=None, value=value, headers=[])
    builder.close()
    return bytes(builder.buffer())


def offsets_and_values(path) -> list[tuple[int, bytes]]:
    records = MemoryRecords(path.read_bytes())
    out = []
    while records.has_next():
        out.extend((r.offset, r.value) for r in records.next_batch())
    return out


def test_offsets_are_assigned_and_recovered(tmp_path):
    log = PartitionLog(tmp_path / "t-0")
    for values in ([b"a", b"b"], [b"c"]):
        data, base, end = log.assign_offsets(batch(*values))
        log.append(data, end, None)
    assert log.next_offset == 3
    log.close()
    reopened = PartitionLog(tmp_path / "t-0")
    assert reopened.next_offset == 3
    assert offsets_and_values(reopened.path) == [(0, b"a"), (1, b"b"), (2, b"c")]


def test_a_torn_write_at_the_end_is_cut_on_recovery(tmp_path):
    log = PartitionLog(tmp_path / "t-0")
    data, _, end = log.assign_offsets(batch(b"whole"))
    log.append(data, end, None)
    log.close()
    with open(log.path, "ab") as f:
        f.write(batch(b"torn")[:30])
    reopened = PartitionLog(tmp_path / "t-0")
    assert (reopened.next_offset, reopened.size) == (1, len(data))
    assert offsets_and_values(reopened.path) == [(0, b"whole")]


def test_a_batch_that_does_not_fit_writes_nothing(tmp_path):
    log = PartitionLog(tmp_path / "t-0")
    data, _, end = log.assign_offsets(batch(b"x" * 100))
    with pytest.raises(NoSpace):
        log.append(data, end, usable_bytes=len(data) - 1)
    assert (log.size, log.next_offset, log.path.stat().st_size) == (0, 0, 0)


@pytest.mark.parametrize(
    "records, code",
    [(b"", 2), (batch(b"x")[:-1], 2), (batch(b"x") + b"\0" * 10, 2)],
    ids=["empty", "cut-short", "trailing-bytes"],  # the batches hold the time: no stable id
)
def test_records_that_are_not_whole_batches_are_corrupt(records, code):
    with pytest.raises(CorruptBatch) as info:
        batches(records)
    assert info.value.code == code


def test_old_message_formats_are_refused():
    v2 = bytearray(batch(b"x"))
    v2[16] = 1  # magic 1
    with pytest.raises(CorruptBatch) as info:
        batches(v2)
    assert info.value.code == 43
