"""ConnectionPool with stand-in connections: one connection attempt per peer at a time, a
drop closes only the connection that failed, and a timed-out request keeps the connection."""

from __future__ import annotations

import asyncio

import pytest

from wire.api import ApiVersionsRequest, ApiVersionsResponse, Response
from wire.client import RpcClient
from wire.endpoint import Endpoint
from wire.errors import NetworkException, RequestTimedOut, WireError
from wire.pool import ConnectionPool

PEER = Endpoint.plaintext("127.0.0.1", 9092)


class _Client:
    def __init__(self) -> None:
        self.closed = False
        self.fail_with: WireError | None = None

    async def send(self, request: object, *, timeout: float | None = None) -> Response:
        if self.fail_with is not None:
            raise self.fail_with
        return ApiVersionsResponse()

    async def close(self) -> None:
        self.closed = True


@pytest.fixture
def connects(monkeypatch: pytest.MonkeyPatch) -> list[_Client]:
    """Every connection opened; each attempt yields to the loop first, as a real one does."""
    opened: list[_Client] = []

    async def connect(*_: object, **__: object) -> _Client:
        await asyncio.sleep(0)
        opened.append(_Client())
        return opened[-1]

    monkeypatch.setattr(RpcClient, "connect", connect)
    return opened

    return ConnectionPool(client_id="t", request_timeout=1.0, connect_timeout=1.0)


async def test_concurrent_first_uses_share_one_connection(connects: list[_Client]) -> None:
    p = ConnectionPool(client_id="t", request_timeout=1.0, connect_timeout=1.0)
    first, second = await asyncio.gather(p.get(PEER), p.get(PEER))
    assert first is second
    assert len(connects) == 1


async def test_a_drop_for_a_failed_connection_leaves_a_newer_one(connects: list[_Client]) -> None:
    p = ConnectionPool(client_id="t", request_timeout=1.0, connect_timeout=1.0)
    old = await p.get(PEER)
    old.closed = True  # lost: the next get connects anew
    new = await p.get(PEER)
    assert new is not old
    await p.drop(PEER, old)
    assert await p.get(PEER) is new and not new.closed
    assert len(connects) == 2


async def test_a_timed_out_request_keeps_the_connection_other_errors_drop_it(
    connects: list[_Client],
) -> None:
    p = ConnectionPool(client_id="t", request_timeout=1.0, connect_timeout=1.0)
    client = await p.get(PEER)
    client.fail_with = RequestTimedOut("slow")  # type: ignore[attr-defined]
    with pytest.raises(RequestTimedOut):
        await p.send(PEER, ApiVersionsRequest())
    assert await p.get(PEER) is client and not client.closed
    client.fail_with = NetworkException("lost")  # type: ignore[attr-defined]
    with pytest.raises(NetworkException):
        await p.send(PEER, ApiVersionsRequest())
    assert client.closed
    assert await p.get(PEER) is not client
