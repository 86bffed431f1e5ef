"""Kafka's requests as Keel's, and Keel's answers as Kafka's, API by API.

Keel's APIs carry Kafka's fields under Kafka's names, so most translations are the same one
(`renamed`): kio's request of any version as plain values (`codec.plain`) read by Keel's
request struct, and Keel's answer as plain values that `codec.build` makes into the request's
version, fields of other versions keeping their defaults. The few whose shapes differ
(Metadata, Produce, Fetch, ListOffsets, ApiVersions, CreateTopics) have their own. A Kafka
client may not pose as a follower here: `replica_id` is always a consumer's.

When the handler answered with an error alone (the bare `Response` of a refused or failed
request), `to_kafka` puts that error where the Kafka response has room for it: on every
topic or partition the request named.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from wire.api import (
    AlterConfigsRequest,
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ApiKey,
    ApiVersionsRequest,
    CreateAclsRequest,
    CreateAclsResponse,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    FetchPartition,
    FetchPartitionData,
    FetchRequest,
    FetchResponse,
    FetchTopic,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopic,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    MetadataRequest,
    MetadataResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse,
    ProducePartitionData,
    ProduceRequest,
    ProduceResponse,
    ProduceTopicData,
    Request,
    Response,
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from wire.kafka import batch_rules
from wire.kafka.codec import plain
from wire.kafka.versions import ADVERTISED

Fields = dict[str, object]
_CONSUMER = -1


@dataclasses.dataclass(frozen=True)
class Translation:
    to_keel: Callable[[Any, int], Request]
    to_kafka: Callable[[Any, Response], Fields]


def _timeout_ms(value: object) -> int:
    """kio gives Kafka's millisecond durations as timedeltas."""
    seconds = getattr(value, "total_seconds", None)
    return int(seconds() * 1000) if seconds is not None else int(value)  # type: ignore[call-overload]


# --- ApiVersions (18): answered from the listener's table, not the handler's ---


def api_versions_fields(error_code: int = 0) -> Fields:
    return {
        "error_code": error_code,
        "api_keys": [
            {"api_key": int(key), "min_version": low, "max_version": high}
            for key, (low, high) in sorted(ADVERTISED.items())
        ],
        "throttle_time": 0,
    }


def _api_versions_to_keel(body: Any, version: int) -> Request:
    return ApiVersionsRequest()


def _api_versions_to_kafka(body: Any, answer: Response) -> Fields:
    return api_versions_fields()


# --- Metadata (3) ---


def _metadata_to_keel(body: Any, version: int) -> Request:
    topics = body.topics
    if topics is None or (version == 0 and not topics):  # v0 asks for every topic with []
        return MetadataRequest(topics=None)
    # Before v4 a request could not say, and Kafka creates the topics.
    allow = getattr(body, "allow_auto_topic_creation", True)
    return MetadataRequest(topics=[t.name for t in topics], allow_auto_topic_creation=allow)


def _metadata_to_kafka(body: Any, answer: Response) -> Fields:
    if not isinstance(answer, MetadataResponse):
        named = [t.name for t in body.topics or ()]
        return {"throttle_time": 0, "brokers": [], "topics": [_topic_error(n, answer) for n in named]}
    return {
        "throttle_time": 0,
        "brokers": [
            {"node_id": b.broker_id, "host": b.host, "port": b.port, "rack": b.rack} for b in answer.brokers
        ],
        "cluster_id": answer.cluster_id or None,
        "controller_id": answer.controller_id,
        "topics": [
            {
                "error_code": t.error_code,
                "name": t.name,
                "partitions": [
                    {
                        "error_code": p.error_code,
                        "partition_index": p.partition,
                        "leader_id": p.leader,
                        "leader_epoch": p.leader_epoch,
                        "replica_nodes": p.replicas,
                        "isr_nodes": p.isr,
                        "offline_replicas": p.offline_replicas,
                    }
                    for p in t.partitions
                ],
            }
            for t in answer.topics
        ],
    }


def _topic_error(name: str, answer: Response) -> Fields:
    return {"error_code": answer.error_code, "name": name, "partitions": []}


# --- Produce (0) ---


def _produce_to_keel(body: Any, version: int) -> Request:
    """The partitions `batch_rules` does not refuse at this version; the refused are answered
    by `_produce_to_kafka`."""
    topics = []
    for t in body.topic_data:
        partitions = [
            ProducePartitionData(index=p.index, records=data)
            for p in t.partition_data
            if batch_rules.produce_refusal(data := bytes(p.records or b""), version) is None
        ]
        if partitions:
            topics.append(ProduceTopicData(name=t.name, partition_data=partitions))
    return ProduceRequest(acks=body.acks, timeout_ms=_timeout_ms(body.timeout), topic_data=topics)


def _produce_refused(body: Any) -> dict[str, list[Fields]]:
    """By topic, the answers of the partitions `_produce_to_keel` left out."""
    refused: dict[str, list[Fields]] = {}
    for t in body.topic_data:
        for p in t.partition_data:
            refusal = batch_rules.produce_refusal(p.records or b"", body.__version__)
            if refusal is not None:
                refused.setdefault(t.name, []).append(_produce_partition(p.index, *refusal))
    return refused


def _produce_to_kafka(body: Any, answer: Response) -> Fields:
    if not isinstance(answer, ProduceResponse):
        return {
            "throttle_time": 0,
            "responses": [
                {
                    "name": t.name,
                    "partition_responses": [
                        _produce_partition(p.index, answer.error_code, answer.error_message)
                        for p in t.partition_data
                    ],
                }
                for t in body.topic_data
            ],
        }
    refused = _produce_refused(body)
    responses: list[Fields] = [
        {
            "name": t.name,
            "partition_responses": [
                {
                    **_produce_partition(p.index, p.error_code, p.error_message),
                    "base_offset": p.base_offset,
                    "log_start_offset": p.log_start_offset,
                }
                for p in t.partition_responses
            ]
            + refused.pop(t.name, []),
        }
        for t in answer.responses
    ]
    responses += [{"name": name, "partition_responses": partitions} for name, partitions in refused.items()]
    return {"throttle_time": 0, "responses": responses}


def _produce_partition(index: int, error_code: int, message: str | None) -> Fields:
    return {
        "index": index,
        "error_code": error_code,
        "base_offset": -1,
        "log_start_offset": -1,
        "record_errors": [],
        "error_message": message,
    }


# --- Fetch (1): always without a fetch session (session id 0, which Kafka allows) ---


def _fetch_to_keel(body: Any, version: int) -> Request:
    return FetchRequest(
        replica_id=_CONSUMER,
        max_wait_ms=_timeout_ms(body.max_wait),
        min_bytes=body.min_bytes,
        max_bytes=getattr(body, "max_bytes", FetchRequest.max_bytes),
        topics=[
            FetchTopic(
                topic=t.topic,
                partitions=[
                    FetchPartition(
                        partition=p.partition,
                        fetch_offset=p.fetch_offset,
                        current_leader_epoch=getattr(p, "current_leader_epoch", -1),
                        partition_max_bytes=p.partition_max_bytes,
                    )
                    for p in t.partitions
                ],
            )
            for t in body.topics
        ],
    )


def _fetch_to_kafka(body: Any, answer: Response) -> Fields:
    if not isinstance(answer, FetchResponse):
        return {
            "throttle_time": 0,
            "error_code": answer.error_code,
            "session_id": 0,
            "responses": [
                {
                    "topic": t.topic,
                    "partitions": [_fetch_partition(p.partition, answer.error_code) for p in t.partitions],
                }
                for t in body.topics
            ],
        }
    return {
        "throttle_time": 0,
        "error_code": answer.error_code,
        "session_id": 0,
        "responses": [
            {
                "topic": t.topic,
                "partitions": [_fetched(p, body.__version__) for p in t.partitions],
            }
            for t in answer.responses
        ],
    }


def _fetched(p: FetchPartitionData, version: int) -> Fields:
    refusal = batch_rules.fetch_refusal(p.records, version)
    if refusal is not None:
        return _fetch_partition(p.partition_index, refusal)
    return {
        **_fetch_partition(p.partition_index, p.error_code),
        "high_watermark": p.high_watermark,
        # No transactions: everything below the high watermark is stable.
        "last_stable_offset": p.high_watermark,
        "log_start_offset": p.log_start_offset,
        "records": p.records,
    }


def _fetch_partition(index: int, error_code: int) -> Fields:
    return {
        "partition_index": index,
        "error_code": error_code,
        "high_watermark": -1,
        "last_stable_offset": -1,
        "log_start_offset": -1,
        "aborted_transactions": [],
        "preferred_read_replica": -1,
        "records": b"",
    }


# --- ListOffsets (2) ---


def _list_offsets_to_keel(body: Any, version: int) -> Request:
    return ListOffsetsRequest(
        replica_id=_CONSUMER,
        topics=[
            ListOffsetsTopic(
                name=t.name,
                partitions=[
                    ListOffsetsPartition(
                        partition_index=p.partition_index,
                        current_leader_epoch=getattr(p, "current_leader_epoch", -1),
                        timestamp=p.timestamp,
                    )
                    for p in t.partitions
                ],
            )
            for t in body.topics
        ],
    )


def _list_offsets_to_kafka(body: Any, answer: Response) -> Fields:
    if not isinstance(answer, ListOffsetsResponse):
        return {
            "throttle_time": 0,
            "topics": [
                {
                    "name": t.name,
                    "partitions": [
                        {
                            "partition_index": p.partition_index,
                            "error_code": answer.error_code,
                            "timestamp": -1,
                            "offset": -1,
                        }
                        for p in t.partitions
                    ],
                }
                for t in body.topics
            ],
        }
    return {
        "throttle_time": 0,
        "topics": [
            {
                "name": t.name,
                "partitions": [
                    {
                        "partition_index": p.partition_index,
                        "error_code": p.error_code,
                        "timestamp": p.timestamp,
                        "offset": p.offset,
                        "leader_epoch": p.leader_epoch,
                    }
                    for p in t.partitions
                ],
            }
            for t in answer.topics
        ],
    }


# --- the rest: the same fields under the same names ---


def renamed(
    request: type[Request],
    response: type[Response],
    *,
    adjust: Callable[[Fields], Fields] | None = None,
    refused: Callable[[Any, Response], Fields] | None = None,
) -> Translation:
    """A translation by field names: `adjust` reshapes the request's plain fields where Keel's
    struct differs; `refused` puts an error alone on what the request named (by default the
    response's own top-level error code)."""

    def to_keel(body: Any, version: int) -> Request:
        fields = plain(body)
        assert isinstance(fields, dict)
        return request.from_wire(adjust(fields) if adjust is not None else fields)

    def to_kafka(body: Any, answer: Response) -> Fields:
        if isinstance(answer, response):
            return {"throttle_time": 0, **answer.to_wire()}
        if refused is not None:
            return {"throttle_time": 0, **refused(body, answer)}
        return {"throttle_time": 0, "error_code": answer.error_code, "error_message": answer.error_message}

    return Translation(to_keel, to_kafka)


def _error(answer: Response, **named: object) -> Fields:
    return {**named, "error_code": answer.error_code, "error_message": answer.error_message}


def _create_topics_fields(fields: Fields) -> Fields:
    """Kafka's topic configs are a list of name and value; its assignments name the partition
    `partition_index`."""
    topics = fields["topics"]
    assert isinstance(topics, list)
    for topic in topics:
        topic["configs"] = {c["name"]: c["value"] for c in topic["configs"] if c["value"] is not None}
        for assignment in topic["assignments"]:
            assignment["partition"] = assignment.pop("partition_index")
    return fields


def _as_consumer(fields: Fields) -> Fields:
    return {**fields, "replica_id": _CONSUMER}


# --- the consumer-group APIs (wire/api/groups.py) ---


def _join_group_to_keel(body: Any, version: int) -> Request:
    fields = plain(body)
    assert isinstance(fields, dict)
    fields["require_known_member_id"] = version >= 4 and fields.get("group_instance_id") is None
    return JoinGroupRequest.from_wire(fields)


def _bare(response: type[Response]) -> Callable[[Any, Response], Fields]:
    """An error alone, as a whole answer of that API with its defaults beside it."""

    def refused(body: Any, answer: Response) -> Fields:
        return response(error_code=answer.error_code, error_message=answer.error_message).to_wire()

    return refused


def _offset_commit_refused(body: Any, answer: Response) -> Fields:
    return {
        "topics": [
            {
                "name": t.name,
                "partitions": [
                    {"partition_index": p.partition_index, "error_code": answer.error_code}
                    for p in t.partitions
                ],
            }
            for t in body.topics
        ]
    }


def _offset_fetch_to_kafka(body: Any, answer: Response) -> Fields:
    """Before version 2 the answer has no error of its own: the partitions named carry it."""
    fields = _offset_fetch.to_kafka(body, answer)
    if answer.error_code and type(body).__version__ < 2:
        fields["topics"] = [
            {
                "name": t.name,
                "partitions": [
                    {
                        "partition_index": p,
                        "committed_offset": -1,
                        "metadata": "",
                        "error_code": answer.error_code,
                    }
                    for p in t.partition_indexes
                ],
            }
            for t in body.topics or ()
        ]
    return fields


_offset_fetch = renamed(OffsetFetchRequest, OffsetFetchResponse, refused=_bare(OffsetFetchResponse))


TRANSLATIONS: dict[int, Translation] = {
    ApiKey.API_VERSIONS: Translation(_api_versions_to_keel, _api_versions_to_kafka),
    ApiKey.METADATA: Translation(_metadata_to_keel, _metadata_to_kafka),
    ApiKey.PRODUCE: Translation(_produce_to_keel, _produce_to_kafka),
    ApiKey.FETCH: Translation(_fetch_to_keel, _fetch_to_kafka),
    ApiKey.LIST_OFFSETS: Translation(_list_offsets_to_keel, _list_offsets_to_kafka),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: renamed(
        OffsetsForLeaderEpochRequest,
        OffsetsForLeaderEpochResponse,
        adjust=_as_consumer,
        refused=lambda body, answer: {
            "topics": [
                {
                    "topic": t.topic,
                    "partitions": [_error(answer, partition=p.partition) for p in t.partitions],
                }
                for t in body.topics
            ]
        },
    ),
    ApiKey.CREATE_TOPICS: renamed(
        CreateTopicsRequest,
        CreateTopicsResponse,
        adjust=_create_topics_fields,
        refused=lambda body, answer: {"topics": [_error(answer, name=t.name) for t in body.topics]},
    ),
    ApiKey.DELETE_TOPICS: renamed(
        DeleteTopicsRequest,
        DeleteTopicsResponse,
        refused=lambda body, answer: {"responses": [_error(answer, name=n) for n in body.topic_names]},
    ),
    ApiKey.CREATE_PARTITIONS: renamed(
        CreatePartitionsRequest,
        CreatePartitionsResponse,
        refused=lambda body, answer: {"results": [_error(answer, name=t.name) for t in body.topics]},
    ),
    ApiKey.DESCRIBE_CONFIGS: renamed(
        DescribeConfigsRequest,
        DescribeConfigsResponse,
        refused=lambda body, answer: {
            "results": [
                _error(answer, resource_type=r.resource_type, resource_name=r.resource_name, configs=[])
                for r in body.resources
            ]
        },
    ),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: renamed(
        IncrementalAlterConfigsRequest,
        IncrementalAlterConfigsResponse,
        refused=lambda body, answer: {
            "responses": [
                _error(answer, resource_type=r.resource_type, resource_name=r.resource_name)
                for r in body.resources
            ]
        },
    ),
    ApiKey.ALTER_CONFIGS: renamed(
        AlterConfigsRequest,
        IncrementalAlterConfigsResponse,
        refused=lambda body, answer: {
            "responses": [
                _error(answer, resource_type=r.resource_type, resource_name=r.resource_name)
                for r in body.resources
            ]
        },
    ),
    ApiKey.DESCRIBE_CLUSTER: renamed(DescribeClusterRequest, DescribeClusterResponse),
    ApiKey.DESCRIBE_LOG_DIRS: renamed(DescribeLogDirsRequest, DescribeLogDirsResponse),
    ApiKey.ELECT_LEADERS: renamed(ElectLeadersRequest, ElectLeadersResponse),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: renamed(
        AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse
    ),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: renamed(
        ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse
    ),
    ApiKey.INIT_PRODUCER_ID: renamed(InitProducerIdRequest, InitProducerIdResponse),
    ApiKey.SASL_HANDSHAKE: renamed(SaslHandshakeRequest, SaslHandshakeResponse),
    ApiKey.SASL_AUTHENTICATE: renamed(SaslAuthenticateRequest, SaslAuthenticateResponse),
    ApiKey.FIND_COORDINATOR: renamed(
        FindCoordinatorRequest, FindCoordinatorResponse, refused=_bare(FindCoordinatorResponse)
    ),
    ApiKey.JOIN_GROUP: Translation(
        _join_group_to_keel,
        renamed(JoinGroupRequest, JoinGroupResponse, refused=_bare(JoinGroupResponse)).to_kafka,
    ),
    ApiKey.SYNC_GROUP: renamed(SyncGroupRequest, SyncGroupResponse, refused=_bare(SyncGroupResponse)),
    ApiKey.HEARTBEAT: renamed(HeartbeatRequest, HeartbeatResponse),
    ApiKey.LEAVE_GROUP: renamed(LeaveGroupRequest, LeaveGroupResponse),
    ApiKey.OFFSET_COMMIT: renamed(OffsetCommitRequest, OffsetCommitResponse, refused=_offset_commit_refused),
    ApiKey.OFFSET_FETCH: Translation(_offset_fetch.to_keel, _offset_fetch_to_kafka),
    ApiKey.LIST_GROUPS: renamed(ListGroupsRequest, ListGroupsResponse),
    ApiKey.DESCRIBE_GROUPS: renamed(
        DescribeGroupsRequest,
        DescribeGroupsResponse,
        refused=lambda body, answer: {
            "groups": [
                _error(answer, group_id=g, group_state="", protocol_type="", protocol_data="")
                for g in body.groups
            ]
        },
    ),
    ApiKey.DELETE_GROUPS: renamed(
        DeleteGroupsRequest,
        DeleteGroupsResponse,
        refused=lambda body, answer: {"results": [_error(answer, group_id=g) for g in body.groups_names]},
    ),
    ApiKey.OFFSET_DELETE: renamed(OffsetDeleteRequest, OffsetDeleteResponse),
    ApiKey.DESCRIBE_ACLS: renamed(DescribeAclsRequest, DescribeAclsResponse),
    ApiKey.DELETE_RECORDS: renamed(
        DeleteRecordsRequest,
        DeleteRecordsResponse,
        refused=lambda body, answer: {
            "topics": [
                {
                    "name": t.name,
                    "partitions": [
                        {
                            "partition_index": p.partition_index,
                            "low_watermark": -1,
                            "error_code": answer.error_code,
                        }
                        for p in t.partitions
                    ],
                }
                for t in body.topics
            ]
        },
    ),
    ApiKey.CREATE_ACLS: renamed(
        CreateAclsRequest,
        CreateAclsResponse,
        refused=lambda body, answer: {"results": [_error(answer) for _ in body.creations]},
    ),
    ApiKey.DELETE_ACLS: renamed(
        DeleteAclsRequest,
        DeleteAclsResponse,
        refused=lambda body, answer: {
            "filter_results": [_error(answer, matching_acls=[]) for _ in body.filters]
        },
    ),
}
