"""A task cancelled while it waits on an `RpcClient` is cancelled, whatever else happens in
the same moment: a replica fetcher whose broker stops is cancelled as a Fetch answer comes in
or as it closes a connection that failed, and a lost cancellation keeps it fetching, holding
the broker's shutdown until shutdown.timeout.ms. Over loopback TLS, as between secured
brokers (the race itself is not TLS's)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from node.cluster.certificates import CertificateAuthority
from node.security.settings import client_security_from_properties
from wire.api import ApiVersionsRequest, ApiVersionsResponse, Response
from wire.client import RpcClient
from wire.envelope import ParsedRequest
from wire.security import ListenerSecurity
from wire.server import RpcServer
from wire.tls import TlsFiles, server_context


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[RpcClient]:
    ca = CertificateAuthority.create()
    files = TlsFiles(
        keystore_location=str(ca.write_keystore(tmp_path / "server.pem", "server")),
        truststore_location=str(ca.write_truststore(tmp_path / "ca.pem")),
    )

    async def handler(request: ParsedRequest) -> Response:
        return ApiVersionsResponse(error_code=0, api_keys=[])

    server = RpcServer(
        handler, "127.0.0.1", 0, security=ListenerSecurity("CLIENT", "SSL", server_context(files))
    )
    await server.start()
    security = client_security_from_properties(
        {"security.protocol": "SSL", "ssl.truststore.location": files.truststore_location or ""}
    )
    connected = await RpcClient.connect("127.0.0.1", server.port, security_protocol="SSL", security=security)
    try:
        yield connected
    finally:
        await connected.close()
        await server.close()


async def test_a_send_cancelled_as_its_answer_arrives_is_cancelled(
    client: RpcClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    loop = asyncio.get_running_loop()
    create_future = loop.create_future
    sending: asyncio.Task[Response] | None = None
    answers: list[asyncio.Future[object]] = []

    def answer_that_cancels_its_sender() -> asyncio.Future[object]:
        # The first to hear of the answer cancels the sender, before its own wake-up runs: a
        # broker's stop that runs between a Fetch answer's arrival and the fetcher's turn.
        future = create_future()
        if asyncio.current_task() is sending and not answers:
            answers.append(future)
            future.add_done_callback(lambda _: sending.cancel() if sending is not None else None)
        return future

    monkeypatch.setattr(loop, "create_future", answer_that_cancels_its_sender)
    sending = asyncio.create_task(client.send(ApiVersionsRequest()))
    with pytest.raises(asyncio.CancelledError):
        await sending
    assert answers and answers[0].done() and not answers[0].cancelled(), "the answer came"
    assert sending.cancelled()


async def test_a_close_cancelled_while_its_read_loop_ends_is_cancelled(client: RpcClient) -> None:
    closing = asyncio.create_task(client.close())
    await asyncio.sleep(0)  # close() now waits for its read loop to end
    closing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await closing
    assert closing.cancelled()
