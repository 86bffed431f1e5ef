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
from wire.envelope import ParsedRequest, RequestHeader, encode_request
from wire.frames import encode_frame
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
    """A first client has sent the length of a 70 KB frame and part of it: its declared size
    is held. A second client's 70 KB frame does not fit beside it, and waits unread; once the
    first frame is whole and parsed, its bytes are released and the second is served."""
    handler = _Handler()
    handler.release.set()
    quotas = ConnectionQuotas(ConnectionLimits(queued_max_request_bytes=100_000))
    server = RpcServer(handler, "127.0.0.1", 0, quotas=quotas)
    await server.start()
    first_frame = encode_frame(encode_request(RequestHeader(0, 0, 1, "first"), _produce(70_000)))
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    second = await RpcClient.connect("127.0.0.1", server.port, client_id="second", request_timeout=10)
    try:
        writer.write(first_frame[:1000])
        await writer.drain()
        await eventually(
            _now(lambda: quotas.request_memory.used >= 70_000),
            timeout=5,
            message="the first size was not held",
        )
        answered_second = asyncio.ensure_future(second.send(_produce(70_000)))
        await eventually(
            _now(lambda: quotas.request_memory.waiting == 1), timeout=5, message="the second never waited"
        )
        assert handler.started == [], "the second's frame was not read"
        writer.write(first_frame[1000:])
        await writer.drain()
        await asyncio.wait_for(answered_second, 10)
        assert handler.started == ["first", "second"]
        assert await asyncio.wait_for(reader.read(4), 10), "the first is answered too"
        assert quotas.request_memory.used == 0, "every byte released"
    finally:
        writer.close()
        await second.close()
        await server.close()


async def test_a_frame_larger_than_the_pool_gets_in_alone() -> None:
    """Its declared size is held as the whole pool when its length arrives, and no more is
    asked once it is whole (asking for the rest would wait on itself for ever)."""
    handler = _Handler()
    handler.release.set()
    quotas = ConnectionQuotas(ConnectionLimits(queued_max_request_bytes=50_000))
    server = RpcServer(handler, "127.0.0.1", 0, quotas=quotas)
    await server.start()
    client = await RpcClient.connect("127.0.0.1", server.port, client_id="big", request_timeout=10)
    try:
        assert isinstance(await asyncio.wait_for(client.send(_produce(400_000)), 10), ProduceResponse)
        assert quotas.request_memory.used == 0
    finally:
        await client.close()
        await server.close()
