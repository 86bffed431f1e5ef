"""The ReplicaLink port over RPC: a follower's requests to leaders, and a leader's
AlterPartition to the active controller. One pooled connection per peer, reopened after a
failure; the callers (fetchers, the AlterPartition manager) own the retries.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from actors.ports import RegisteredBroker
from wire.api import (
    AlterPartitionRequest,
    AlterPartitionResponse,
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    FetchRequest,
    FetchResponse,
    OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse,
    Request,
    Response,
)
from wire.endpoint import Endpoint
from wire.errors import NotController
from wire.pool import ConnectionPool

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
        self._controller_id = controller_id
        self._registered_broker = registered_broker
        self._timeout_s = timeout_s
        self._pool = ConnectionPool(
            client_id=f"broker-{broker_id}", request_timeout=timeout_s, connect_timeout=timeout_s
        )

    async def _send(self, endpoint: Endpoint, request: Request, timeout_s: float) -> Response:
        return await self._pool.send(endpoint, request, timeout=timeout_s)

    async def fetch(self, leader: Endpoint, request: FetchRequest) -> FetchResponse:
        # A long poll: the leader may hold the answer for max_wait_ms.
        response = await self._send(leader, request, self._timeout_s + request.max_wait_ms / 1000)
        assert isinstance(response, FetchResponse)
        return response

    async def offsets_for_leader_epoch(
        self, leader: Endpoint, request: OffsetsForLeaderEpochRequest
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

    async def controlled_shutdown(
        self, request: ControlledShutdownRequest, timeout_s: float
    ) -> ControlledShutdownResponse:
        """To the controller this broker knows now (from its `/controller` watch), as Kafka
        finds it in its metadata cache."""
        controller = self._controller_id()
        registered = None if controller < 0 else await self._registered_broker(controller)
        if registered is None or not registered.info.endpoints:
            raise NotController("no active controller is known")
        log.info("controlled shutdown: asking the controller, broker %d", controller)
        response = await self._send(registered.info.endpoints[0], request, timeout_s)
        assert isinstance(response, ControlledShutdownResponse)
        return response

    async def close(self) -> None:
        await self._pool.close()
