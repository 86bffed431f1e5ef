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
    # Before v4 a request cannot decline auto-creation, and Kafka creates.
    assert ours == keel.MetadataRequest(topics=["orders"], allow_auto_topic_creation=version < 4)
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
        (
            struct.pack(">hhih", 24, 0, 5, -1) + b"\x00" * 20,
            UnsupportedVersion,
        ),  # AddPartitionsToTxn: not served
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


# --- the APIs translated by field name ---


def _decode_class(request: object) -> object:
    """kafka-python's response class answering `request`."""
    from kafka.protocol import admin, consumer, producer, sasl

    name = type(request).__name__.replace("Request", "Response")
    for module in (admin, consumer, producer, sasl):
        if hasattr(module, name):
            return getattr(module, name)
    raise LookupError(name)


def exchange(request: object, answer: Response) -> tuple[object, object]:
    request.with_header(correlation_id=43, client_id="contract")  # type: ignore[attr-defined]
    parsed = FORMAT.parse(bytes(request.encode(header=True)), ANONYMOUS_CONTEXT)  # type: ignore[attr-defined]
    payload = FORMAT.encode(parsed, answer)
    assert payload is not None
    version = request.API_VERSION  # type: ignore[attr-defined]
    return parsed.body, _decode_class(request)[version].decode(payload, header=True)  # type: ignore[index]


@pytest.mark.parametrize("version", versions(19))
def test_create_topics_carries_counts_assignments_and_configs(version: int) -> None:
    from kafka.protocol.admin import CreateTopicsRequest as K

    topic = K.CreatableTopic(
        name="orders",
        num_partitions=-1,
        replication_factor=-1,
        assignments=[K.CreatableTopic.CreatableReplicaAssignment(partition_index=0, broker_ids=[1, 2])],
        configs=[K.CreatableTopic.CreatableTopicConfig(name="retention.ms", value="1000")],
    )
    request = K[version](topics=[topic], timeout_ms=5_000, validate_only=False)
    answer = keel.CreateTopicsResponse(
        topics=[
            keel.CreatableTopicResult(name="orders", error_code=0, num_partitions=1, replication_factor=2)
        ]
    )
    ours, decoded = exchange(request, answer)
    assert ours == keel.CreateTopicsRequest(
        topics=[
            keel.CreatableTopic(
                name="orders",
                assignments=[keel.CreatableReplicaAssignment(partition=0, broker_ids=[1, 2])],
                configs={"retention.ms": "1000"},
            )
        ],
        timeout_ms=5_000,
    )
    [result] = decoded.topics
    assert (result.name, result.error_code) == ("orders", 0)
    if version >= 5:
        assert (result.num_partitions, result.replication_factor) == (1, 2)
    refused = Response(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message="no")
    _, decoded = exchange(request, refused)
    assert [t.error_code for t in decoded.topics] == [ErrorCode.CLUSTER_AUTHORIZATION_FAILED]


@pytest.mark.parametrize("version", versions(20))
def test_delete_topics_by_name(version: int) -> None:
    from kafka.protocol.admin import DeleteTopicsRequest as K

    request = K[version](topic_names=["a", "b"], timeout_ms=2_000)
    answer = keel.DeleteTopicsResponse(
        responses=[
            keel.DeletableTopicResult(name="a", error_code=0),
            keel.DeletableTopicResult(name="b", error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ]
    )
    ours, decoded = exchange(request, answer)
    assert ours == keel.DeleteTopicsRequest(topic_names=["a", "b"], timeout_ms=2_000)
    assert [(r.name, r.error_code) for r in decoded.responses] == [("a", 0), ("b", 3)]


@pytest.mark.parametrize("version", versions(37))
def test_create_partitions_with_and_without_assignments(version: int) -> None:
    from kafka.protocol.admin import CreatePartitionsRequest as K

    topics = [
        K.CreatePartitionsTopic(name="a", count=4, assignments=None),
        K.CreatePartitionsTopic(
            name="b",
            count=2,
            assignments=[K.CreatePartitionsTopic.CreatePartitionsAssignment(broker_ids=[3])],
        ),
    ]
    request = K[version](topics=topics, timeout_ms=1_000, validate_only=True)
    answer = keel.CreatePartitionsResponse(results=[keel.CreatePartitionsTopicResult(name="a", error_code=0)])
    ours, decoded = exchange(request, answer)
    assert isinstance(ours, keel.CreatePartitionsRequest) and ours.validate_only
    assert [(t.name, t.count, t.assignments) for t in ours.topics] == [
        ("a", 4, None),
        ("b", 2, [keel.CreatePartitionsAssignment(broker_ids=[3])]),
    ]
    assert [(r.name, r.error_code) for r in decoded.results] == [("a", 0)]


@pytest.mark.parametrize("version", versions(32))
def test_describe_configs_answers_each_resource(version: int) -> None:
    from kafka.protocol.admin import DescribeConfigsRequest as K

    request = K[version](
        resources=[
            K.DescribeConfigsResource(resource_type=2, resource_name="orders", configuration_keys=None)
        ]
    )
    answer = keel.DescribeConfigsResponse(
        results=[
            keel.DescribeConfigsResult(
                resource_type=2,
                resource_name="orders",
                configs=[keel.DescribeConfigsResourceResult(name="retention.ms", value="1000")],
            )
        ]
    )
    ours, decoded = exchange(request, answer)
    assert ours == keel.DescribeConfigsRequest(
        resources=[keel.DescribeConfigsResource(resource_type=2, resource_name="orders")]
    )
    [result] = decoded.results
    assert [(c.name, c.value) for c in result.configs] == [("retention.ms", "1000")]


@pytest.mark.parametrize("version", versions(44))
def test_incremental_alter_configs(version: int) -> None:
    from kafka.protocol.admin import IncrementalAlterConfigsRequest as K

    resource = K.AlterConfigsResource(
        resource_type=2,
        resource_name="orders",
        configs=[K.AlterConfigsResource.AlterableConfig(name="retention.ms", config_operation=0, value="5")],
    )
    request = K[version](resources=[resource], validate_only=False)
    answer = keel.IncrementalAlterConfigsResponse(
        responses=[keel.AlterConfigsResourceResponse(resource_type=2, resource_name="orders")]
    )
    ours, decoded = exchange(request, answer)
    assert isinstance(ours, keel.IncrementalAlterConfigsRequest)
    assert ours.resources[0].configs == [
        keel.AlterableConfig(name="retention.ms", config_operation=0, value="5")
    ]
    assert [(r.resource_name, r.error_code) for r in decoded.responses] == [("orders", 0)]


@pytest.mark.parametrize("version", versions(60))
def test_describe_cluster(version: int) -> None:
    from kafka.protocol.admin import DescribeClusterRequest as K

    answer = keel.DescribeClusterResponse(
        cluster_id="c1", controller_id=2, brokers=[keel.DescribedBroker(broker_id=2, host="h", port=9093)]
    )
    _, decoded = exchange(K[version](), answer)
    assert (decoded.cluster_id, decoded.controller_id) == ("c1", 2)
    assert [(b.broker_id, b.host, b.port) for b in decoded.brokers] == [(2, "h", 9093)]


@pytest.mark.parametrize("version", versions(43))
def test_elect_leaders(version: int) -> None:
    from kafka.protocol.admin import ElectLeadersRequest as K

    request = K[version](
        election_type=0,
        topic_partitions=[K.TopicPartitions(topic="orders", partitions=[0, 1])],
        timeout_ms=9_000,
    )
    answer = keel.ElectLeadersResponse(
        replica_election_results=[
            keel.ReplicaElectionResult(
                topic="orders", partition_result=[keel.PartitionElectionResult(partition_id=1, error_code=84)]
            )
        ]
    )
    ours, decoded = exchange(request, answer)
    assert ours == keel.ElectLeadersRequest(
        topic_partitions=[keel.ElectLeadersTopicPartitions(topic="orders", partitions=[0, 1])],
        timeout_ms=9_000,
    )
    [result] = decoded.replica_election_results
    assert [(p.partition_id, p.error_code) for p in result.partition_result] == [(1, 84)]


def test_partition_reassignments_alter_and_list() -> None:
    from kafka.protocol.admin import AlterPartitionReassignmentsRequest as A
    from kafka.protocol.admin import ListPartitionReassignmentsRequest as L

    partition = A.ReassignableTopic.ReassignablePartition(partition_index=0, replicas=[2, 3])
    request = A[0](timeout_ms=1_000, topics=[A.ReassignableTopic(name="orders", partitions=[partition])])
    answer = keel.AlterPartitionReassignmentsResponse(
        responses=[
            keel.ReassignableTopicResponse(
                name="orders", partitions=[keel.ReassignablePartitionResponse(partition_index=0)]
            )
        ]
    )
    ours, decoded = exchange(request, answer)
    assert isinstance(ours, keel.AlterPartitionReassignmentsRequest)
    assert ours.topics[0].partitions == [keel.ReassignablePartition(partition_index=0, replicas=[2, 3])]
    assert decoded.responses[0].partitions[0].error_code == 0
    listing = keel.ListPartitionReassignmentsResponse(
        topics=[
            keel.OngoingTopicReassignment(
                name="orders",
                partitions=[
                    keel.OngoingPartitionReassignment(
                        partition_index=0, replicas=[1, 2, 3], adding_replicas=[3]
                    )
                ],
            )
        ]
    )
    ours, decoded = exchange(L[0](timeout_ms=1_000, topics=None), listing)
    assert ours == keel.ListPartitionReassignmentsRequest(timeout_ms=1_000, topics=None)
    [partition_listed] = decoded.topics[0].partitions
    assert (list(partition_listed.replicas), list(partition_listed.adding_replicas)) == ([1, 2, 3], [3])


@pytest.mark.parametrize("version", versions(35))
def test_describe_log_dirs(version: int) -> None:
    from kafka.protocol.admin import DescribeLogDirsRequest as K

    answer = keel.DescribeLogDirsResponse(
        results=[
            keel.DescribeLogDirsResult(
                log_dir="/data",
                topics=[
                    keel.DescribeLogDirsTopic(
                        name="orders",
                        partitions=[keel.DescribeLogDirsPartition(partition_index=0, partition_size=99)],
                    )
                ],
            )
        ]
    )
    ours, decoded = exchange(K[version](topics=None), answer)
    assert ours == keel.DescribeLogDirsRequest(topics=None)
    [result] = decoded.results
    assert (result.log_dir, result.topics[0].partitions[0].partition_size) == ("/data", 99)


@pytest.mark.parametrize("version", versions(23))
def test_offset_for_leader_epoch_as_a_consumer(version: int) -> None:
    from kafka.protocol.consumer import OffsetForLeaderEpochRequest as K

    partition = K.OffsetForLeaderTopic.OffsetForLeaderPartition(
        partition=0, current_leader_epoch=3, leader_epoch=2
    )
    request = K[version](
        replica_id=1, topics=[K.OffsetForLeaderTopic(topic="orders", partitions=[partition])]
    )
    answer = keel.OffsetsForLeaderEpochResponse(
        topics=[
            keel.OffsetForLeaderTopicResult(
                topic="orders", partitions=[keel.EpochEndOffset(partition=0, leader_epoch=2, end_offset=50)]
            )
        ]
    )
    ours, decoded = exchange(request, answer)
    assert isinstance(ours, keel.OffsetsForLeaderEpochRequest) and ours.replica_id == -1
    assert ours.topics[0].partitions == [
        keel.OffsetForLeaderPartition(partition=0, current_leader_epoch=3, leader_epoch=2)
    ]
    [end] = decoded.topics[0].partitions
    assert (end.leader_epoch, end.end_offset) == (2, 50)


def test_the_sasl_exchange_is_keels_own() -> None:
    from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

    ours, decoded = exchange(
        SaslHandshakeRequest[1](mechanism="SCRAM-SHA-512"),
        keel.SaslHandshakeResponse(mechanisms=["SCRAM-SHA-512"]),
    )
    assert ours == keel.SaslHandshakeRequest(mechanism="SCRAM-SHA-512")
    assert list(decoded.mechanisms) == ["SCRAM-SHA-512"]
    for version in versions(36):
        ours, decoded = exchange(
            SaslAuthenticateRequest[version](auth_bytes=b"client-first"),
            keel.SaslAuthenticateResponse(auth_bytes=b"server-first", session_lifetime_ms=60_000),
        )
        assert ours == keel.SaslAuthenticateRequest(auth_bytes=b"client-first")
        assert bytes(decoded.auth_bytes) == b"server-first"
        if version >= 1:
            assert decoded.session_lifetime_ms == 60_000


# --- tagged fields a spec does not name are skipped, as Kafka skips them ---

# librdkafka 2.16's Metadata v9 for every topic, as sent after SASL: a tagged field (tag 0,
# empty) that MetadataRequest does not define, then one byte more.
LIBRDKAFKA_METADATA_V9 = bytes.fromhex("000300090000000c000772646b61666b61000000000001000000")


def test_librdkafkas_metadata_with_an_unknown_tagged_field_is_read() -> None:
    parsed = FORMAT.parse(LIBRDKAFKA_METADATA_V9, ANONYMOUS_CONTEXT)
    assert parsed.body == keel.MetadataRequest(topics=None)
    assert parsed.header.correlation_id == 12


def test_unknown_tagged_fields_inside_nested_entities_are_skipped() -> None:
    from wire.kafka.tolerant_reader import read_entity

    request = MetadataRequest[9](
        topics=[
            MetadataRequest.MetadataRequestTopic(name="a"),
            MetadataRequest.MetadataRequestTopic(name="b"),
        ],
        allow_auto_topic_creation=True,
    )
    request.with_header(correlation_id=5, client_id="c")
    plain_frame = bytes(request.encode(header=True))
    # Each topic entry ends in its tagged-field count (0): give the first an unknown tag 7
    # of 3 bytes. The entry of "a" is: compact string (02 61), then tags (00).
    tagged = plain_frame.replace(b"\x02a\x00", b"\x02a\x01\x07\x03xyz", 1)
    assert tagged != plain_frame
    parsed = FORMAT.parse(tagged, ANONYMOUS_CONTEXT)
    assert parsed.body == keel.MetadataRequest(topics=["a", "b"], allow_auto_topic_creation=True)
    # On a frame without unknown tags it reads what kio's native reader reads.
    from kio.index import load_request_schema
    from kio.schema.request_header.v2.header import RequestHeader

    header, offset = read_entity(RequestHeader, plain_frame, 0)
    body, _ = read_entity(load_request_schema(3, 9), plain_frame, offset)
    assert header.correlation_id == 5
    assert [t.name for t in body.topics] == ["a", "b"] and body.allow_auto_topic_creation


def test_an_array_longer_than_its_bytes_is_refused_before_it_is_read() -> None:
    # Metadata v9, topics claiming 2^28 entries in a handful of bytes.
    frame = bytes.fromhex("0003000900000001000163") + b"\x00" + b"\x80\x80\x80\x80\x01" + b"\x00" * 4
    with pytest.raises(InvalidRequest):
        FORMAT.parse(frame, ANONYMOUS_CONTEXT)


@pytest.mark.parametrize("version", versions(22))
def test_init_producer_id(version: int) -> None:
    from kafka.protocol.producer import InitProducerIdRequest

    request = InitProducerIdRequest[version](transactional_id=None, transaction_timeout_ms=-1)
    ours, decoded = exchange(request, keel.InitProducerIdResponse(producer_id=4_000, producer_epoch=0))
    assert isinstance(ours, keel.InitProducerIdRequest) and ours.transactional_id is None
    assert (decoded.error_code, decoded.producer_id, decoded.producer_epoch) == (0, 4_000, 0)


@pytest.mark.parametrize(
    "frame",
    [
        struct.pack(">hhih", 3, 4, 1, -1) + struct.pack(">i", 2**31 - 1) + b"\x00" * 20,
        struct.pack(">hhih", 3, 9, 1, -1) + b"\x00" + b"\xff\xff\xff\xff\x07" + b"\x00" * 20,
        struct.pack(">hhih", 1, 12, 1, -1)
        + b"\x00\x00"
        + b"\xff" * 12
        + b"\x00" * 9
        + b"\x02\x02a\xff\xff\xff\xff\x07",
    ],
    ids=["int32-count", "compact-count", "nested-count"],
)
def test_a_count_larger_than_the_frame_is_refused_without_allocating_it(frame: bytes) -> None:
    import resource

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(InvalidRequest) as refused:
        FORMAT.parse(frame, ANONYMOUS_CONTEXT)
    assert refused.value.correlation_id is None, "the connection closes"
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 64 * 1024, "less than 64 MiB"


def test_kafka_python_infers_kafka_3_0_from_the_table() -> None:
    """Above 3.0, a kafka-python held to a configured `api_version=(3, 0)` falls back to
    Kafka 3.0's own version table (Metadata 11), which Keel does not serve."""
    from kafka.protocol.broker_version_data import infer_broker_version_from_api_versions

    assert infer_broker_version_from_api_versions(ADVERTISED) == (3, 0)
