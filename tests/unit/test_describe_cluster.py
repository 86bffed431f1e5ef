"""DescribeCluster's read of the brokers' registrations: shared by the requests that come
together, and reused for a second, so that a client asking in a loop does not cost ZooKeeper
(which every broker shares) a read of every registration each time."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from actors.base.ports import BrokerInfo, RegisteredBroker
from node.broker.apis import REGISTERED_BROKERS_TTL_S, BrokerApis
from tests.support import ManualClock
from wire.api import API_SPECS, ApiKey, UpdateMetadataRequest, UpdateMetadataResponse
from wire.endpoint import Endpoint
from wire.envelope import ParsedRequest, RequestHeader


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


class _ReplicaManager:
    async def update_metadata(
        self, request: UpdateMetadataRequest, broker_epoch: int
    ) -> UpdateMetadataResponse:
        return UpdateMetadataResponse()


def _apis(store: _Store, clock: ManualClock) -> BrokerApis:
    return BrokerApis(
        broker_id=1,
        store=cast(Any, store),
        replica_manager=cast(Any, _ReplicaManager()),
        admin=cast(Any, None),
        controller=cast(Any, None),
        broker_epoch=lambda: 10,
        cluster_id=lambda: "c",
        clock=clock,
    )


async def test_describe_cluster_reads_the_registrations_once_a_second_whatever_the_requests() -> None:
    store, clock = _Store(), ManualClock()
    apis = _apis(store, clock)
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


async def test_an_update_metadata_has_the_next_describe_cluster_read_afresh() -> None:
    """The controller sends UpdateMetadata when a broker registers or goes: a DescribeCluster
    after it lists the brokers as they are, not as they were within the second."""
    store, clock = _Store(), ManualClock()
    store.release.set()
    apis = _apis(store, clock)
    await apis._describe_cluster("PLAINTEXT")
    await apis._describe_cluster("PLAINTEXT")
    assert store.reads == 1
    update = UpdateMetadataRequest(controller_id=1, controller_epoch=1)
    header = RequestHeader(int(ApiKey.UPDATE_METADATA), 0, 7, None)
    await apis._update_metadata(ParsedRequest(header, API_SPECS[ApiKey.UPDATE_METADATA], update))
    await apis._describe_cluster("PLAINTEXT")
    assert store.reads == 2, "read again after the UpdateMetadata, within the same second"
