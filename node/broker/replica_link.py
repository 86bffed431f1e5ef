"""The ReplicaLink port over RPC: a follower's requests to leaders, and a leader's
AlterPartition to the active controller. One connection per peer, reopened after a failure.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from actors.ports import EndPoint, RegisteredBroker
from wire.api import (
    AlterPartitionRequest,
    AlterPartitionResponse,
    FetchRequest,
    FetchResponse,
    OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse,
    Request,
    Response,
)
from wire.client import RpcClient
from wire.errors import NotController, WireError

log = logging.getLogger(__name__)


class RpcReplicaLink:
    def __init__(
        self,
        broker_id: int,
        *,
        controller_id: Callable[[], int],
        registered_broker: Callable[[int], Awaitable[RegisteredBroker | None]],
        timeout_s: float,
    ) -> None:
        self._client_id = f"broker-{broker_id}"
        self._controller_id = controller_id
        self._registered_broker = registered_broker
        self._timeout_s = timeout_s
        self._clients: dict[tuple[str, int], RpcClient] = {}

    async def _send(self, endpoint: EndPoint, request: Request, timeout_s: float) -> Response:
        key = (endpoint.host, endpoint.port)
        client = self._clients.get(key)
        if client is None or client.closed:
            client = await RpcClient.connect(
                endpoint.host,
                endpoint.port,
                client_id=self._client_id,
                request_timeout=timeout_s,
                connect_timeout=self._timeout_s,
            )
            self._clients[key] = client
        try:
            return await client.send(request, timeout=timeout_s)
        except WireError:
            self._clients.pop(key, None)
            await client.close()
            raise

    async def fetch(self, leader: EndPoint, request: FetchRequest) -> FetchResponse:
        # A long poll: the leader may hold the answer for max_wait_ms.
        response = await self._send(leader, request, self._timeout_s + request.max_wait_ms / 1000)
        assert isinstance(response, FetchResponse)
        return response

    async def offsets_for_leader_epoch(
        self, leader: EndPoint, request: OffsetsForLeaderEpochRequest
    ) -> OffsetsForLeaderEpochResponse:
        response = await self._send(leader, request, self._timeout_s)
        assert isinstance(response, OffsetsForLeaderEpochResponse)
        return response

    async def alter_partition(self, request: AlterPartitionRequest) -> AlterPartitionResponse:
        controller = self._controller_id()
        registered = None if controller < 0 else await self._registered_broker(controller)
        if registered is None or not registered.info.endpoints:
            raise NotController("no active controller is known")
        response = await self._send(registered.info.endpoints[0], request, self._timeout_s)
        assert isinstance(response, AlterPartitionResponse)
        return response

    async def close(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.close()
