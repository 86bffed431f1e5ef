"""KeelAdminClient: the Python client library behind `bin/keel`, for any program to import.

async with KeelAdminClient("127.0.0.1:9092") as admin:
    cluster = await admin.describe_cluster()
"""

from __future__ import annotations

from node.clients.closing import AsyncClosing
from wire.api import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    CreatableTopic,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribeControllerRequest,
    DescribeControllerResponse,
    MetadataRequest,
    MetadataResponse,
    ReelectControllerRequest,
    ReelectControllerResponse,
)
from wire.client import RpcClient
from wire.errors import NetworkException


def parse_bootstrap(bootstrap: str) -> list[tuple[str, int]]:
    servers = []
    for item in filter(None, (part.strip() for part in bootstrap.split(","))):
        host, sep, port = item.rpartition(":")
        if not sep or not port.isdigit():
            raise ValueError(f"bootstrap server {item!r} is not host:port")
        servers.append((host.strip("[]") or "127.0.0.1", int(port)))
    if not servers:
        raise ValueError("no bootstrap server given")
    return servers


class KeelAdminClient(AsyncClosing):
    def __init__(self, bootstrap: str, *, timeout: float = 10.0, client_id: str = "keel-admin") -> None:
        self._servers = parse_bootstrap(bootstrap)
        self._timeout = timeout
        self._client_id = client_id
        self._client: RpcClient | None = None

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None

    async def _connection(self) -> RpcClient:
        if self._client is not None and not self._client.closed:
            return self._client
        errors = []
        for host, port in self._servers:
            try:
                self._client = await RpcClient.connect(
                    host,
                    port,
                    client_id=self._client_id,
                    request_timeout=self._timeout,
                    connect_timeout=self._timeout,
                )
                return self._client
            except NetworkException as e:
                errors.append(e.message)
        raise NetworkException("; ".join(errors))

    async def api_versions(self) -> ApiVersionsResponse:
        return await (await self._connection()).call(ApiVersionsRequest(), ApiVersionsResponse)

    async def describe_cluster(self) -> DescribeClusterResponse:
        return await (await self._connection()).call(DescribeClusterRequest(), DescribeClusterResponse)

    async def create_topics(
        self, topics: list[CreatableTopic], *, validate_only: bool = False
    ) -> CreateTopicsResponse:
        request = CreateTopicsRequest(topics=topics, validate_only=validate_only)
        return await (await self._connection()).call(request, CreateTopicsResponse)

    async def metadata(self, topics: list[str] | None = None) -> MetadataResponse:
        return await (await self._connection()).call(MetadataRequest(topics=topics), MetadataResponse)

    async def describe_controller(self) -> DescribeControllerResponse:
        return await (await self._connection()).call(DescribeControllerRequest(), DescribeControllerResponse)

    async def reelect_controller(self) -> int:
        """Delete `/controller`; returns the id of the controller that was deposed (-1: none)."""
        response = await (await self._connection()).call(
            ReelectControllerRequest(), ReelectControllerResponse
        )
        return response.previous_controller_id
