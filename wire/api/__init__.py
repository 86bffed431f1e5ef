"""Every API Keel speaks, declared once: key, versions, request and response bodies."""

from wire.api.api_versions import ApiVersionRange, ApiVersionsRequest, ApiVersionsResponse
from wire.api.base import ApiSpec, Request, Response
from wire.api.describe_cluster import (
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribedBroker,
    Endpoint,
)
from wire.api.keys import ApiKey
from wire.api.reelect_controller import ReelectControllerRequest, ReelectControllerResponse

API_SPECS: dict[int, ApiSpec] = {
    spec.key: spec
    for spec in (
        ApiSpec(ApiKey.API_VERSIONS, 0, 0, ApiVersionsRequest, ApiVersionsResponse),
        ApiSpec(ApiKey.DESCRIBE_CLUSTER, 0, 0, DescribeClusterRequest, DescribeClusterResponse),
        ApiSpec(ApiKey.REELECT_CONTROLLER, 0, 0, ReelectControllerRequest, ReelectControllerResponse),
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
    "DescribeClusterRequest",
    "DescribeClusterResponse",
    "DescribedBroker",
    "Endpoint",
    "ReelectControllerRequest",
    "ReelectControllerResponse",
    "Request",
    "Response",
    "spec_for",
]
