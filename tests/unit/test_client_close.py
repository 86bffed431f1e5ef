"""Closing a TLS connection whose peer no longer reads (a stopped or hung process) takes a
moment, not asyncio's 30 s SSL shutdown timeout, and does not raise: a broker's shutdown
closes its connections to such peers."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from node.cluster.certificates import CertificateAuthority
from node.security.settings import client_security_from_properties
from wire.client import RpcClient
from wire.tls import TlsFiles, server_context


async def test_closing_a_tls_connection_to_a_peer_that_never_answers_is_quick(tmp_path: Path) -> None:
    ca = CertificateAuthority.create()
    files = TlsFiles(
        keystore_location=str(ca.write_keystore(tmp_path / "server.pem", "server")),
        truststore_location=str(ca.write_truststore(tmp_path / "ca.pem")),
    )
    held: list[asyncio.StreamWriter] = []

    async def never_reads(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # After the handshake the peer reads nothing more: the client's close_notify goes unanswered.
        writer.transport.pause_reading()
        held.append(writer)

    server = await asyncio.start_server(never_reads, "127.0.0.1", 0, ssl=server_context(files))
    port = server.sockets[0].getsockname()[1]
    security = client_security_from_properties(
        {"security.protocol": "SSL", "ssl.truststore.location": files.truststore_location or ""}
    )
    try:
        client = await RpcClient.connect("127.0.0.1", port, security_protocol="SSL", security=security)
        started = time.monotonic()
        await client.close()
        assert time.monotonic() - started < 2.0
        assert client.closed
    finally:
        for writer in held:
            writer.transport.abort()
        server.close()
        await server.wait_closed()
