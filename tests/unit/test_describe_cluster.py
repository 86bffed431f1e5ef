"""DescribeCluster's read of the brokers' registrations: shared by the requests that come
together, and reused for a second, so that a client asking in a loop does not cost ZooKeeper
(which every broker shares) a read of every registration each time."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from actors.ports import BrokerInfo, RegisteredBroker
from node.broker.apis import REGISTERED_BROKERS_TTL_S, BrokerApis
from tests.support import ManualClock
from wire.endpoint import Endpoint


class _Store:
    """The one call DescribeCluster makes of the cluster store, counted."""

    def __init__(self) -> None:
        self.reads = 0
        self.release = asyncio.Event()

    async def registered_brokers(self) -> list[RegisteredBroker]:
        self.reads += 1
        await self.release.wait()
        endpoint = Endpoint("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 9092)
        return [RegisteredBroker(BrokerInfo(1, (endpoint,)), 10)]


async def test_describe_cluster_reads_the_registrations_once_a_second_whatever_the_requests() -> None:
    store, clock = _Store(), ManualClock()
    apis = BrokerApis(
        broker_id=1,
        store=cast(Any, store),
        replica_manager=cast(Any, None),
        admin=cast(Any, None),
        controller=cast(Any, None),
        broker_epoch=lambda: 10,
        cluster_id=lambda: "c",
        clock=clock,
    )
    together = [asyncio.ensure_future(apis._describe_cluster("PLAINTEXT")) for _ in range(50)]
    await asyncio.sleep(0)
    store.release.set()
    answers = await asyncio.gather(*together)
    assert store.reads == 1, "fifty requests together, one read"
    assert all([b.broker_id for b in a.brokers] == [1] for a in answers)
    for _ in range(100):
        await apis._describe_cluster("PLAINTEXT")
    assert store.reads == 1, "within the second, the same read"
    clock.advance(REGISTERED_BROKERS_TTL_S)
    await apis._describe_cluster("PLAINTEXT")
    assert store.reads == 2, "a second later, read again"
