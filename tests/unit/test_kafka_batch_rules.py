"""Kafka's version rules for a request's record batches, read through kafka-python's
encoding: from Produce v3 one magic-2 batch per partition, zstd only from Produce v7 and
Fetch v10; a refused partition never reaches Keel and the others are served; a failed
`acks=0` Produce closes its connection."""

from __future__ import annotations

import pytest
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.producer import ProduceRequest

from tests.unit.test_kafka_wire_format import BATCH, FORMAT, roundtrip, versions
from wire import api as keel
from wire import compression, records
from wire.context import ANONYMOUS_CONTEXT
from wire.errors import ErrorCode
from wire.kafka.batch_rules import ZSTD_FETCH_FROM, ZSTD_PRODUCE_FROM
from wire.kafka.listener import FailedUnansweredProduce

ZSTD_BATCH = records.build_batch([(b"k", b"v" * 100)], timestamp=1_700, compression_codec=compression.ZSTD)
GZIP_BATCH = records.build_batch([(b"k", b"v" * 100)], timestamp=1_700, compression_codec=compression.GZIP)
MAGIC_1 = BATCH[:16] + b"\x01" + BATCH[17:]


def produce(version: int, *partitions: bytes, acks: int = -1) -> object:
    data = [
        ProduceRequest.TopicProduceData.PartitionProduceData(index=i, records=r)
        for i, r in enumerate(partitions)
    ]
    return ProduceRequest[version](
        transactional_id=None,
        acks=acks,
        timeout_ms=1_000,
        topic_data=[ProduceRequest.TopicProduceData(name="orders", partition_data=data)],
    )


def served(partitions: list[int]) -> keel.ProduceResponse:
    """Keel's answer serving `partitions` of "orders", each at offset 10 times its index."""
    return keel.ProduceResponse(
        responses=[
            keel.ProduceTopicResponse(
                name="orders",
                partition_responses=[
                    keel.ProducePartitionResponse(index=i, base_offset=10 * i) for i in partitions
                ],
            )
        ]
    )


def answered(decoded: object) -> dict[int, tuple[int, int]]:
    return {
        p.index: (p.error_code, p.base_offset)
        for t in decoded.responses  # type: ignore[attr-defined]
        for p in t.partition_responses
    }


@pytest.mark.parametrize("version", versions(0, low=3))
def test_a_zstd_batch_before_produce_v7_is_refused_alone(version: int) -> None:
    ours, decoded = roundtrip(produce(version, ZSTD_BATCH, GZIP_BATCH), served([1]))
    if version < ZSTD_PRODUCE_FROM:
        assert [p.index for p in ours.topic_data[0].partition_data] == [1], (
            "the zstd partition never reaches the log"
        )
        assert answered(decoded) == {0: (ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, -1), 1: (0, 10)}
    else:
        assert [p.records for p in ours.topic_data[0].partition_data] == [ZSTD_BATCH, GZIP_BATCH]


@pytest.mark.parametrize(
    "records_sent", [BATCH + BATCH, b"", MAGIC_1], ids=["two-batches", "no-batch", "magic-1"]
)
def test_anything_but_one_magic_2_batch_per_partition_is_an_invalid_record(records_sent: bytes) -> None:
    ours, decoded = roundtrip(produce(9, BATCH, records_sent), served([0]))
    assert [p.index for p in ours.topic_data[0].partition_data] == [0]
    assert answered(decoded) == {0: (0, 0), 1: (ErrorCode.INVALID_RECORD, -1)}


def test_a_request_refused_whole_goes_to_keel_empty_and_every_partition_is_answered() -> None:
    ours, decoded = roundtrip(produce(5, ZSTD_BATCH, BATCH + BATCH), keel.ProduceResponse())
    assert ours.topic_data == []
    assert answered(decoded) == {
        0: (ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, -1),
        1: (ErrorCode.INVALID_RECORD, -1),
    }


def test_a_batch_that_cannot_be_read_is_left_to_the_leaders_validation() -> None:
    torn = BATCH[:-3]
    ours, _ = roundtrip(produce(9, torn), served([0]))
    assert ours.topic_data[0].partition_data[0].records == torn


@pytest.mark.parametrize("version", versions(1))
def test_a_zstd_batch_is_fetched_from_v10_only(version: int) -> None:
    partitions = [
        FetchRequest.FetchTopic.FetchPartition(partition=i, fetch_offset=0, partition_max_bytes=4096)
        for i in (0, 1)
    ]
    request = FetchRequest[version](
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=1 << 20,
        topics=[FetchRequest.FetchTopic(topic="orders", partitions=partitions)],
    )
    second = records.build_batch([(b"k", b"w")], timestamp=1_701, base_offset=1)
    answer = keel.FetchResponse(
        responses=[
            keel.FetchableTopicResponse(
                topic="orders",
                partitions=[
                    keel.FetchPartitionData(partition_index=0, high_watermark=2, records=second + ZSTD_BATCH),
                    keel.FetchPartitionData(partition_index=1, high_watermark=1, records=BATCH),
                ],
            )
        ]
    )
    _, decoded = roundtrip(request, answer)
    zstd, plain = decoded.responses[0].partitions
    if version < ZSTD_FETCH_FROM:
        assert (zstd.error_code, bytes(zstd.records or b"")) == (ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, b"")
    else:
        assert (zstd.error_code, bytes(zstd.records)) == (0, second + ZSTD_BATCH)
    assert (plain.error_code, bytes(plain.records)) == (0, BATCH), "the other partition is served"


def encoded(request: object) -> bytes:
    request.with_header(correlation_id=7, client_id="c")  # type: ignore[attr-defined]
    return bytes(request.encode(header=True))  # type: ignore[attr-defined]


def test_a_failed_acks_0_produce_closes_its_connection() -> None:
    parsed = FORMAT.parse(encoded(produce(9, BATCH, BATCH, acks=0)), ANONYMOUS_CONTEXT)
    answer = keel.ProduceResponse(
        responses=[
            keel.ProduceTopicResponse(
                name="orders",
                partition_responses=[
                    keel.ProducePartitionResponse(index=0, base_offset=5),
                    keel.ProducePartitionResponse(index=1, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER),
                ],
            )
        ]
    )
    with pytest.raises(FailedUnansweredProduce, match="orders-1 NOT_LEADER_OR_FOLLOWER") as closed:
        FORMAT.encode(parsed, answer)
    assert closed.value.correlation_id is None
    assert FORMAT.encode(parsed, served([0, 1])) is None, "one that succeeded is not answered"


def test_an_acks_0_produce_refused_by_its_batches_closes_its_connection() -> None:
    parsed = FORMAT.parse(encoded(produce(6, ZSTD_BATCH, acks=0)), ANONYMOUS_CONTEXT)
    with pytest.raises(FailedUnansweredProduce, match="orders-0 UNSUPPORTED_COMPRESSION_TYPE"):
        FORMAT.encode(parsed, keel.ProduceResponse())
