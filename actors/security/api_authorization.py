"""What each API must be allowed before it runs, as Kafka's KafkaApis checks it.

A whole-request check raises ClusterAuthorizationFailed (31): the request is refused before
anything reads or changes state. A per-topic check splits a request in two: the part the
caller may do, handed on, and the answers for the rest, each TOPIC_AUTHORIZATION_FAILED (29),
added to the response afterwards. `check(operation, resource_type, name)` is the authorizer
bound to the request's context.

What each API needs:
- LeaderAndIsr, StopReplica, UpdateMetadata, ControlledShutdown, AlterPartition: Cluster
  ClusterAction.
- Fetch: from a replica (replica_id >= 0) Cluster ClusterAction, else the whole request is
  refused; from a consumer Topic Read.
- OffsetsForLeaderEpoch: Cluster ClusterAction, else Topic Describe per topic (KIP-320: consumers
  use it too; Kafka asks the same of a replica, whose answers reveal no records).
- ListOffsets, Metadata: Topic Describe (Metadata of every topic lists only those).
- Produce: Topic Write. CreateTopics: Cluster Create, else Topic Create. DeleteTopics: Topic
  Describe and Delete. CreatePartitions: Topic Alter.
- IncrementalAlterConfigs, DescribeConfigs: AlterConfigs, DescribeConfigs on the topic, or on
  the cluster for a broker's configs (31 for that resource).
- AlterPartitionReassignments, ReelectController: Cluster Alter. ElectLeaders: Cluster Alter,
  refused at the top level and, as Kafka's, for each partition the request names.
- ListPartitionReassignments, DescribeLogDirs, DescribeController, DescribePlanner: Cluster
  Describe.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from actors.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from wire.api import (
    ApiKey,
    CreatableTopicResult,
    CreatePartitionsRequest,
    CreatePartitionsTopicResult,
    CreateTopicsRequest,
    DeletableTopicResult,
    DeleteRecordsPartitionResult,
    DeleteRecordsRequest,
    DeleteRecordsTopicResult,
    DeleteTopicsRequest,
    ElectLeadersRequest,
    ElectLeadersResponse,
    EpochEndOffset,
    FetchableTopicResponse,
    FetchPartitionData,
    FetchRequest,
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsTopicResponse,
    MetadataResponse,
    MetadataTopic,
    OffsetForLeaderTopicResult,
    OffsetsForLeaderEpochRequest,
    PartitionElectionResult,
    ProducePartitionResponse,
    ProduceRequest,
    ProduceTopicResponse,
    ReplicaElectionResult,
)
from wire.api.describe_configs import DescribeConfigsRequest, DescribeConfigsResult
from wire.api.incremental_alter_configs import (
    BROKER_RESOURCE,
    TOPIC_RESOURCE,
    AlterConfigsResourceResponse,
    IncrementalAlterConfigsRequest,
)
from wire.errors import ClusterAuthorizationFailed, ErrorCode

Check = Callable[[AclOperation, ResourceType, str], bool]

TOPIC_REFUSED = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
CLUSTER_REFUSED = int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
_O = AclOperation

# The APIs refused whole (CLUSTER_AUTHORIZATION_FAILED) unless the caller may do this on the
# cluster. ElectLeaders is refused by `elect_leaders`, which answers per partition.
CLUSTER_OPERATIONS: dict[ApiKey, AclOperation] = {
    ApiKey.LEADER_AND_ISR: _O.CLUSTER_ACTION,
    ApiKey.STOP_REPLICA: _O.CLUSTER_ACTION,
    ApiKey.UPDATE_METADATA: _O.CLUSTER_ACTION,
    ApiKey.CONTROLLED_SHUTDOWN: _O.CLUSTER_ACTION,
    ApiKey.ALTER_PARTITION: _O.CLUSTER_ACTION,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: _O.ALTER,
    ApiKey.REELECT_CONTROLLER: _O.ALTER,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: _O.DESCRIBE,
    ApiKey.DESCRIBE_LOG_DIRS: _O.DESCRIBE,
    ApiKey.DESCRIBE_CONTROLLER: _O.DESCRIBE,
    ApiKey.DESCRIBE_PLANNER: _O.DESCRIBE,
    # An idempotent producer's id (Kafka before KIP-679's Write on any topic).
    ApiKey.INIT_PRODUCER_ID: _O.IDEMPOTENT_WRITE,
    ApiKey.DESCRIBE_ACLS: _O.DESCRIBE,
    ApiKey.CREATE_ACLS: _O.ALTER,
    ApiKey.DELETE_ACLS: _O.ALTER,
}


def cluster_allowed(check: Check, operation: AclOperation) -> bool:
    return check(operation, ResourceType.CLUSTER, CLUSTER_NAME)


def require_cluster(check: Check, operation: AclOperation, api: str) -> None:
    """Refuse the whole request unless the caller may do `operation` on the cluster."""
    if not cluster_allowed(check, operation):
        raise ClusterAuthorizationFailed(f"{api} needs {operation} on the cluster")


# The most topics (or config resources) one request from a client may name: Keel's own bound
# (Kafka has none). A request naming a million is refused whole, before any name is
# authorized or looked up; a controller's and a leader's requests (ClusterAction) are not
# held to it.
MAX_TOPICS_PER_REQUEST = 10_000
_NAMING_FIELDS = ("topics", "topic_data", "topic_names", "resources", "topic_partitions")


def named_topics(body: object) -> int:
    """How many topics (or resources) a request names, over its lists of them."""
    return sum(len(v) for f in _NAMING_FIELDS if isinstance(v := getattr(body, f, None), list))


def _topics(check: Check, operation: AclOperation) -> Callable[[str], bool]:
    """A per-name check that asks the authorizer once per topic name."""
    answers: dict[str, bool] = {}

    def allowed(name: str) -> bool:
        if name not in answers:
            answers[name] = check(operation, ResourceType.TOPIC, name)
        return answers[name]

    return allowed


def produce(check: Check, request: ProduceRequest) -> tuple[ProduceRequest, list[ProduceTopicResponse]]:
    allowed = _topics(check, _O.WRITE)
    refused = [
        ProduceTopicResponse(
            name=t.name,
            partition_responses=[
                ProducePartitionResponse(index=p.index, error_code=TOPIC_REFUSED) for p in t.partition_data
            ],
        )
        for t in request.topic_data
        if not allowed(t.name)
    ]
    kept = [t for t in request.topic_data if allowed(t.name)]
    return dataclasses.replace(request, topic_data=kept), refused


def fetch(check: Check, request: FetchRequest) -> tuple[FetchRequest, list[FetchableTopicResponse]]:
    """A follower needs ClusterAction (claiming to be replica N is a privilege: CVE-2018-1288):
    without it the whole request is refused, before the fetch session code sees it (a
    follower's Fetch naming no topic still opens, resets or continues replica N's session,
    which then answers that session's partitions). A consumer needs Read per topic."""
    if request.replica_id >= 0:
        require_cluster(check, _O.CLUSTER_ACTION, "a follower's Fetch")
        return request, []
    allowed = _topics(check, _O.READ)
    refused = [
        FetchableTopicResponse(
            topic=t.topic,
            partitions=[
                FetchPartitionData(partition_index=p.partition, error_code=TOPIC_REFUSED)
                for p in t.partitions
            ],
        )
        for t in request.topics
        if not allowed(t.topic)
    ]
    kept = [t for t in request.topics if allowed(t.topic)]
    return dataclasses.replace(request, topics=kept), refused


def list_offsets(
    check: Check, request: ListOffsetsRequest
) -> tuple[ListOffsetsRequest, list[ListOffsetsTopicResponse]]:
    allowed = _topics(check, _O.DESCRIBE)
    refused = [
        ListOffsetsTopicResponse(
            name=t.name,
            partitions=[
                ListOffsetsPartitionResponse(partition_index=p.partition_index, error_code=TOPIC_REFUSED)
                for p in t.partitions
            ],
        )
        for t in request.topics
        if not allowed(t.name)
    ]
    kept = [t for t in request.topics if allowed(t.name)]
    return dataclasses.replace(request, topics=kept), refused


def offsets_for_leader_epoch(
    check: Check, request: OffsetsForLeaderEpochRequest
) -> tuple[OffsetsForLeaderEpochRequest, list[OffsetForLeaderTopicResult]]:
    """ClusterAction covers every topic; without it each topic needs Describe, whoever asks
    (Kafka's rule: unlike a follower's Fetch, the answer is only end offsets)."""
    if cluster_allowed(check, _O.CLUSTER_ACTION):
        return request, []
    allowed = _topics(check, _O.DESCRIBE)
    refused = [
        OffsetForLeaderTopicResult(
            topic=t.topic,
            partitions=[
                EpochEndOffset(partition=p.partition, error_code=TOPIC_REFUSED) for p in t.partitions
            ],
        )
        for t in request.topics
        if not allowed(t.topic)
    ]
    kept = [t for t in request.topics if allowed(t.topic)]
    return dataclasses.replace(request, topics=kept), refused


def elect_leaders(check: Check, request: ElectLeadersRequest) -> ElectLeadersResponse | None:
    """None when the caller may Alter the cluster; else Kafka's refusal: 31 at the top level
    and for each partition the request names (none when it names every partition)."""
    if cluster_allowed(check, _O.ALTER):
        return None
    return ElectLeadersResponse(
        error_code=CLUSTER_REFUSED,
        error_message="ElectLeaders needs Alter on the cluster",
        replica_election_results=[
            ReplicaElectionResult(
                topic=t.topic,
                partition_result=[
                    PartitionElectionResult(partition_id=p, error_code=CLUSTER_REFUSED) for p in t.partitions
                ],
            )
            for t in request.topic_partitions or []
        ],
    )


def metadata_topics(check: Check, topics: list[str]) -> tuple[list[str], list[MetadataTopic]]:
    """Topics named in a Metadata request: the ones the caller may describe, and an answer
    for each other one that says nothing of whether it exists."""
    allowed = _topics(check, _O.DESCRIBE)
    refused = [
        MetadataTopic(error_code=TOPIC_REFUSED, name=t) for t in dict.fromkeys(topics) if not allowed(t)
    ]
    return [t for t in topics if allowed(t)], refused


def metadata_of_every_topic(check: Check, response: MetadataResponse) -> MetadataResponse:
    """A request for every topic lists only the topics the caller may describe."""
    allowed = _topics(check, _O.DESCRIBE)
    return dataclasses.replace(response, topics=[t for t in response.topics if allowed(t.name)])


def create_topics(
    check: Check, request: CreateTopicsRequest
) -> tuple[CreateTopicsRequest, list[CreatableTopicResult]]:
    if cluster_allowed(check, _O.CREATE):
        return request, []
    allowed = _topics(check, _O.CREATE)
    refused = [
        CreatableTopicResult(name=t.name, error_code=TOPIC_REFUSED, error_message=f"Create on topic {t.name}")
        for t in request.topics
        if not allowed(t.name)
    ]
    kept = [t for t in request.topics if allowed(t.name)]
    return dataclasses.replace(request, topics=kept), refused


def delete_topics(
    check: Check, request: DeleteTopicsRequest
) -> tuple[DeleteTopicsRequest, list[DeletableTopicResult]]:
    describe, delete = _topics(check, _O.DESCRIBE), _topics(check, _O.DELETE)

    def allowed(name: str) -> bool:
        return describe(name) and delete(name)

    refused = [
        DeletableTopicResult(name=t, error_code=TOPIC_REFUSED, error_message=f"Delete on topic {t}")
        for t in request.topic_names
        if not allowed(t)
    ]
    kept = [t for t in request.topic_names if allowed(t)]
    return dataclasses.replace(request, topic_names=kept), refused


def delete_records(
    check: Check, request: DeleteRecordsRequest
) -> tuple[DeleteRecordsRequest, list[DeleteRecordsTopicResult]]:
    """Delete on each topic, as Kafka's; refused ones answered per partition."""
    allowed = _topics(check, _O.DELETE)
    refused = [
        DeleteRecordsTopicResult(
            name=t.name,
            partitions=[
                DeleteRecordsPartitionResult(partition_index=p.partition_index, error_code=TOPIC_REFUSED)
                for p in t.partitions
            ],
        )
        for t in request.topics
        if not allowed(t.name)
    ]
    kept = [t for t in request.topics if allowed(t.name)]
    return dataclasses.replace(request, topics=kept), refused


def create_partitions(
    check: Check, request: CreatePartitionsRequest
) -> tuple[CreatePartitionsRequest, list[CreatePartitionsTopicResult]]:
    allowed = _topics(check, _O.ALTER)
    refused = [
        CreatePartitionsTopicResult(
            name=t.name, error_code=TOPIC_REFUSED, error_message=f"Alter on topic {t.name}"
        )
        for t in request.topics
        if not allowed(t.name)
    ]
    kept = [t for t in request.topics if allowed(t.name)]
    return dataclasses.replace(request, topics=kept), refused


def _config_resource_allowed(check: Check, operation: AclOperation, resource_type: int, name: str) -> int:
    """The error for one config resource: a topic's own ACLs, a broker's the cluster's; a type
    Keel does not know goes on to be refused as INVALID_REQUEST by the handler."""
    if resource_type == TOPIC_RESOURCE and not check(operation, ResourceType.TOPIC, name):
        return TOPIC_REFUSED
    if resource_type == BROKER_RESOURCE and not cluster_allowed(check, operation):
        return CLUSTER_REFUSED
    return 0


def incremental_alter_configs(
    check: Check, request: IncrementalAlterConfigsRequest
) -> tuple[IncrementalAlterConfigsRequest, list[AlterConfigsResourceResponse]]:
    errors = [
        _config_resource_allowed(check, _O.ALTER_CONFIGS, r.resource_type, r.resource_name)
        for r in request.resources
    ]
    refused = [
        AlterConfigsResourceResponse(
            error_code=e,
            error_message="AlterConfigs refused",
            resource_type=r.resource_type,
            resource_name=r.resource_name,
        )
        for r, e in zip(request.resources, errors, strict=True)
        if e
    ]
    kept = [r for r, e in zip(request.resources, errors, strict=True) if not e]
    return dataclasses.replace(request, resources=kept), refused


def describe_configs(
    check: Check, request: DescribeConfigsRequest
) -> tuple[DescribeConfigsRequest, list[DescribeConfigsResult]]:
    errors = [
        _config_resource_allowed(check, _O.DESCRIBE_CONFIGS, r.resource_type, r.resource_name)
        for r in request.resources
    ]
    refused = [
        DescribeConfigsResult(
            error_code=e,
            error_message="DescribeConfigs refused",
            resource_type=r.resource_type,
            resource_name=r.resource_name,
        )
        for r, e in zip(request.resources, errors, strict=True)
        if e
    ]
    kept = [r for r, e in zip(request.resources, errors, strict=True) if not e]
    return dataclasses.replace(request, resources=kept), refused
