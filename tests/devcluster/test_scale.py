"""200 brokers in one process (the exporter's benchmark needs them); no timing assertions here."""

import asyncio

import pytest
from kafka.admin import KafkaAdminClient
from kafka.protocol.admin import DescribeLogDirsRequest, DescribeLogDirsResponse

from devcluster.protocol_codec import FRAME_SIZE_BYTES, frame_size

pytestmark = pytest.mark.integration

BROKERS = 200


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    from devcluster.cluster import DevCluster

    with DevCluster(
        brokers=BROKERS, log_dirs_per_broker=2, data_dir=tmp_path_factory.mktemp("big")
    ) as dc:
        yield dc


def test_describe_cluster_lists_200_brokers(big):
    admin = KafkaAdminClient(bootstrap_servers=big.bootstrap.split(",")[0])
    try:
        described = admin.describe_cluster()
    finally:
        admin.close()
    assert [b["broker_id"] for b in described["brokers"]] == list(range(BROKERS))
    assert len(set(big.broker_ports.values())) == BROKERS


async def log_dirs_of(port):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        request = DescribeLogDirsRequest(version=4, topics=[])
        request.with_header(correlation_id=1, client_id="scale-test")
        writer.write(bytes(request.encode(header=True, framed=True)))
        payload = await reader.readexactly(frame_size(await reader.readexactly(FRAME_SIZE_BYTES)))
        return DescribeLogDirsResponse.decode(payload, version=4, header=True)
    finally:
        writer.close()


def test_200_slow_brokers_all_answer_concurrent_describe_log_dirs(big):
    for broker_id in range(BROKERS):
        big.set_faults(broker_id, latency_ms=20)
    try:

        async def everyone():
            return await asyncio.gather(*(log_dirs_of(p) for p in big.broker_ports.values()))

        answers = asyncio.run(everyone())
    finally:
        for broker_id in range(BROKERS):
            big.clear_faults(broker_id)
    assert [len(a.results) for a in answers] == [2] * BROKERS
    assert all(r.total_bytes > 0 for a in answers for r in a.results)
