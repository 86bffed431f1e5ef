"""KeelAdminClient: the Python client library behind `bin/keel`, for any program to import.

async with KeelAdminClient("127.0.0.1:9092") as admin:
    cluster = await admin.describe_cluster()
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

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
    ElectionType,
    ElectLeadersRequest,
    ElectLeadersResponse,
    ElectLeadersTopicPartitions,
    MetadataRequest,
    MetadataResponse,
    ReelectControllerRequest,
    ReelectControllerResponse,
)
from wire.client import RpcClient
from wire.errors import ErrorCode, NetworkException, NotController

# ElectLeaders goes to the active controller; when it moved on the way, ask again.
_CONTROLLER_ATTEMPTS = 3
_CONTROLLER_BACKOFF_S = 0.2


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

    async def elect_leaders(
        self,
        election_type: ElectionType,
        partitions: Iterable[tuple[str, int]] | None = None,
        *,
        timeout_ms: int = 60000,
    ) -> ElectLeadersResponse:
        """Preferred or unclean leader election (ElectLeaders) of these (topic, partition)s,
        or of every partition; sent to the active controller. Results are per partition."""
        topic_partitions = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for topic, partition in partitions:
                by_topic.setdefault(topic, []).append(partition)
            topic_partitions = [
                ElectLeadersTopicPartitions(topic=t, partitions=sorted(set(p)))
                for t, p in sorted(by_topic.items())
            ]
        request = ElectLeadersRequest(
            election_type=int(election_type), topic_partitions=topic_partitions, timeout_ms=timeout_ms
        )
        for attempt in range(_CONTROLLER_ATTEMPTS):
            if attempt:
                await asyncio.sleep(_CONTROLLER_BACKOFF_S)
            response = await self._call_controller(request, ElectLeadersResponse, timeout_ms / 1000)
            if response is not None and not _all_not_controller(response):
                return response
        raise NotController("no active controller answered ElectLeaders")

    async def _call_controller(
        self, request: ElectLeadersRequest, response_type: type[ElectLeadersResponse], wait_s: float
    ) -> ElectLeadersResponse | None:
        """The request sent to the broker named as controller; None when there is none."""
        cluster = await self.describe_cluster()
        address = next(
            ((b.host, b.port) for b in cluster.brokers if b.broker_id == cluster.controller_id), None
        )
        if address is None:
            return None
        client = await RpcClient.connect(
            address[0],
            address[1],
            client_id=self._client_id,
            request_timeout=self._timeout + wait_s,
            connect_timeout=self._timeout,
        )
        try:
            return await client.call(request, response_type)
        finally:
            await client.close()


def _all_not_controller(response: ElectLeadersResponse) -> bool:
    """The broker asked was not the controller (any more): every result says so. (Asked
    for every partition, such a broker answers no results, which cannot be told apart.)"""
    results = [r for topic in response.replica_election_results for r in topic.partition_result]
    if not results:
        return False
    return all(r.error_code == ErrorCode.NOT_CONTROLLER for r in results)
