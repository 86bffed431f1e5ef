"""The asyncio server and client on loopback: pipelining, timeouts, dropped connections,
and bad input that closes one connection while others are served."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import AsyncIterator

import msgpack
import pytest

from wire.api import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    DescribeClusterRequest,
    DescribeClusterResponse,
    Response,
)
from wire.client import RpcClient
from wire.context import ANONYMOUS, RequestContext
from wire.envelope import ParsedRequest
from wire.errors import ErrorCode, NetworkException, NotController, RequestTimedOut
from wire.frames import encode_frame
from wire.server import RpcServer


class Handler:
    def __init__(self) -> None:
        self.seen: list[int] = []
        self.contexts: list[RequestContext] = []
        self.release = asyncio.Event()
        self.release.set()

    async def __call__(self, request: ParsedRequest) -> Response:
        self.seen.append(request.header.correlation_id)
        self.contexts.append(request.context)
        if isinstance(request.body, DescribeClusterRequest):
            await self.release.wait()
            return DescribeClusterResponse(cluster_id=f"c{request.header.correlation_id}")
        if request.header.client_id == "boom":
            raise RuntimeError("handler bug")
        if request.header.client_id == "not-controller":
            raise NotController("ask the controller")
        return ApiVersionsResponse()


@pytest.fixture
async def served() -> AsyncIterator[tuple[RpcServer, Handler]]:
    handler = Handler()
    server = RpcServer(handler, "127.0.0.1", 0, max_frame_size=1024)
    await server.start()
    yield server, handler
    await server.close()


async def raw_exchange(port: int, data: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), 5)  # until the server closes or answers
    writer.close()
    return answer


async def test_pipelined_requests_are_matched_by_correlation_id(served: tuple[RpcServer, Handler]) -> None:
    server, handler = served
    client = await RpcClient.connect("127.0.0.1", server.port)
    responses = await asyncio.gather(*(client.send(DescribeClusterRequest()) for _ in range(50)))
    assert [r.cluster_id for r in responses] == [f"c{i}" for i in range(1, 51)]  # type: ignore[attr-defined]
    assert handler.seen == list(range(1, 51)), "one connection's requests are handled in order"
    await client.close()


async def test_request_timeout(served: tuple[RpcServer, Handler]) -> None:
    server, handler = served
    handler.release.clear()
    client = await RpcClient.connect("127.0.0.1", server.port, request_timeout=0.2)
    with pytest.raises(RequestTimedOut, match="DESCRIBE_CLUSTER"):
        await client.send(DescribeClusterRequest())
    handler.release.set()
    await client.close()


async def test_dropped_connection_fails_every_pending_request(served: tuple[RpcServer, Handler]) -> None:
    server, handler = served
    handler.release.clear()
    client = await RpcClient.connect("127.0.0.1", server.port)
    pending = [asyncio.create_task(client.send(DescribeClusterRequest())) for _ in range(3)]
    await asyncio.sleep(0)
    await server.close()
    for task in pending:
        with pytest.raises(NetworkException, match=r"127\.0\.0\.1"):
            await task
    with pytest.raises(NetworkException):
        await client.send(ApiVersionsRequest())
    await client.close()


async def test_handler_errors_become_error_codes(served: tuple[RpcServer, Handler]) -> None:
    server, _ = served
    for client_id, code in (
        ("boom", ErrorCode.UNKNOWN_SERVER_ERROR),
        ("not-controller", ErrorCode.NOT_CONTROLLER),
    ):
        client = await RpcClient.connect("127.0.0.1", server.port, client_id=client_id)
        response = await client.send(ApiVersionsRequest())
        assert response.error_code == code
        assert response.error_message
        await client.close()


async def test_connect_to_nothing_is_a_network_exception() -> None:
    from node.cluster.zookeeper import free_ports

    with pytest.raises(NetworkException, match="cannot connect"):
        await RpcClient.connect("127.0.0.1", free_ports(1)[0], connect_timeout=2)


@pytest.mark.parametrize(
    ("data", "expected_code"),
    [
        (encode_frame(msgpack.packb([999, 0, 3, None, {}])), ErrorCode.INVALID_REQUEST),
        (encode_frame(msgpack.packb([60, 7, 3, None, {}])), ErrorCode.UNSUPPORTED_VERSION),
        (encode_frame(msgpack.packb([60, 0, 3, None, "body"])), ErrorCode.INVALID_REQUEST),
    ],
)
async def test_readable_bad_requests_are_answered(
    served: tuple[RpcServer, Handler], data: bytes, expected_code: ErrorCode, caplog: pytest.LogCaptureFixture
) -> None:
    server, handler = served
    with caplog.at_level(logging.WARNING, logger="wire.server"):
        answer = await raw_exchange_first_frame(server.port, data)
    correlation_id, body = msgpack.unpackb(answer[4:])
    assert correlation_id == 3
    assert body["error_code"] == expected_code
    assert handler.seen == [], "bad input never reaches the handler"
    assert len(caplog.records) == 1, "one log line per bad request"


async def raw_exchange_first_frame(port: int, data: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    length = await asyncio.wait_for(reader.readexactly(4), 5)
    body = await reader.readexactly(int.from_bytes(length, "big"))
    writer.close()
    return length + body


@pytest.mark.parametrize(
    "data",
    [
        b"\x00\x00\x04\x01" + b"x" * 10,  # over the 1024-byte limit
        b"\xff\xff\xff\xfe",  # negative length
        encode_frame(b"\xc1\xc1"),  # not msgpack
        encode_frame(msgpack.packb({"no": "correlation id"})),
    ],
)
async def test_unreadable_input_closes_only_that_connection(
    served: tuple[RpcServer, Handler], data: bytes
) -> None:
    server, _ = served
    bystander = await RpcClient.connect("127.0.0.1", server.port)
    assert await raw_exchange(server.port, data) == b"", "the server hangs up without answering"
    assert isinstance(await bystander.send(ApiVersionsRequest()), ApiVersionsResponse)
    await bystander.close()


async def test_truncated_frame_then_disconnect_leaves_the_server_serving(
    served: tuple[RpcServer, Handler],
) -> None:
    server, _ = served
    _, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(encode_frame(msgpack.packb([18, 0, 1, None, {}]))[:-2])
    await writer.drain()
    writer.close()
    client = await RpcClient.connect("127.0.0.1", server.port)
    assert (await client.send(ApiVersionsRequest())).error_code == 0
    await client.close()


async def test_each_request_carries_its_connection_context(served: tuple[RpcServer, Handler]) -> None:
    server, handler = served
    for _ in range(2):
        client = await RpcClient.connect("127.0.0.1", server.port, client_id="c", request_timeout=5)
        try:
            await client.send(ApiVersionsRequest())
            await client.send(ApiVersionsRequest())
        finally:
            await client.close()
    first, again, second, _ = handler.contexts
    assert first == dataclasses.replace(
        RequestContext(principal=ANONYMOUS, client_host="127.0.0.1", listener_name="PLAINTEXT"),
        connection_id=first.connection_id,
    )
    assert again.connection_id == first.connection_id != 0, "one id per connection"
    assert second.connection_id != first.connection_id, "another connection, another id"
