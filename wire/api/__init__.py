"""Every API Keel speaks, declared once: key, versions, request and response bodies."""

from wire.api.alter_partition import (
    AlterPartitionItem,
    AlterPartitionRequest,
    AlterPartitionResponse,
    AlterPartitionResult,
    AlterPartitionTopic,
    AlterPartitionTopicResult,
    BrokerState,
)
from wire.api.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ReassignablePartition,
    ReassignablePartitionResponse,
    ReassignableTopic,
    ReassignableTopicResponse,
)
from wire.api.api_versions import ApiVersionRange, ApiVersionsRequest, ApiVersionsResponse
from wire.api.base import ApiSpec, Request, Response
from wire.api.controlled_shutdown import (
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    RemainingPartition,
)
from wire.api.create_partitions import (
    CreatePartitionsAssignment,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopic,
    CreatePartitionsTopicResult,
)
from wire.api.create_topics import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreatableTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
)
from wire.api.delete_topics import DeletableTopicResult, DeleteTopicsRequest, DeleteTopicsResponse
from wire.api.describe_cluster import (
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribedBroker,
)
from wire.api.describe_configs import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
    DescribeConfigsResourceResult,
    DescribeConfigsResponse,
    DescribeConfigsResult,
)
from wire.api.describe_controller import DescribeControllerRequest, DescribeControllerResponse
from wire.api.describe_log_dirs import (
    DescribableLogDirTopic,
    DescribeLogDirsPartition,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    DescribeLogDirsResult,
    DescribeLogDirsTopic,
)
from wire.api.elect_leaders import (
    ElectionType,
    ElectLeadersRequest,
    ElectLeadersResponse,
    ElectLeadersTopicPartitions,
    PartitionElectionResult,
    ReplicaElectionResult,
)
from wire.api.fetch import (
    FetchableTopicResponse,
    FetchPartition,
    FetchPartitionData,
    FetchRequest,
    FetchResponse,
    FetchTopic,
    ForgottenTopic,
)
from wire.api.incremental_alter_configs import (
    AlterableConfig,
    AlterConfigsResource,
    AlterConfigsResourceResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from wire.api.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from wire.api.keys import ApiKey
from wire.api.leader_and_isr import (
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    LiveLeader,
    PartitionError,
)
from wire.api.list_offsets import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    ListOffsetsPartition,
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopic,
    ListOffsetsTopicResponse,
)
from wire.api.list_partition_reassignments import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    ListPartitionReassignmentsTopics,
    OngoingPartitionReassignment,
    OngoingTopicReassignment,
)
from wire.api.metadata import (
    MetadataBroker,
    MetadataPartition,
    MetadataRequest,
    MetadataResponse,
    MetadataTopic,
)
from wire.api.offsets_for_leader_epoch import (
    EpochEndOffset,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
    OffsetForLeaderTopicResult,
    OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse,
)
from wire.api.planner import (
    CancelPlanRequest,
    CancelPlanResponse,
    DescribePlannerRequest,
    DescribePlannerResponse,
    PlannerStatusRequest,
    PlannerStatusResponse,
    PlanReassignmentRequest,
    PlanReassignmentResponse,
)
from wire.api.produce import (
    ProducePartitionData,
    ProducePartitionResponse,
    ProduceRequest,
    ProduceResponse,
    ProduceTopicData,
    ProduceTopicResponse,
)
from wire.api.reelect_controller import ReelectControllerRequest, ReelectControllerResponse
from wire.api.sasl_authenticate import SaslAuthenticateRequest, SaslAuthenticateResponse
from wire.api.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse
from wire.api.stop_replica import StopReplicaPartition, StopReplicaRequest, StopReplicaResponse
from wire.api.update_metadata import (
    LiveBroker,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from wire.endpoint import Endpoint

API_SPECS: dict[int, ApiSpec] = {
    spec.key: spec
    for spec in (
        ApiSpec(ApiKey.PRODUCE, 0, 0, ProduceRequest, ProduceResponse),
        ApiSpec(ApiKey.FETCH, 0, 0, FetchRequest, FetchResponse),
        ApiSpec(ApiKey.LIST_OFFSETS, 0, 0, ListOffsetsRequest, ListOffsetsResponse),
        ApiSpec(ApiKey.METADATA, 0, 0, MetadataRequest, MetadataResponse),
        ApiSpec(ApiKey.LEADER_AND_ISR, 0, 0, LeaderAndIsrRequest, LeaderAndIsrResponse),
        ApiSpec(ApiKey.STOP_REPLICA, 0, 0, StopReplicaRequest, StopReplicaResponse),
        ApiSpec(ApiKey.UPDATE_METADATA, 0, 0, UpdateMetadataRequest, UpdateMetadataResponse),
        ApiSpec(ApiKey.API_VERSIONS, 0, 0, ApiVersionsRequest, ApiVersionsResponse),
        ApiSpec(ApiKey.CREATE_TOPICS, 0, 0, CreateTopicsRequest, CreateTopicsResponse),
        ApiSpec(
            ApiKey.OFFSET_FOR_LEADER_EPOCH, 0, 0, OffsetsForLeaderEpochRequest, OffsetsForLeaderEpochResponse
        ),
        ApiSpec(ApiKey.ALTER_PARTITION, 0, 0, AlterPartitionRequest, AlterPartitionResponse),
        ApiSpec(ApiKey.DESCRIBE_CLUSTER, 0, 0, DescribeClusterRequest, DescribeClusterResponse),
        ApiSpec(
            ApiKey.ALTER_PARTITION_REASSIGNMENTS,
            0,
            0,
            AlterPartitionReassignmentsRequest,
            AlterPartitionReassignmentsResponse,
        ),
        ApiSpec(
            ApiKey.LIST_PARTITION_REASSIGNMENTS,
            0,
            0,
            ListPartitionReassignmentsRequest,
            ListPartitionReassignmentsResponse,
        ),
        ApiSpec(
            ApiKey.INCREMENTAL_ALTER_CONFIGS,
            0,
            0,
            IncrementalAlterConfigsRequest,
            IncrementalAlterConfigsResponse,
        ),
        ApiSpec(ApiKey.DESCRIBE_CONFIGS, 0, 0, DescribeConfigsRequest, DescribeConfigsResponse),
        ApiSpec(ApiKey.DESCRIBE_LOG_DIRS, 0, 0, DescribeLogDirsRequest, DescribeLogDirsResponse),
        ApiSpec(ApiKey.REELECT_CONTROLLER, 0, 0, ReelectControllerRequest, ReelectControllerResponse),
        ApiSpec(ApiKey.DESCRIBE_CONTROLLER, 0, 0, DescribeControllerRequest, DescribeControllerResponse),
        ApiSpec(ApiKey.ELECT_LEADERS, 0, 0, ElectLeadersRequest, ElectLeadersResponse),
        ApiSpec(ApiKey.DELETE_TOPICS, 0, 0, DeleteTopicsRequest, DeleteTopicsResponse),
        ApiSpec(ApiKey.CREATE_PARTITIONS, 0, 0, CreatePartitionsRequest, CreatePartitionsResponse),
        ApiSpec(ApiKey.PLAN_REASSIGNMENT, 0, 0, PlanReassignmentRequest, PlanReassignmentResponse),
        ApiSpec(ApiKey.PLANNER_STATUS, 0, 0, PlannerStatusRequest, PlannerStatusResponse),
        ApiSpec(ApiKey.CANCEL_PLAN, 0, 0, CancelPlanRequest, CancelPlanResponse),
        ApiSpec(ApiKey.DESCRIBE_PLANNER, 0, 0, DescribePlannerRequest, DescribePlannerResponse),
        ApiSpec(ApiKey.CONTROLLED_SHUTDOWN, 0, 0, ControlledShutdownRequest, ControlledShutdownResponse),
        ApiSpec(ApiKey.SASL_HANDSHAKE, 0, 0, SaslHandshakeRequest, SaslHandshakeResponse),
        ApiSpec(ApiKey.SASL_AUTHENTICATE, 0, 0, SaslAuthenticateRequest, SaslAuthenticateResponse),
        ApiSpec(ApiKey.INIT_PRODUCER_ID, 0, 0, InitProducerIdRequest, InitProducerIdResponse),
    )
}


def spec_for(request: type[Request]) -> ApiSpec:
    return API_SPECS[request.API_KEY]


__all__ = [
    "API_SPECS",
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "AlterConfigsResource",
    "AlterConfigsResourceResponse",
    "AlterPartitionItem",
    "AlterPartitionReassignmentsRequest",
    "AlterPartitionReassignmentsResponse",
    "AlterPartitionRequest",
    "AlterPartitionResponse",
    "AlterPartitionResult",
    "AlterPartitionTopic",
    "AlterPartitionTopicResult",
    "AlterableConfig",
    "ApiKey",
    "ApiSpec",
    "ApiVersionRange",
    "ApiVersionsRequest",
    "ApiVersionsResponse",
    "BrokerState",
    "ControlledShutdownRequest",
    "ControlledShutdownResponse",
    "CreatableReplicaAssignment",
    "CreatableTopic",
    "CreatableTopicResult",
    "CreatePartitionsAssignment",
    "CreatePartitionsRequest",
    "CreatePartitionsResponse",
    "CreatePartitionsTopic",
    "CreatePartitionsTopicResult",
    "CreateTopicsRequest",
    "CreateTopicsResponse",
    "DeletableTopicResult",
    "DeleteTopicsRequest",
    "DeleteTopicsResponse",
    "DescribableLogDirTopic",
    "DescribeClusterRequest",
    "DescribeClusterResponse",
    "DescribeConfigsRequest",
    "DescribeConfigsResource",
    "DescribeConfigsResourceResult",
    "DescribeConfigsResponse",
    "DescribeConfigsResult",
    "DescribeControllerRequest",
    "DescribeControllerResponse",
    "DescribeLogDirsPartition",
    "DescribeLogDirsRequest",
    "DescribeLogDirsResponse",
    "DescribeLogDirsResult",
    "DescribeLogDirsTopic",
    "DescribedBroker",
    "ElectLeadersRequest",
    "ElectLeadersResponse",
    "ElectLeadersTopicPartitions",
    "ElectionType",
    "Endpoint",
    "EpochEndOffset",
    "FetchPartition",
    "FetchPartitionData",
    "FetchRequest",
    "FetchResponse",
    "FetchTopic",
    "FetchableTopicResponse",
    "ForgottenTopic",
    "IncrementalAlterConfigsRequest",
    "IncrementalAlterConfigsResponse",
    "InitProducerIdRequest",
    "InitProducerIdResponse",
    "LeaderAndIsrPartitionState",
    "LeaderAndIsrRequest",
    "LeaderAndIsrResponse",
    "ListOffsetsPartition",
    "ListOffsetsPartitionResponse",
    "ListOffsetsRequest",
    "ListOffsetsResponse",
    "ListOffsetsTopic",
    "ListOffsetsTopicResponse",
    "ListPartitionReassignmentsRequest",
    "ListPartitionReassignmentsResponse",
    "ListPartitionReassignmentsTopics",
    "LiveBroker",
    "LiveLeader",
    "MetadataBroker",
    "MetadataPartition",
    "MetadataRequest",
    "MetadataResponse",
    "MetadataTopic",
    "OffsetForLeaderPartition",
    "OffsetForLeaderTopic",
    "OffsetForLeaderTopicResult",
    "OffsetsForLeaderEpochRequest",
    "OffsetsForLeaderEpochResponse",
    "OngoingPartitionReassignment",
    "OngoingTopicReassignment",
    "PartitionElectionResult",
    "PartitionError",
    "ProducePartitionData",
    "ProducePartitionResponse",
    "ProduceRequest",
    "ProduceResponse",
    "ProduceTopicData",
    "ProduceTopicResponse",
    "ReassignablePartition",
    "ReassignablePartitionResponse",
    "ReassignableTopic",
    "ReassignableTopicResponse",
    "ReelectControllerRequest",
    "ReelectControllerResponse",
    "RemainingPartition",
    "ReplicaElectionResult",
    "Request",
    "Response",
    "SaslAuthenticateRequest",
    "SaslAuthenticateResponse",
    "SaslHandshakeRequest",
    "SaslHandshakeResponse",
    "StopReplicaPartition",
    "StopReplicaRequest",
    "StopReplicaResponse",
    "UpdateMetadataPartitionState",
    "UpdateMetadataRequest",
    "UpdateMetadataResponse",
    "spec_for",
]
