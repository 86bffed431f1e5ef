"""What each API needs (actors/security/api_authorization.py): whole requests refused with 31, topics
split off with 29, against a real AclAuthorizer holding a few ACLs."""

from __future__ import annotations

import pytest

from actors.security import api_authorization as authz
from actors.security.acl import (
    CLUSTER_NAME,
    AclEntry,
    AclOperation,
    AclPermissionType,
    ResourcePattern,
    ResourceType,
)
from actors.security.api_authorization import CLUSTER_OPERATIONS, Check
from actors.security.authorizer import AclAuthorizer, AuthorizerConfig
from wire.api import (
    ApiKey,
    CreatableTopic,
    CreatePartitionsRequest,
    CreatePartitionsTopic,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    ElectLeadersRequest,
    ElectLeadersTopicPartitions,
    FetchPartition,
    FetchRequest,
    FetchTopic,
    ListOffsetsRequest,
    ListOffsetsTopic,
    MetadataResponse,
    MetadataTopic,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
    OffsetsForLeaderEpochRequest,
    ProducePartitionData,
    ProduceRequest,
    ProduceTopicData,
)
from wire.api.describe_configs import DescribeConfigsRequest, DescribeConfigsResource
from wire.api.incremental_alter_configs import (
    BROKER_RESOURCE,
    TOPIC_RESOURCE,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from wire.context import RequestContext
from wire.errors import ClusterAuthorizationFailed

Op = AclOperation
ALICE = RequestContext(principal="User:alice", client_host="10.0.0.1")


def check_for(*grants: tuple[ResourceType, str, AclOperation]) -> Check:
    authorizer = AclAuthorizer(AuthorizerConfig())
    for kind, name, operation in grants:
        pattern = ResourcePattern(kind, name)
        entry = AclEntry("User:alice", "*", operation, AclPermissionType.ALLOW)
        authorizer.set_acls(pattern, authorizer.acls(pattern) | {entry})
    return lambda op, kind, name: authorizer.authorize(ALICE, op, kind, name)


def topic(name: str, operation: AclOperation) -> tuple[ResourceType, str, AclOperation]:
    return ResourceType.TOPIC, name, operation


def cluster(operation: AclOperation) -> tuple[ResourceType, str, AclOperation]:
    return ResourceType.CLUSTER, CLUSTER_NAME, operation


@pytest.mark.parametrize(
    ("api", "operation"),
    [
        (ApiKey.LEADER_AND_ISR, Op.CLUSTER_ACTION),
        (ApiKey.STOP_REPLICA, Op.CLUSTER_ACTION),
        (ApiKey.UPDATE_METADATA, Op.CLUSTER_ACTION),
        (ApiKey.CONTROLLED_SHUTDOWN, Op.CLUSTER_ACTION),
        (ApiKey.ALTER_PARTITION, Op.CLUSTER_ACTION),
        (ApiKey.ALTER_PARTITION_REASSIGNMENTS, Op.ALTER),
        (ApiKey.REELECT_CONTROLLER, Op.ALTER),
        (ApiKey.LIST_PARTITION_REASSIGNMENTS, Op.DESCRIBE),
        (ApiKey.DESCRIBE_LOG_DIRS, Op.DESCRIBE),
        (ApiKey.DESCRIBE_CONTROLLER, Op.DESCRIBE),
    ],
)
def test_cluster_apis_need_their_operation_on_the_cluster(api: ApiKey, operation: AclOperation) -> None:
    assert CLUSTER_OPERATIONS[api] is operation
    with pytest.raises(ClusterAuthorizationFailed):
        authz.require_cluster(check_for(topic("*", Op.ALL)), operation, api.name)
    authz.require_cluster(check_for(cluster(operation)), operation, api.name)


def test_produce_keeps_the_writable_topics_and_refuses_the_rest() -> None:
    data = [ProducePartitionData(index=i, records=b"") for i in (0, 1)]
    request = ProduceRequest(
        topic_data=[ProduceTopicData(name=t, partition_data=data) for t in ("orders", "payments")]
    )
    kept, refused = authz.produce(check_for(topic("orders", Op.WRITE)), request)
    assert [t.name for t in kept.topic_data] == ["orders"]
    assert [(r.name, [(p.index, p.error_code) for p in r.partition_responses]) for r in refused] == [
        ("payments", [(0, 29), (1, 29)])
    ]
    _, refused = authz.produce(check_for(topic("orders", Op.READ)), request)
    assert len(refused) == 2  # Read is not Write


def test_a_follower_fetch_needs_cluster_action_a_consumer_read() -> None:
    topics = [FetchTopic(topic="orders", partitions=[FetchPartition(partition=0, fetch_offset=0)])]
    follower, consumer = FetchRequest(replica_id=2, topics=topics), FetchRequest(topics=topics)
    reader = check_for(topic("orders", Op.READ))
    # Refused whole, before any fetch session is opened, reset or continued: naming no topic
    # (an incremental fetch of someone else's session) included.
    for claimed in (follower, FetchRequest(replica_id=2, session_id=7, session_epoch=3, topics=[])):
        with pytest.raises(ClusterAuthorizationFailed):
            authz.fetch(reader, claimed)
    assert authz.fetch(reader, consumer) == (consumer, [])
    assert authz.fetch(check_for(cluster(Op.CLUSTER_ACTION)), follower) == (follower, [])


def test_offsets_for_leader_epoch_needs_cluster_action_or_describe_from_anyone() -> None:
    """Kafka's handleOffsetForLeaderEpochRequest: ClusterAction, else Describe per topic, for a
    replica as for a consumer."""
    topics = [
        OffsetForLeaderTopic(topic=name, partitions=[OffsetForLeaderPartition(partition=0, leader_epoch=1)])
        for name in ("orders", "secret")
    ]
    describer = check_for(topic("orders", Op.DESCRIBE))
    for request in (
        OffsetsForLeaderEpochRequest(replica_id=2, topics=topics),
        OffsetsForLeaderEpochRequest(topics=topics),
    ):
        kept, refused = authz.offsets_for_leader_epoch(describer, request)
        assert [t.topic for t in kept.topics] == ["orders"]
        assert [(t.topic, t.partitions[0].error_code) for t in refused] == [("secret", 29)]
        assert authz.offsets_for_leader_epoch(check_for(cluster(Op.CLUSTER_ACTION)), request) == (request, [])


def test_elect_leaders_is_refused_per_named_partition_as_kafka_does() -> None:
    named = ElectLeadersRequest(
        topic_partitions=[ElectLeadersTopicPartitions(topic="orders", partitions=[0, 2])]
    )
    refused = authz.elect_leaders(check_for(cluster(Op.DESCRIBE)), named)
    assert refused is not None and refused.error_code == 31
    assert [
        (r.topic, [(p.partition_id, p.error_code) for p in r.partition_result])
        for r in refused.replica_election_results
    ] == [("orders", [(0, 31), (2, 31)])]
    every = authz.elect_leaders(check_for(), ElectLeadersRequest(topic_partitions=None))
    assert every is not None and (every.error_code, every.replica_election_results) == (31, [])
    assert authz.elect_leaders(check_for(cluster(Op.ALTER)), named) is None


def test_list_offsets_and_metadata_need_describe_which_read_implies() -> None:
    check = check_for(topic("orders", Op.READ))
    request = ListOffsetsRequest(topics=[ListOffsetsTopic(name=n) for n in ("orders", "secret")])
    kept, refused = authz.list_offsets(check, request)
    assert [t.name for t in kept.topics] == ["orders"] and [t.name for t in refused] == ["secret"]
    names, refused_topics = authz.metadata_topics(check, ["orders", "secret", "secret"])
    assert names == ["orders"]
    assert [(t.name, t.error_code, t.partitions) for t in refused_topics] == [("secret", 29, [])]
    every = MetadataResponse(topics=[MetadataTopic(error_code=0, name=n) for n in ("orders", "secret")])
    assert [t.name for t in authz.metadata_of_every_topic(check, every).topics] == ["orders"]


def test_create_topics_needs_create_on_the_cluster_or_the_topic() -> None:
    request = CreateTopicsRequest(topics=[CreatableTopic(name=n) for n in ("orders", "other")])
    assert authz.create_topics(check_for(cluster(Op.CREATE)), request) == (request, [])
    kept, refused = authz.create_topics(check_for(topic("orders", Op.CREATE)), request)
    assert [t.name for t in kept.topics] == ["orders"]
    assert [(r.name, r.error_code) for r in refused] == [("other", 29)]


def test_delete_topics_and_create_partitions() -> None:
    check = check_for(topic("orders", Op.DELETE), topic("payments", Op.ALTER))
    kept, refused = authz.delete_topics(check, DeleteTopicsRequest(topic_names=["orders", "payments"]))
    assert kept.topic_names == ["orders"] and [r.name for r in refused] == ["payments"]
    request = CreatePartitionsRequest(
        topics=[CreatePartitionsTopic(name=n, count=3) for n in ("orders", "payments")]
    )
    grown, refused_grow = authz.create_partitions(check, request)
    assert [t.name for t in grown.topics] == ["payments"] and [r.name for r in refused_grow] == ["orders"]


def test_configs_of_a_topic_and_of_a_broker() -> None:
    check = check_for(topic("orders", Op.ALTER_CONFIGS))
    resources = [
        AlterConfigsResource(resource_type=TOPIC_RESOURCE, resource_name="orders"),
        AlterConfigsResource(resource_type=TOPIC_RESOURCE, resource_name="payments"),
        AlterConfigsResource(resource_type=BROKER_RESOURCE, resource_name="1"),
    ]
    kept, refused = authz.incremental_alter_configs(
        check, IncrementalAlterConfigsRequest(resources=resources)
    )
    assert [r.resource_name for r in kept.resources] == ["orders"]
    assert [(r.resource_name, r.error_code) for r in refused] == [("payments", 29), ("1", 31)]
    described = DescribeConfigsRequest(
        resources=[
            DescribeConfigsResource(resource_type=t, resource_name=n) for t, n in ((2, "orders"), (4, "1"))
        ]
    )
    kept_described, refused_described = authz.describe_configs(check, described)
    assert [r.resource_name for r in kept_described.resources] == ["orders"]  # AlterConfigs implies Describe
    assert [(r.resource_name, r.error_code) for r in refused_described] == [("1", 31)]
