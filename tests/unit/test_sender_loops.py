"""The long-lived loops that send for a broker (a replica fetcher, the controller's sender to a
broker) log an unexpected error (not a WireError: a bug, an error of a port) and go on, as
Kafka's threads do, rather than end their task silently and leave partitions unreplicated or
requests queued for good."""

from __future__ import annotations

import asyncio

from actors.base.ports import BrokerInfo, RegisteredBroker
from actors.replica.fetcher import ReplicaFetcher
from actors.replica.replication import FetchPlan
from node.broker.channel_manager import ControllerChannelManager
from tests.support import eventually
from wire.api import ApiVersionsRequest, ApiVersionsResponse, FetchRequest, FetchResponse, Request, Response
from wire.endpoint import Endpoint

ENDPOINT = Endpoint("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 1)


class _Leader:
    """A ReplicaLink that answers every fetch."""

    def __init__(self) -> None:
        self.fetches = 0

    async def fetch(self, leader: Endpoint, request: FetchRequest) -> FetchResponse:
        self.fetches += 1
        return FetchResponse()


class _Follower:
    """A FetchTarget with `rounds` fetches to make, the first of which it fails to take in."""

    def __init__(self, rounds: int) -> None:
        self.rounds = rounds
        self.taken = 0

    async def plan_fetch(self, source: int) -> FetchPlan | None:
        if self.taken == self.rounds:
            return None
        return FetchPlan(ENDPOINT, {}, fetch_request=FetchRequest(replica_id=2))

    async def fetched(self, source: int, plan: FetchPlan, response: FetchResponse) -> bool:
        self.taken += 1
        if self.taken == 1:
            raise RuntimeError("a bug in appending what was fetched")
        return False


async def test_a_fetcher_goes_on_after_an_unexpected_error() -> None:
    leader, follower = _Leader(), _Follower(rounds=3)
    fetcher = ReplicaFetcher(1, follower, leader, backoff_s=0.01)  # type: ignore[arg-type]
    fetcher.start()
    try:
        await eventually(
            lambda: asyncio.sleep(0, not fetcher.running), timeout=5, message="the fetcher never finished"
        )
        assert follower.taken == 3 and leader.fetches == 3
    finally:
        await fetcher.stop()


class _FailingOnce:
    """A RequestSender whose first send fails with an error that is no WireError."""

    def __init__(self) -> None:
        self.sends = 0

    async def send(self, endpoint: Endpoint, request: Request, *, timeout: float | None = None) -> Response:
        self.sends += 1
        if self.sends == 1:
            raise RuntimeError("a bug in the connection pool")
        return ApiVersionsResponse()

    async def close(self) -> None:
        pass


async def test_the_controllers_sender_to_a_broker_goes_on_after_an_unexpected_error() -> None:
    pool = _FailingOnce()
    channel = ControllerChannelManager(controller_id=1, senders=lambda client_id, timeout_s: pool)
    answers: list[Response] = []
    try:
        channel.add_broker(RegisteredBroker(BrokerInfo(2, (ENDPOINT,)), 1))
        channel.send(2, ApiVersionsRequest(), answers.append)
        channel.send(2, ApiVersionsRequest(), answers.append)
        await eventually(
            lambda: asyncio.sleep(0, len(answers) == 2), timeout=5, message="requests left queued"
        )
        assert pool.sends == 3
    finally:
        await channel.close()
