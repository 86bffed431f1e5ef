"""RpcReplicaLink's way to the controller: the registration is read once per controller, and
again only when the controller changes or a request to it failed."""

from __future__ import annotations

import pytest

from actors.ports import BrokerInfo, RegisteredBroker
from node.broker.replica_link import RpcReplicaLink
from wire.api import AlterPartitionRequest, AlterPartitionResponse, Request, Response
from wire.endpoint import Endpoint
from wire.errors import NetworkException, NotController


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

    async def _send(self, endpoint: Endpoint, request: Request, timeout_s: float) -> Response:
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
