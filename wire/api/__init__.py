"""Every API Keel speaks, declared once: key, versions, request and response bodies."""

from wire.api.api_versions import ApiVersionRange, ApiVersionsRequest, ApiVersionsResponse
from wire.api.base import ApiSpec, Request, Response
from wire.api.create_topics import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreatableTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
)
from wire.api.describe_cluster import (
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribedBroker,
    Endpoint,
)
from wire.api.describe_controller import DescribeControllerRequest, DescribeControllerResponse
from wire.api.keys import ApiKey
from wire.api.leader_and_isr import (
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    LiveLeader,
    PartitionError,
)
from wire.api.metadata import (
    MetadataBroker,
    MetadataPartition,
    MetadataRequest,
    MetadataResponse,
    MetadataTopic,
)
from wire.api.reelect_controller import ReelectControllerRequest, ReelectControllerResponse
from wire.api.stop_replica import StopReplicaPartition, StopReplicaRequest, StopReplicaResponse
from wire.api.update_metadata import (
    LiveBroker,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)

API_SPECS: dict[int, ApiSpec] = {
    spec.key: spec
    for spec in (
        ApiSpec(ApiKey.METADATA, 0, 0, MetadataRequest, MetadataResponse),
        ApiSpec(ApiKey.LEADER_AND_ISR, 0, 0, LeaderAndIsrRequest, LeaderAndIsrResponse),
        ApiSpec(ApiKey.STOP_REPLICA, 0, 0, StopReplicaRequest, StopReplicaResponse),
        ApiSpec(ApiKey.UPDATE_METADATA, 0, 0, UpdateMetadataRequest, UpdateMetadataResponse),
        ApiSpec(ApiKey.API_VERSIONS, 0, 0, ApiVersionsRequest, ApiVersionsResponse),
        ApiSpec(ApiKey.CREATE_TOPICS, 0, 0, CreateTopicsRequest, CreateTopicsResponse),
        ApiSpec(ApiKey.DESCRIBE_CLUSTER, 0, 0, DescribeClusterRequest, DescribeClusterResponse),
        ApiSpec(ApiKey.REELECT_CONTROLLER, 0, 0, ReelectControllerRequest, ReelectControllerResponse),
        ApiSpec(ApiKey.DESCRIBE_CONTROLLER, 0, 0, DescribeControllerRequest, DescribeControllerResponse),
    )
}


def spec_for(request: type[Request]) -> ApiSpec:
    return API_SPECS[request.API_KEY]


__all__ = [
    "API_SPECS",
    "ApiKey",
    "ApiSpec",
    "ApiVersionRange",
    "ApiVersionsRequest",
    "ApiVersionsResponse",
    "CreatableReplicaAssignment",
    "CreatableTopic",
    "CreatableTopicResult",
    "CreateTopicsRequest",
    "CreateTopicsResponse",
    "DescribeClusterRequest",
    "DescribeClusterResponse",
    "DescribeControllerRequest",
    "DescribeControllerResponse",
    "DescribedBroker",
    "Endpoint",
    "LeaderAndIsrPartitionState",
    "LeaderAndIsrRequest",
    "LeaderAndIsrResponse",
    "LiveBroker",
    "LiveLeader",
    "MetadataBroker",
    "MetadataPartition",
    "MetadataRequest",
    "MetadataResponse",
    "MetadataTopic",
    "PartitionError",
    "ReelectControllerRequest",
    "ReelectControllerResponse",
    "Request",
    "Response",
    "StopReplicaPartition",
    "StopReplicaRequest",
    "StopReplicaResponse",
    "UpdateMetadataPartitionState",
    "UpdateMetadataRequest",
    "UpdateMetadataResponse",
    "spec_for",
]
