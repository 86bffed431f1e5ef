"""The Kafka listener's wire format against an independent implementation of Kafka's
protocol, kafka-python's: for every advertised version, what kafka-python encodes is read as
the right Keel request, and what Keel answers is read back by kafka-python as it was meant."""

from __future__ import annotations

import struct

import pytest
from kafka.protocol.consumer import FetchRequest, FetchResponse, ListOffsetsRequest, ListOffsetsResponse
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse
from kafka.protocol.producer import ProduceRequest, ProduceResponse

from wire import api as keel
from wire import records
from wire.api import Response
from wire.context import ANONYMOUS_CONTEXT
from wire.errors import ErrorCode, InvalidRequest, UnsupportedVersion
from wire.kafka.listener import KafkaWireFormat
from wire.kafka.versions import ADVERTISED, MIN_PRODUCE_SERVED

FORMAT = KafkaWireFormat()
BATCH = records.build_batch([(b"k", b"v")], timestamp=1_700)


def versions(api_key: int, low: int | None = None) -> list[int]:
    first, last = ADVERTISED[api_key]
    return list(range(first if low is None else low, last + 1))


def roundtrip(request: object, answer: Response) -> tuple[object, object]:
    """Keel's request read from kafka-python's bytes, and kafka-python's reading of the
    answer Keel gives `answer` to it."""
    request.with_header(correlation_id=41, client_id="contract")  # type: ignore[attr-defined]
    parsed = FORMAT.parse(bytes(request.encode(header=True)), ANONYMOUS_CONTEXT)  # type: ignore[attr-defined]
    payload = FORMAT.encode(parsed, answer)
    assert payload is not None
    response_class = type(request).__name__.replace("Request", "Response")
    module = {
        "ApiVersionsResponse": ApiVersionsResponse,
        "MetadataResponse": MetadataResponse,
        "ProduceResponse": ProduceResponse,
        "FetchResponse": FetchResponse,
        "ListOffsetsResponse": ListOffsetsResponse,
    }[response_class]
    version = request.API_VERSION  # type: ignore[attr-defined]
    decoded = module[version].decode(payload, header=True)  # type: ignore[index]
    assert decoded.header.correlation_id == 41
    return parsed.body, decoded


@pytest.mark.parametrize("version", versions(18))
def test_api_versions_lists_the_advertised_table(version: int) -> None:
    _, decoded = roundtrip(ApiVersionsRequest[version](), keel.ApiVersionsResponse())
    assert decoded.error_code == 0
    assert {k.api_key: (k.min_version, k.max_version) for k in decoded.api_keys} == ADVERTISED


@pytest.mark.parametrize("version", versions(3))
def test_metadata_names_the_topics_and_answers_with_brokers_and_partitions(version: int) -> None:
    topics = [MetadataRequest.MetadataRequestTopic(name="orders")]
    request = MetadataRequest[version](topics=topics, allow_auto_topic_creation=False)
    answer = keel.MetadataResponse(
        cluster_id="keel-cluster",
        controller_id=2,
        brokers=[keel.MetadataBroker(broker_id=2, host="b2", port=9093, rack="r1")],
        topics=[
            keel.MetadataTopic(
                error_code=0,
                name="orders",
                partitions=[
                    keel.MetadataPartition(
                        error_code=0,
                        partition=0,
                        leader=2,
                        leader_epoch=5,
                        replicas=[2],
                        isr=[2],
                        offline_replicas=[],
                    )
                ],
            )
        ],
    )
    ours, decoded = roundtrip(request, answer)
    assert ours == keel.MetadataRequest(topics=["orders"])
    assert [(b.node_id, b.host, b.port) for b in decoded.brokers] == [(2, "b2", 9093)]
    [topic] = decoded.topics
    [partition] = topic.partitions
    assert (topic.name, partition.partition_index, partition.leader_id, list(partition.isr_nodes)) == (
        "orders",
        0,
        2,
        [2],
    )
    if version >= 1:
        assert decoded.controller_id == 2
    if version >= 7:
        assert partition.leader_epoch == 5


def test_metadata_v0_with_no_topics_asks_for_every_topic() -> None:
    ours, _ = roundtrip(MetadataRequest[0](topics=[]), keel.MetadataResponse())
    assert ours == keel.MetadataRequest(topics=None)


@pytest.mark.parametrize("version", versions(0, low=MIN_PRODUCE_SERVED))
def test_produce_carries_the_batch_as_it_is_and_answers_its_offset(version: int) -> None:
    data = ProduceRequest.TopicProduceData.PartitionProduceData(index=1, records=BATCH)
    request = ProduceRequest[version](
        transactional_id=None,
        acks=-1,
        timeout_ms=1_500,
        topic_data=[ProduceRequest.TopicProduceData(name="orders", partition_data=[data])],
    )
    answer = keel.ProduceResponse(
        responses=[
            keel.ProduceTopicResponse(
                name="orders",
                partition_responses=[
                    keel.ProducePartitionResponse(index=1, base_offset=77, log_start_offset=3)
                ],
            )
        ]
    )
    ours, decoded = roundtrip(request, answer)
    assert isinstance(ours, keel.ProduceRequest)
    assert (ours.acks, ours.timeout_ms) == (-1, 1_500)
    assert ours.topic_data[0].partition_data[0].records == BATCH
    [partition] = decoded.responses[0].partition_responses
    assert (partition.index, partition.error_code, partition.base_offset) == (1, 0, 77)


def test_an_error_alone_is_put_on_every_partition_named() -> None:
    data = ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=BATCH)
    request = ProduceRequest[9](
        transactional_id=None,
        acks=1,
        timeout_ms=1_000,
        topic_data=[ProduceRequest.TopicProduceData(name="orders", partition_data=[data, data])],
    )
    refused = Response(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, error_message="no")
    _, decoded = roundtrip(request, refused)
    codes = [p.error_code for p in decoded.responses[0].partition_responses]
    assert codes == [ErrorCode.TOPIC_AUTHORIZATION_FAILED] * 2


def test_acks_0_is_not_answered() -> None:
    data = ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=BATCH)
    request = ProduceRequest[7](
        transactional_id=None,
        acks=0,
        timeout_ms=1_000,
        topic_data=[ProduceRequest.TopicProduceData(name="orders", partition_data=[data])],
    )
    request.with_header(correlation_id=1, client_id="c")
    parsed = FORMAT.parse(bytes(request.encode(header=True)), ANONYMOUS_CONTEXT)
    assert FORMAT.encode(parsed, keel.ProduceResponse()) is None


@pytest.mark.parametrize("version", versions(1))
def test_fetch_is_a_consumers_and_its_answer_carries_the_batches(version: int) -> None:
    partition = FetchRequest.FetchTopic.FetchPartition(partition=2, fetch_offset=10, partition_max_bytes=4096)
    request = FetchRequest[version](
        replica_id=1,  # posing as a follower: read as a consumer all the same
        max_wait_ms=250,
        min_bytes=1,
        max_bytes=1 << 20,
        topics=[FetchRequest.FetchTopic(topic="orders", partitions=[partition])],
    )
    answer = keel.FetchResponse(
        responses=[
            keel.FetchableTopicResponse(
                topic="orders",
                partitions=[
                    keel.FetchPartitionData(
                        partition_index=2, high_watermark=11, log_start_offset=0, records=BATCH
                    )
                ],
            )
        ]
    )
    ours, decoded = roundtrip(request, answer)
    assert isinstance(ours, keel.FetchRequest)
    assert (ours.replica_id, ours.max_wait_ms, ours.session_epoch) == (-1, 250, -1)
    assert [(p.partition, p.fetch_offset, p.partition_max_bytes) for p in ours.topics[0].partitions] == [
        (2, 10, 4096)
    ]
    [data] = decoded.responses[0].partitions
    assert (data.partition_index, data.high_watermark, bytes(data.records)) == (2, 11, BATCH)


@pytest.mark.parametrize("version", versions(2))
def test_list_offsets_asks_by_time_as_a_consumer(version: int) -> None:
    partition = ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(partition_index=0, timestamp=-2)
    request = ListOffsetsRequest[version](
        replica_id=-1, topics=[ListOffsetsRequest.ListOffsetsTopic(name="orders", partitions=[partition])]
    )
    answer = keel.ListOffsetsResponse(
        topics=[
            keel.ListOffsetsTopicResponse(
                name="orders",
                partitions=[keel.ListOffsetsPartitionResponse(partition_index=0, timestamp=-1, offset=12)],
            )
        ]
    )
    ours, decoded = roundtrip(request, answer)
    assert isinstance(ours, keel.ListOffsetsRequest)
    assert (ours.replica_id, ours.topics[0].partitions[0].timestamp) == (-1, -2)
    [data] = decoded.topics[0].partitions
    assert (data.partition_index, data.offset) == (0, 12)


def test_an_api_versions_version_not_advertised_is_answered_at_v0_with_the_table() -> None:
    frame = struct.pack(">hhih", 18, 99, 5, -1)
    parsed = FORMAT.parse(frame, ANONYMOUS_CONTEXT)
    payload = FORMAT.encode(parsed, keel.ApiVersionsResponse())
    assert payload is not None
    decoded = ApiVersionsResponse[0].decode(payload, header=True)
    assert decoded.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert {k.api_key: (k.min_version, k.max_version) for k in decoded.api_keys} == ADVERTISED


@pytest.mark.parametrize(
    ("frame", "error"),
    [
        (struct.pack(">hhih", 11, 5, 5, -1) + b"\x00" * 20, UnsupportedVersion),  # JoinGroup: not served
        (struct.pack(">hhih", 0, 2, 5, -1) + b"\x00" * 20, InvalidRequest),  # Produce v2: bad bytes
        (struct.pack(">hhih", 3, 9, 5, -1) + b"\xff" * 3, InvalidRequest),  # Metadata cut short
        (b"\x00\x03", InvalidRequest),  # not even a header
    ],
)
def test_a_request_that_cannot_be_served_closes_its_connection(frame: bytes, error: type[Exception]) -> None:
    with pytest.raises(error) as refused:
        FORMAT.parse(frame, ANONYMOUS_CONTEXT)
    assert refused.value.correlation_id is None  # type: ignore[attr-defined]


def test_produce_before_record_batches_is_refused() -> None:
    """Produce v0-2 are advertised (librdkafka needs v0 listed) but carry magic 0/1 message
    sets: the connection closes, as Kafka 4's broker does."""
    data = ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=b"")
    request = ProduceRequest[2](
        acks=1,
        timeout_ms=1_000,
        topic_data=[ProduceRequest.TopicProduceData(name="t", partition_data=[data])],
    )
    request.with_header(correlation_id=1, client_id="c")
    with pytest.raises((UnsupportedVersion, InvalidRequest)) as refused:
        FORMAT.parse(bytes(request.encode(header=True)), ANONYMOUS_CONTEXT)
    assert refused.value.correlation_id is None
