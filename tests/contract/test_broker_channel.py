"""The BrokerChannel contract, against the fake and the real channel manager (which talks to
real RPC servers standing in for brokers)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol

import pytest

from actors.base.ports import BrokerInfo, RegisteredBroker
from node.broker.channel_manager import RETRY_BACKOFF_MAX_S, ControllerChannelManager
from node.cluster.zookeeper import free_ports
from tests.fakes import FakeBrokerChannel
from tests.support import ManualClock, eventually
from wire.api import ApiVersionsRequest, ApiVersionsResponse, Request, Response, StopReplicaRequest
from wire.endpoint import Endpoint
from wire.envelope import ParsedRequest
from wire.errors import ErrorCode, StaleControllerEpoch
from wire.server import RpcServer


class Harness(Protocol):
    channel: FakeBrokerChannel | ControllerChannelManager

    async def broker(self, broker_id: int, *, running: bool = True) -> RegisteredBroker: ...

    async def start(self, broker_id: int) -> None: ...

    def received(self, broker_id: int) -> list[Request]: ...

    async def fail_attempts(self, count: int) -> None:
        """Let `count` attempts to reach a stopped broker fail, each followed by its pause."""

    def end_pause(self) -> None:
        """End the pause after a failed attempt, if one is under way."""


class FakeHarness:
    def __init__(self) -> None:
        self.channel = FakeBrokerChannel()

    async def broker(self, broker_id: int, *, running: bool = True) -> RegisteredBroker:
        if not running:
            self.channel.down.add(broker_id)
        return RegisteredBroker(BrokerInfo(broker_id, (Endpoint("PLAINTEXT", "PLAINTEXT", "fake", 1),)), 1)

    async def start(self, broker_id: int) -> None:
        self.channel.bring_up(broker_id)

    def received(self, broker_id: int) -> list[Request]:
        return self.channel.received(broker_id)

    async def fail_attempts(self, count: int) -> None:
        pass  # the fake holds a stopped broker's requests without attempts

    def end_pause(self) -> None:
        pass


class RealHarness:
    def __init__(self) -> None:
        # The pauses between retries run on this clock, moved by hand.
        self.clock = ManualClock()
        self.channel = ControllerChannelManager(controller_id=1, timeout_s=2, clock=self.clock)
        self.servers: dict[int, RpcServer] = {}
        self.ports: dict[int, int] = {}
        self.requests: dict[int, list[Request]] = {}

    async def broker(self, broker_id: int, *, running: bool = True) -> RegisteredBroker:
        self.ports[broker_id] = free_ports(1)[0]
        self.requests[broker_id] = []
        if running:
            await self.start(broker_id)
        endpoint = Endpoint("PLAINTEXT", "PLAINTEXT", "127.0.0.1", self.ports[broker_id])
        return RegisteredBroker(BrokerInfo(broker_id, (endpoint,)), 1)

    async def start(self, broker_id: int) -> None:
        async def handle(request: ParsedRequest) -> Response:
            self.requests[broker_id].append(request.body)
            return request.spec.response()

        server = RpcServer(handle, "127.0.0.1", self.ports[broker_id])
        await server.start()
        self.servers[broker_id] = server

    def received(self, broker_id: int) -> list[Request]:
        return self.requests.get(broker_id, [])

    async def fail_attempts(self, count: int) -> None:
        for attempt in range(1, count + 1):

            async def pausing() -> bool:
                return bool(self.clock.pending())

            await eventually(pausing, timeout=5, message=f"attempt {attempt} did not fail and pause")
            self.clock.advance(RETRY_BACKOFF_MAX_S * 2)

    def end_pause(self) -> None:
        if self.clock.pending():
            self.clock.advance(RETRY_BACKOFF_MAX_S * 2)

    async def close(self) -> None:
        await self.channel.close()
        for server in self.servers.values():
            await server.close()


@pytest.fixture(params=["fake", "real"])
async def harness(request: pytest.FixtureRequest) -> AsyncIterator[Harness]:
    if request.param == "fake":
        yield FakeHarness()
        return
    real = RealHarness()
    yield real
    await real.close()


def stop_replica(number: int) -> StopReplicaRequest:
    return StopReplicaRequest(controller_id=1, controller_epoch=number)


async def test_requests_arrive_in_order_and_callbacks_get_the_answers(harness: Harness) -> None:
    harness.channel.add_broker(await harness.broker(1))
    answers: list[Response] = []
    for number in range(5):
        harness.channel.send(1, stop_replica(number), answers.append)
    harness.channel.send(1, ApiVersionsRequest(), answers.append)

    async def all_answered() -> bool:
        return len(answers) == 6

    await eventually(all_answered, timeout=5, message="not every request was answered")
    assert harness.received(1) == [*(stop_replica(n) for n in range(5)), ApiVersionsRequest()]
    assert isinstance(answers[-1], ApiVersionsResponse)


async def test_a_request_for_a_broker_without_a_channel_is_dropped(harness: Harness) -> None:
    harness.channel.add_broker(await harness.broker(1))
    await harness.broker(2)
    harness.channel.send(2, stop_replica(1))
    harness.channel.send(1, stop_replica(2))

    async def delivered() -> bool:
        return harness.received(1) == [stop_replica(2)]

    await eventually(delivered, timeout=5, message="the request to broker 1 was not delivered")
    assert harness.received(2) == []


async def test_a_request_is_retried_until_the_broker_answers(harness: Harness) -> None:
    harness.channel.add_broker(await harness.broker(3, running=False))
    harness.channel.send(3, stop_replica(7))
    await harness.fail_attempts(3)  # with nobody listening
    await harness.start(3)

    async def delivered() -> bool:
        # The next attempt may have failed just before the start, and wait out its pause.
        harness.end_pause()
        return harness.received(3) == [stop_replica(7)]

    await eventually(delivered, timeout=5, message="the request was not retried until delivered")


async def test_removing_a_broker_drops_its_queue(harness: Harness) -> None:
    harness.channel.add_broker(await harness.broker(4, running=False))
    harness.channel.send(4, stop_replica(1))
    harness.channel.remove_broker(4)
    await harness.start(4)
    harness.channel.send(4, stop_replica(2))
    # Nothing is queued, and nothing waits to try again (which would deliver once the clock moves).
    assert harness.channel.total_queue_size == 0
    assert isinstance(harness, FakeHarness) or not harness.clock.pending()
    assert harness.received(4) == []


async def test_the_controllers_own_broker_is_served_in_process_in_order() -> None:
    served: list[Request] = []

    async def local(request: ParsedRequest) -> Response:
        served.append(request.body)
        if request.body == stop_replica(2):
            raise StaleControllerEpoch("epoch 2 is stale")
        return request.spec.response()

    channel = ControllerChannelManager(controller_id=1, timeout_s=2, local=local)
    # An endpoint nobody listens on: an attempt to connect would fail and retry forever.
    unreachable = Endpoint("PLAINTEXT", "PLAINTEXT", "127.0.0.1", free_ports(1)[0])
    channel.add_broker(RegisteredBroker(BrokerInfo(1, (unreachable,)), 1))
    answers: list[Response] = []
    try:
        for number in range(4):
            channel.send(1, stop_replica(number), answers.append)

        async def all_answered() -> bool:
            return len(answers) == 4

        await eventually(all_answered, timeout=5, message="the local broker did not answer every request")
    finally:
        await channel.close()
    assert served == [stop_replica(n) for n in range(4)]
    assert [a.error_code for a in answers] == [0, 0, ErrorCode.STALE_CONTROLLER_EPOCH, 0]
