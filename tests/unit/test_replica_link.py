"""RpcReplicaLink's way to the controller: the registration is read once per controller, and
again only when the controller changes or a request to it failed; and its control requests
do not wait behind a fetch's long poll to the same broker (a real server on loopback)."""

from __future__ import annotations

import asyncio

import pytest

from actors.base.ports import BrokerInfo, RegisteredBroker
from node.broker.replica_link import RpcReplicaLink
from node.cluster.zookeeper import free_ports
from wire.api import (
    AlterPartitionRequest,
    AlterPartitionResponse,
    FetchRequest,
    FetchResponse,
    Request,
    Response,
)
from wire.endpoint import Endpoint
from wire.envelope import ParsedRequest
from wire.errors import NetworkException, NotController, RequestTimedOut
from wire.server import RpcServer


class _Link(RpcReplicaLink):
    """Sends nothing: records where each request went; fails when told to."""

    def __init__(self) -> None:
        self.controller = -1
        self.reads: list[int] = []
        self.sent: list[Endpoint] = []
        self.fail = False
        super().__init__(
            1, controller_id=lambda: self.controller, registered_broker=self._read, timeout_s=1.0
        )

    async def _read(self, broker_id: int) -> RegisteredBroker | None:
        self.reads.append(broker_id)
        endpoint = Endpoint("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 9000 + broker_id)
        return RegisteredBroker(BrokerInfo(broker_id, (endpoint,)), 1)

    async def _send_control(self, endpoint: Endpoint, request: Request, timeout_s: float) -> Response:
        self.sent.append(endpoint)
        if self.fail:
            raise NetworkException("refused")
        return AlterPartitionResponse()


async def test_the_controller_registration_is_read_once_per_controller() -> None:
    link = _Link()
    request = AlterPartitionRequest(broker_id=1, broker_epoch=1, topics=[])
    with pytest.raises(NotController):
        await link.alter_partition(request)
    link.controller = 2
    for _ in range(3):
        await link.alter_partition(request)
    assert link.reads == [2], "one read for three requests"
    link.controller = 3
    await link.alter_partition(request)
    assert link.reads == [2, 3] and link.sent[-1].port == 9003
    link.fail = True
    with pytest.raises(NetworkException):
        await link.alter_partition(request)
    link.fail = False
    await link.alter_partition(request)
    assert link.reads == [2, 3, 3], "read again after a failed request"


async def test_a_control_request_does_not_wait_behind_a_long_poll() -> None:
    polling, release = asyncio.Event(), asyncio.Event()

    async def handle(request: ParsedRequest) -> Response:
        if isinstance(request.body, FetchRequest):
            polling.set()
            await release.wait()  # a long poll with nothing to return yet
        return request.spec.response()

    (port,) = free_ports(1)
    server = RpcServer(handle, "127.0.0.1", port)
    await server.start()
    endpoint = Endpoint("PLAINTEXT", "PLAINTEXT", "127.0.0.1", port)

    async def registered(broker_id: int) -> RegisteredBroker:
        return RegisteredBroker(BrokerInfo(broker_id, (endpoint,)), 1)

    link = RpcReplicaLink(1, controller_id=lambda: 2, registered_broker=registered, timeout_s=5.0)
    try:
        fetch = asyncio.create_task(link.fetch(endpoint, FetchRequest(replica_id=1, max_wait_ms=5000)))
        await asyncio.wait_for(polling.wait(), 5)
        answer = await asyncio.wait_for(
            link.alter_partition(AlterPartitionRequest(broker_id=1, broker_epoch=1, topics=[])), 2
        )
        assert isinstance(answer, AlterPartitionResponse)
        assert not fetch.done(), "the long poll is still held"
        release.set()
        assert isinstance(await asyncio.wait_for(fetch, 5), FetchResponse)
    finally:
        await link.close()
        await server.close()


async def test_a_registration_read_that_hangs_fails_the_request_in_its_time_out() -> None:
    link = _Link()
    link.controller = 2
    hung = asyncio.Event()

    async def hanging_read(broker_id: int) -> RegisteredBroker | None:
        await hung.wait()  # ZooKeeper holds a read while the session is not connected
        return None

    link._registered_broker = hanging_read
    request = AlterPartitionRequest(broker_id=1, broker_epoch=1, topics=[])
    with pytest.raises(RequestTimedOut):
        await asyncio.wait_for(link.alter_partition(request), 5)
