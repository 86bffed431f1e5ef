"""Request and response envelopes: golden bytes and every way a request can be wrong."""

from __future__ import annotations

import msgpack
import pytest

from wire.api import (
    ApiKey,
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribedBroker,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
)
from wire.envelope import (
    RequestHeader,
    decode_response,
    encode_request,
    encode_response,
    error_response,
    parse_request,
)
from wire.errors import CorruptMessage, ErrorCode, InvalidRequest, UnsupportedVersion


def test_request_golden_bytes() -> None:
    header = RequestHeader(ApiKey.DESCRIBE_CLUSTER, 0, 7, "cli")
    # [60, 0, 7, "cli", {}]
    assert encode_request(header, DescribeClusterRequest()) == b"\x95\x3c\x00\x07\xa3cli\x80"


def test_response_golden_bytes() -> None:
    body = DescribeClusterResponse(cluster_id="c", controller_id=2, controller_epoch=5)
    expected = msgpack.packb(
        [
            9,
            {
                "error_code": 0,
                "error_message": None,
                "cluster_id": "c",
                "controller_id": 2,
                "controller_epoch": 5,
                "brokers": [],
            },
        ]
    )
    assert encode_response(9, body) == expected


def test_request_round_trip() -> None:
    header = RequestHeader(ApiKey.API_VERSIONS, 0, 123, None)
    from wire.api import ApiVersionsRequest

    parsed = parse_request(encode_request(header, ApiVersionsRequest()))
    assert parsed.header == header
    assert parsed.spec.key is ApiKey.API_VERSIONS


def test_response_round_trip_keeps_nested_structs() -> None:
    body = DescribeClusterResponse(brokers=[DescribedBroker(broker_id=1, host="h", port=1, rack="r")])
    correlation_id, raw = decode_response(encode_response(4, body))
    assert correlation_id == 4
    assert DescribeClusterResponse.from_wire(raw) == body


def test_not_msgpack_is_corrupt_without_a_correlation_id() -> None:
    with pytest.raises(CorruptMessage) as caught:
        parse_request(b"\xc1")  # 0xc1 is never used in msgpack
    assert caught.value.correlation_id is None


@pytest.mark.parametrize(
    ("value", "correlation_id"),
    [
        ({"not": "a list"}, None),
        ([18, 0], None),
        ([18, 0, "seven", None, {}], None),
        ([18, 0, 7, None], 7),
        ([18, "zero", 7, None, {}], 7),
        ([18, 0, 7, 42, {}], 7),
        ([18, 0, 7, None, {}, "extra"], 7),
    ],
)
def test_wrong_shape_is_invalid_and_keeps_the_correlation_id_when_readable(
    value: object, correlation_id: int | None
) -> None:
    with pytest.raises(InvalidRequest) as caught:
        parse_request(msgpack.packb(value))
    assert caught.value.correlation_id == correlation_id
    assert caught.value.code == ErrorCode.INVALID_REQUEST


def test_unknown_api_key_is_invalid_request() -> None:
    with pytest.raises(InvalidRequest, match="unknown api key 999") as caught:
        parse_request(msgpack.packb([999, 0, 5, None, {}]))
    assert caught.value.correlation_id == 5


def test_unknown_version_is_unsupported() -> None:
    with pytest.raises(UnsupportedVersion, match="DESCRIBE_CLUSTER version 9") as caught:
        parse_request(msgpack.packb([60, 9, 6, None, {}]))
    assert caught.value.correlation_id == 6


def test_body_that_is_not_a_map_is_invalid() -> None:
    with pytest.raises(InvalidRequest, match="expected map") as caught:
        parse_request(msgpack.packb([18, 0, 8, None, [1, 2]]))
    assert caught.value.correlation_id == 8


def test_error_response_carries_code_and_message() -> None:
    body = error_response(UnsupportedVersion("too new"))
    assert body.to_wire() == {"error_code": 35, "error_message": "too new"}


def test_response_of_the_wrong_shape_is_corrupt() -> None:
    with pytest.raises(CorruptMessage):
        decode_response(msgpack.packb([1, 2, 3]))


@pytest.mark.parametrize(
    "body",
    [[{}] * 200_000, [[]] * 200_000, [0] * 2_000_000, [[{}] * 1000] * 200],
    ids=["empty maps", "empty arrays", "a long array of one-byte ints", "short arrays of empty maps"],
)
def test_a_frame_that_would_unpack_to_many_times_its_size_is_refused(body: list[object]) -> None:
    """A one-byte map or array becomes a Python object of 56-64 bytes: 73 times the frame."""
    payload = msgpack.packb([0, 0, 1, None, body])
    with pytest.raises(CorruptMessage, match="more"):
        parse_request(payload)


def test_a_controller_request_of_a_thousand_partition_states_unpacks() -> None:
    states = [
        LeaderAndIsrPartitionState(
            topic=f"t{i // 100}", partition=i % 100, controller_epoch=1, leader=1, leader_epoch=3,
            isr=[1, 2, 3], partition_epoch=2, replicas=[1, 2, 3],
        )
        for i in range(1000)
    ]  # fmt: skip
    request = LeaderAndIsrRequest(
        controller_id=1, controller_epoch=1, broker_epoch=5, partition_states=states
    )
    parsed = parse_request(encode_request(RequestHeader(ApiKey.LEADER_AND_ISR, 0, 7, "c"), request))
    assert parsed.body == request
