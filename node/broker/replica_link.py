"""The ReplicaLink port over RPC: a follower's requests to leaders, and a leader's
AlterPartition (and the broker's ControlledShutdown) to the active controller. The callers
(fetchers, the AlterPartition manager, controlled shutdown) own the retries.

Two pools, as Kafka keeps its fetchers' and its controller channel's network clients apart:
a server answers one connection's requests in order, so a control request sharing a
connection with a fetch would wait behind the fetch's long poll (up to
replica.fetch.wait.max.ms) before the controller even saw it. Each pool keeps one connection
per peer, reopened after a failure.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from actors.base.ports import RegisteredBroker
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
from wire.errors import NotController, RequestTimedOut, WireError
from wire.pool import SenderFactory, connection_pool

log = logging.getLogger(__name__)


class RpcReplicaLink:
    def __init__(
        self,
        broker_id: int,
        *,
        controller_id: Callable[[], int],
        registered_broker: Callable[[int], Awaitable[RegisteredBroker | None]],
        timeout_s: float,
        senders: SenderFactory = connection_pool,
        inter_broker_listener: str = "PLAINTEXT",
    ) -> None:
        """`senders` makes the two pools (a simulation passes its network's, a secured broker
        its inter-broker TLS and SASL settings'); the controller is reached on its
        `inter_broker_listener` endpoint, the leaders on the one LeaderAndIsr names."""
        self._listener = inter_broker_listener
        self._controller_id = controller_id
        self._registered_broker = registered_broker
        self._timeout_s = timeout_s
        self._controller_endpoint: tuple[int, Endpoint] | None = None
        self._fetch_pool = senders(f"broker-{broker_id}-fetcher", timeout_s)
        self._control_pool = senders(f"broker-{broker_id}-control", timeout_s)

    async def fetch(self, leader: Endpoint, request: FetchRequest) -> FetchResponse:
        # A long poll: the leader may hold the answer for max_wait_ms.
        response = await self._fetch_pool.send(
            leader, request, timeout=self._timeout_s + request.max_wait_ms / 1000
        )
        assert isinstance(response, FetchResponse)
        return response

    async def offsets_for_leader_epoch(
        self, leader: Endpoint, request: OffsetsForLeaderEpochRequest
    ) -> OffsetsForLeaderEpochResponse:
        response = await self._fetch_pool.send(leader, request, timeout=self._timeout_s)
        assert isinstance(response, OffsetsForLeaderEpochResponse)
        return response

    async def alter_partition(self, request: AlterPartitionRequest) -> AlterPartitionResponse:
        response = await self._send_to_controller(request, self._timeout_s)
        assert isinstance(response, AlterPartitionResponse)
        return response

    async def controlled_shutdown(
        self, request: ControlledShutdownRequest, timeout_s: float
    ) -> ControlledShutdownResponse:
        log.info("controlled shutdown: asking the controller, broker %d", self._controller_id())
        response = await self._send_to_controller(request, timeout_s)
        assert isinstance(response, ControlledShutdownResponse)
        return response

    async def _send_to_controller(self, request: Request, timeout_s: float) -> Response:
        """To the controller this broker knows now (from its `/controller` watch), at the
        endpoint of its registration. The registration is read once per controller and kept
        until the controller changes or a request to it fails (it may have restarted
        elsewhere), not once per request. That read has the request's time-out: ZooKeeper
        holds a read until the session is connected again, and the caller must hear of it."""
        controller = self._controller_id()
        if controller < 0:
            raise NotController("no active controller is known")
        if self._controller_endpoint is None or self._controller_endpoint[0] != controller:
            try:
                registered = await asyncio.wait_for(self._registered_broker(controller), timeout_s)
            except TimeoutError:
                raise RequestTimedOut(
                    f"the registration of controller {controller} not read within {timeout_s:g} s"
                ) from None
            endpoint = None if registered is None else registered.info.endpoint_for(self._listener)
            if endpoint is None:
                raise NotController(f"controller {controller} has no registered {self._listener} listener")
            self._controller_endpoint = (controller, endpoint)
        endpoint = self._controller_endpoint[1]
        try:
            return await self._send_control(endpoint, request, timeout_s)
        except WireError:
            self._controller_endpoint = None
            raise

    async def _send_control(self, endpoint: Endpoint, request: Request, timeout_s: float) -> Response:
        return await self._control_pool.send(endpoint, request, timeout=timeout_s)

    async def close(self) -> None:
        await self._fetch_pool.close()
        await self._control_pool.close()
