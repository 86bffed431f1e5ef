"""KeelAdminClient: the Python client library behind `bin/keel`, for any program to import.

async with KeelAdminClient("127.0.0.1:9092") as admin:
    cluster = await admin.describe_cluster()
"""

from __future__ import annotations

import asyncio
from typing import TypeVar

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
    Request,
    Response,
)
from wire.client import RpcClient
from wire.endpoint import parse_bootstrap
from wire.errors import NetworkException, WireError
from wire.pool import ConnectionPool
from wire.retry import Backoff

R = TypeVar("R", bound=Response)


class KeelAdminClient(AsyncClosing):
    """Admin requests go to the first bootstrap broker that answers, over a pooled connection."""

    def __init__(self, bootstrap: str, *, timeout: float = 10.0, client_id: str = "keel-admin") -> None:
        self._servers = parse_bootstrap(bootstrap)
        self._timeout = timeout
        self._pool = ConnectionPool(client_id=client_id, request_timeout=timeout, connect_timeout=timeout)

    async def close(self) -> None:
        await self._pool.close()

    async def _connection(self) -> RpcClient:
        errors = []
        for server in self._servers:
            try:
                return await self._pool.get(server)
            except NetworkException as e:
                errors.append(e.message)
        raise NetworkException("; ".join(errors))

    async def _call(self, request: Request, response_type: type[R]) -> R:
        """Send `request`; a retriable error (a lost connection, a controller that moved) is
        retried with backoff until the client's timeout runs out, as Kafka's admin client does."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._timeout
        backoff = Backoff(0.1, 1.0)
        while True:
            try:
                return await (await self._connection()).call(request, response_type)
            except WireError as e:
                delay = backoff.next_delay()
                if not e.retriable or loop.time() + delay > deadline:
                    raise
                await asyncio.sleep(delay)

    async def api_versions(self) -> ApiVersionsResponse:
        return await self._call(ApiVersionsRequest(), ApiVersionsResponse)

    async def describe_cluster(self) -> DescribeClusterResponse:
        return await self._call(DescribeClusterRequest(), DescribeClusterResponse)

    async def create_topics(
        self, topics: list[CreatableTopic], *, validate_only: bool = False
    ) -> CreateTopicsResponse:
        request = CreateTopicsRequest(topics=topics, validate_only=validate_only)
        return await self._call(request, CreateTopicsResponse)

    async def metadata(self, topics: list[str] | None = None) -> MetadataResponse:
        return await self._call(MetadataRequest(topics=topics), MetadataResponse)

    async def describe_controller(self) -> DescribeControllerResponse:
        return await self._call(DescribeControllerRequest(), DescribeControllerResponse)

    async def reelect_controller(self) -> int:
        """Delete `/controller`; returns the id of the controller that was deposed (-1: none)."""
        response = await self._call(ReelectControllerRequest(), ReelectControllerResponse)
        return response.previous_controller_id
