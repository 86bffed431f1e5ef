"""`queued.max.request.bytes` (wire/request_memory.py): the bytes of requests read and not yet
answered, over every connection of a server. Past the limit a connection reads no more until
another request is answered; a frame larger than the whole pool is let in alone."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from tests.support import eventually
from wire import records
from wire.api import (
    ProducePartitionData,
    ProduceRequest,
    ProduceResponse,
    ProduceTopicData,
    Response,
)
from wire.client import RpcClient
from wire.connection_quotas import ConnectionLimits, ConnectionQuotas
from wire.envelope import ParsedRequest
from wire.request_memory import RequestMemoryPool
from wire.server import RpcServer


async def test_the_pool_holds_what_fits_and_lets_an_oversized_frame_in_alone() -> None:
    pool = RequestMemoryPool(100)
    assert await pool.reserve(60) == 60
    second = asyncio.ensure_future(pool.reserve(60))
    await asyncio.sleep(0)
    assert not second.done(), "60 more do not fit beside 60"
    pool.release(60)
    assert await second == 60
    oversized = asyncio.ensure_future(pool.reserve(500))
    await asyncio.sleep(0)
    assert not oversized.done()
    pool.release(60)
    assert await oversized == 100, "alone, held as the whole pool"
    pool.release(100)
    assert pool.used == 0
    assert await RequestMemoryPool().reserve(1 << 30) == 0, "-1: no limit, nothing held"


def _now(check: Callable[[], bool]) -> Callable[[], Awaitable[bool]]:
    async def probe() -> bool:
        return check()

    return probe


class _Handler:
    """Holds every request until released; records which it started."""

    def __init__(self) -> None:
        self.started: list[str | None] = []
        self.release = asyncio.Event()

    async def __call__(self, request: ParsedRequest) -> Response:
        self.started.append(request.header.client_id)
        await self.release.wait()
        return ProduceResponse()


def _produce(size: int) -> ProduceRequest:
    batch = records.build_batch([(None, b"x" * size)], timestamp=0)
    return ProduceRequest(
        acks=1,
        topic_data=[
            ProduceTopicData(name="t", partition_data=[ProducePartitionData(index=0, records=batch)])
        ],
    )


async def test_a_connection_reads_no_more_while_the_pool_is_full() -> None:
    handler = _Handler()
    quotas = ConnectionQuotas(ConnectionLimits(queued_max_request_bytes=100_000))
    server = RpcServer(handler, "127.0.0.1", 0, quotas=quotas)
    await server.start()
    first = await RpcClient.connect("127.0.0.1", server.port, client_id="first", request_timeout=10)
    second = await RpcClient.connect("127.0.0.1", server.port, client_id="second", request_timeout=10)
    try:
        answered_first = asyncio.ensure_future(first.send(_produce(70_000)))
        await eventually(
            _now(lambda: handler.started == ["first"]), timeout=5, message="the first never started"
        )
        answered_second = asyncio.ensure_future(second.send(_produce(70_000)))
        # The second's 70 KB do not fit beside the first's: it waits, reading nothing more.
        await eventually(
            _now(lambda: quotas.request_memory.waiting == 1), timeout=5, message="the second never waited"
        )
        assert handler.started == ["first"]
        handler.release.set()
        await asyncio.wait_for(asyncio.gather(answered_first, answered_second), 10)
        assert handler.started == ["first", "second"]
        assert quotas.request_memory.used == 0, "every byte released"
    finally:
        await first.close()
        await second.close()
        await server.close()
