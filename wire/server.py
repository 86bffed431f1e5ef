"""The asyncio RPC server: reads frames, hands parsed requests to a handler, writes answers.

Requests on one connection are handled one at a time, in order, as Kafka's network layer
does (a controller's LeaderAndIsr must be applied before the UpdateMetadata behind it);
clients may still pipeline. Bad input never reaches the handler: it is answered with an
error code when the correlation id could be read, otherwise only that connection is closed.
Each case logs one line.

A listener's security (`wire/security.py`) is applied here, once for every handler: TLS
wraps the socket before the first byte is read, and on a SASL listener each request first
goes through the connection's `SaslServer` (`wire/sasl.py`), which answers the SASL exchange
itself and closes a connection that sends anything else before it authenticated. The
connection's `RequestContext` carries the principal it authenticated as.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
from collections.abc import Awaitable, Callable

from wire.api import ApiKey, Response
from wire.context import ANONYMOUS, RequestContext
from wire.envelope import ParsedRequest, encode_response, error_response, parse_request
from wire.errors import FrameError, IllegalSaslState, UnknownServerError, WireError
from wire.frames import DEFAULT_MAX_FRAME_SIZE, NEED_DATA, FrameDecoder, encode_frame
from wire.sasl import SaslServer
from wire.security import PLAINTEXT_LISTENER, ListenerSecurity, uses_sasl, uses_tls
from wire.tls import certificate_principal

log = logging.getLogger(__name__)

Handler = Callable[[ParsedRequest], Awaitable[Response]]
_READ_CHUNK = 256 * 1024
_SASL_KEYS = (ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE)
# Kafka gives a TLS handshake the connection's whole setup time; a peer that stalls in it
# holds only its own connection.
_TLS_HANDSHAKE_TIMEOUT_S = 10.0


class ListenerUnavailable(OSError):
    """The listener's address cannot be bound: the port is in use, the host is not this
    machine's, or the port needs privileges."""


class RpcServer:
    def __init__(
        self,
        handler: Handler,
        host: str,
        port: int,
        *,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        security: ListenerSecurity = PLAINTEXT_LISTENER,
    ) -> None:
        self._handler = handler
        self._security = security
        self._host = host
        self._port = port
        self._max_frame_size = max_frame_size
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()

    @property
    def port(self) -> int:
        """The bound port (the real one when 0 was asked for)."""
        if self._server is None or not self._server.sockets:
            return self._port
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self) -> None:
        try:
            tls = self._security.ssl_context if uses_tls(self._security.security_protocol) else None
            self._server = await asyncio.start_server(
                self._accept,
                self._host,
                self._port,
                reuse_address=True,
                ssl=tls,
                ssl_handshake_timeout=_TLS_HANDSHAKE_TIMEOUT_S if tls else None,
            )
        except OSError as e:
            raise ListenerUnavailable(f"cannot listen on {self._host}:{self._port}: {_reason(e)}") from e

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.gather(*self._connections, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            await self._serve(reader, writer)
        except asyncio.CancelledError:
            # close() cancels the connections. The task must still end normally: the stream
            # protocol's done-callback (asyncio before 3.12) calls task.exception(), which
            # raises for a cancelled task and logs "Exception in callback" on every stop.
            pass
        finally:
            self._connections.discard(task)
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        connection = _Connection(self._security, _host_of(peer), writer.get_extra_info("ssl_object"))
        decoder = FrameDecoder(self._max_frame_size)
        try:
            while data := await reader.read(_READ_CHUNK):
                decoder.feed(data)
                while (frame := decoder.next_frame()) is not NEED_DATA:
                    assert isinstance(frame, bytes)
                    answer, keep_open = await self._answer(frame, peer, connection)
                    if answer is not None:
                        writer.write(encode_frame(answer))
                    if not keep_open:
                        await writer.drain()
                        return
                await writer.drain()
            if decoder.buffered:
                log.warning("connection from %s ended inside a frame (%d bytes)", peer, decoder.buffered)
        except FrameError as e:
            log.warning("closing connection from %s: %s", peer, e.message)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass

    async def _answer(self, frame: bytes, peer: object, connection: _Connection) -> tuple[bytes | None, bool]:
        """The encoded response (None: none), and whether the connection stays open."""
        try:
            request = parse_request(frame, connection.context)
        except WireError as e:
            if e.correlation_id is None:
                log.warning("closing connection from %s: %s", peer, e.message)
                return None, False
            log.warning("bad request from %s: %s: %s", peer, e.code.name, e.message)
            return encode_response(e.correlation_id, error_response(e)), True
        correlation_id = request.header.correlation_id
        if connection.sasl is not None:
            step = connection.sasl.receive(request.body)
            if step is not None:
                if step.failed_authentication:
                    log.warning("failed authentication from %s: %s", peer, step.reason)
                    # Kafka's connection.failed.authentication.delay.ms: the answer, and the
                    # close after it, wait; only this connection's task sleeps.
                    await asyncio.sleep(self._security.failed_authentication_delay_ms / 1000)
                elif step.close:
                    log.warning("closing connection from %s: %s", peer, step.reason)
                connection.authenticated(connection.sasl.principal)
                answer = None if step.response is None else encode_response(correlation_id, step.response)
                return answer, not step.close
        elif request.spec.key in _SASL_KEYS:
            # Kafka's KafkaApis: SASL requests on a listener without SASL.
            error = IllegalSaslState(
                f"{request.spec.key.name} on listener {connection.context.listener_name}"
            )
            return encode_response(correlation_id, error_response(error)), True
        response = await call_handler(self._handler, request, peer)
        return encode_response(correlation_id, response), True


class _Connection:
    """One connection's security state: its request context, and its SASL exchange on a
    SASL listener. A verified client certificate names the principal from the start."""

    def __init__(self, security: ListenerSecurity, client_host: str, ssl_object: object) -> None:
        self.context = RequestContext(
            principal=certificate_principal(ssl_object) or ANONYMOUS,
            client_host=client_host,
            listener_name=security.listener_name,
            security_protocol=security.security_protocol,
        )
        self.sasl: SaslServer | None = None
        if uses_sasl(security.security_protocol):
            self.sasl = SaslServer(
                security.sasl_mechanisms,
                security.credentials,
                tls=uses_tls(security.security_protocol),
                plain_users=security.plain_users,
            )

    def authenticated(self, principal: str | None) -> None:
        if principal is not None and principal != self.context.principal:
            self.context = dataclasses.replace(self.context, principal=principal)


def _host_of(peer: object) -> str:
    """The client's address from a socket's peer name (a tuple for IP, a string for a Unix
    socket)."""
    if isinstance(peer, tuple) and peer:
        return str(peer[0])
    return "" if peer is None else str(peer)


def _reason(e: OSError) -> str:
    """The system's words for a bind failure, without the event loop's own wrapping of them
    (resolver errors have negative numbers and their own text)."""
    if e.errno is not None and e.errno > 0:
        return os.strerror(e.errno).lower()
    return e.strerror or str(e)


async def call_handler(handler: Handler, request: ParsedRequest, peer: object) -> Response:
    """The handler's answer, with a failure turned into the error response a peer would get."""
    try:
        return await handler(request)
    except WireError as e:
        return error_response(e)
    except Exception as e:
        log.exception("%s from %s failed", request.spec.key.name, peer)
        return error_response(UnknownServerError(f"{type(e).__name__}: {e}"))
