"""DescribeLogDirs partition sizes on devcluster and on real Kafka alike: Kafka reports
`UnifiedLog.size`, the bytes of the partition's segments alone, not its index, time index,
leader-epoch checkpoint or partition.metadata files (which on Kafka are in the same directory)."""

from __future__ import annotations

from pathlib import Path

import pytest
from kafka.protocol.admin import DescribeLogDirsRequest

from devkit.devcluster_wire import admin_send, exchange
from tests.differential.backends import produce_request, record_batch

pytestmark = pytest.mark.integration


def test_a_partition_s_size_is_the_bytes_of_its_segments(backend, admin_client, leader, topic):
    batch = record_batch(10, 100)
    requests = [produce_request(topic, 0, batch) for _ in range(3)]
    for answer in exchange(backend.address(leader), requests):
        assert [p.error_code for t in answer.responses for p in t.partition_responses] == [0]
    wanted = DescribeLogDirsRequest.DescribableLogDirTopic(topic=topic, partitions=[0])
    response = admin_send(admin_client, DescribeLogDirsRequest(version=4, topics=[wanted]), leader)
    [(log_dir, size)] = [
        (result.log_dir, partition.partition_size)
        for result in response.results
        for found in result.topics
        if found.name == topic
        for partition in found.partitions
    ]
    assert size == 3 * len(batch)  # every batch as sent, offsets assigned in place
    segments = sorted((Path(log_dir) / f"{topic}-0").glob("*.log"))
    assert size == sum(path.stat().st_size for path in segments)
