"""Request decoding and response encoding with kafka-python's classes, without a network."""

import pytest
from kafka.protocol.admin import (
    AlterClientQuotasRequest,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
)
from kafka.protocol.api_header import RequestHeader
from kafka.protocol.metadata import ApiVersionsResponse, MetadataRequest

from devcluster.protocol_codec import BadRequest, decode_request, encode_response, frame_size


def payload(request, correlation_id=5, client_id="me"):
    request.with_header(correlation_id=correlation_id, client_id=client_id)
    return bytes(request.encode(header=True))


@pytest.mark.parametrize("version", [1, 2, 3, 4])  # v2+ are flexible: header v2, tagged fields
def test_decodes_header_and_body(version):
    topic = DescribeLogDirsRequest.DescribableLogDirTopic(topic="t", partitions=[0, 3])
    req = decode_request(payload(DescribeLogDirsRequest(version=version, topics=[topic])))
    assert (req.name, req.api_version, req.correlation_id, req.client_id) == (
        "DescribeLogDirs",
        version,
        5,
        "me",
    )
    assert [(t.topic, t.partitions) for t in req.body.topics] == [("t", [0, 3])]


def test_decodes_nested_quota_alterations():
    Entry = AlterClientQuotasRequest.EntryData
    request = AlterClientQuotasRequest(
        version=1,
        entries=[
            Entry(
                entity=[Entry.EntityData(entity_type="user", entity_name=None)],
                ops=[Entry.OpData(key="producer_byte_rate", value=1.5, remove=False)],
            )
        ],
        validate_only=True,
    )
    body = decode_request(payload(request)).body
    assert body.validate_only is True
    assert body.entries[0].entity[0].entity_name is None
    assert body.entries[0].ops[0].value == 1.5


def test_encodes_a_framed_response_with_the_right_header():
    result = DescribeLogDirsResponse.DescribeLogDirsResult(
        error_code=0, log_dir="/d", topics=[], total_bytes=100, usable_bytes=40
    )
    response = DescribeLogDirsResponse(
        version=4, throttle_time_ms=0, error_code=0, results=[result]
    )
    frame = encode_response(response, correlation_id=9)
    assert frame_size(frame[:4]) == len(frame) - 4
    back = DescribeLogDirsResponse.decode(frame, version=4, header=True, framed=True)
    assert back.header.correlation_id == 9
    assert (back.results[0].total_bytes, back.results[0].usable_bytes) == (100, 40)


def test_api_versions_response_header_is_v0_even_when_the_body_is_flexible():
    response = ApiVersionsResponse(version=3, error_code=0, api_keys=[], throttle_time_ms=0)
    frame = encode_response(response, correlation_id=1)
    assert ApiVersionsResponse.decode(frame[4:], version=3, header=True).error_code == 0
    # size, correlation id, then straight the body (no header tagged fields): error code 0 and
    # the compact encoding of an empty array (1)
    assert frame[8:11] == b"\x00\x00\x01"


def test_an_unknown_api_versions_version_keeps_only_the_header():
    header = RequestHeader(
        request_api_key=18, request_api_version=7, correlation_id=3, client_id="x"
    )
    req = decode_request(bytes(header.encode(flexible=True)))
    assert (req.api_version, req.correlation_id, req.body) == (7, 3, None)


@pytest.mark.parametrize(
    "raw, words",
    [
        (b"\x00", "unreadable request header"),
        (payload(DescribeLogDirsRequest(version=4, topics=[]))[:-3] + b"\xff", "malformed"),
    ],
)
def test_garbage_is_a_bad_request(raw, words):
    with pytest.raises(BadRequest, match=words):
        decode_request(raw)


def test_unsupported_versions_and_apis_are_bad_requests():
    with pytest.raises(BadRequest, match=r"DescribeLogDirs version 0 \(supported 1-4\)"):
        decode_request(payload(DescribeLogDirsRequest(version=0, topics=[])))
    header = RequestHeader(request_api_key=1, request_api_version=9, correlation_id=1, client_id="")
    with pytest.raises(BadRequest, match="unsupported API Fetch"):
        decode_request(bytes(header.encode()))
    with pytest.raises(BadRequest, match=r"Metadata version 13 \(supported 0-12\)"):
        decode_request(payload(MetadataRequest(version=13, topics=None)), {3: 12})
