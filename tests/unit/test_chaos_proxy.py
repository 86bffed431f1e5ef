"""The chaos proxy over loopback sockets: a cut link stalls its streams (nothing lost, nothing
reordered) until it heals, one direction or both, for old and new connections alike."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from node.chaos.proxy import Link, Proxy


@pytest.fixture
async def echo() -> AsyncIterator[int]:
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(1024):
            writer.write(data)
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    yield server.sockets[0].getsockname()[1]
    server.close()


async def exchange(port: int, payload: bytes, timeout: float) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(payload)
        return await asyncio.wait_for(reader.readexactly(len(payload)), timeout)
    finally:
        writer.close()


async def test_a_healthy_link_forwards(echo: int) -> None:
    proxy = await Proxy(Link("l"), echo).start()
    try:
        assert await exchange(proxy.port, b"hello", 5) == b"hello"
    finally:
        await proxy.close()


@pytest.mark.parametrize("cut", [{}, {"to_server": False}, {"to_client": False}])
async def test_a_cut_link_stalls_until_it_heals(echo: int, cut: dict[str, bool]) -> None:
    link = Link("l")
    proxy = await Proxy(link, echo).start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        writer.write(b"one")
        assert await asyncio.wait_for(reader.readexactly(3), 5) == b"one"
        link.cut(**cut)
        assert not link.healthy
        writer.write(b"two")
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(reader.readexactly(3), 0.3)
        link.heal()
        # Nothing was lost while the link was down: the stream goes on where it stopped.
        assert await asyncio.wait_for(reader.readexactly(3), 5) == b"two"
        writer.close()
    finally:
        await proxy.close()


async def test_new_connections_stall_on_a_cut_link(echo: int) -> None:
    link = Link("l")
    proxy = await Proxy(link, echo).start()
    try:
        link.cut()
        attempt = asyncio.create_task(exchange(proxy.port, b"late", 10))
        done, _ = await asyncio.wait([attempt], timeout=0.3)
        assert not done
        link.heal()
        assert await attempt == b"late"
    finally:
        await proxy.close()


async def test_a_target_that_is_down_resets_the_connection() -> None:
    proxy = await Proxy(Link("l"), 1).start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        assert await asyncio.wait_for(reader.read(10), 5) == b""
        writer.close()
    finally:
        await proxy.close()


async def test_dropping_closes_the_connections_under_way_and_accepts_new_ones(echo: int) -> None:
    proxy = await Proxy(Link("l"), echo).start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        writer.write(b"one")
        assert await asyncio.wait_for(reader.readexactly(3), 5) == b"one"
        proxy.drop()
        assert await asyncio.wait_for(reader.read(), 5) == b""
        writer.close()
        assert await exchange(proxy.port, b"again", 5) == b"again"
    finally:
        await proxy.close()
