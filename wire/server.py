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

Hostile clients meet Kafka's limits here: the connection counts of `wire/connection_quotas.py`
(checked by the server's own accept loop), `connections.max.idle.ms` (a connection that sends
nothing, or takes none of its answers, for that long is closed, a stalled partial frame
included), `socket.request.max.bytes` (a frame's declared length, refused before its body is
buffered; a partial frame holds only the bytes that arrived), and on SASL listeners Kafka's
`sasl.server.max.receive.size` and Keel's `sasl.server.authentication.timeout.ms` until the
connection has authenticated. Refusals are logged rate-limited (`RefusalLog`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import logging
import os
import socket
import ssl
from collections.abc import Awaitable, Callable
from typing import Protocol

from wire.api import ApiKey, Response
from wire.connection_quotas import ConnectionQuotas
from wire.context import ANONYMOUS, RequestContext
from wire.envelope import ParsedRequest, encode_response, error_response, parse_request
from wire.errors import FrameError, IllegalSaslState, UnknownServerError, WireError
from wire.frames import DEFAULT_MAX_FRAME_SIZE, NEED_DATA, FrameDecoder, encode_frame
from wire.request_memory import HeldRequestBytes
from wire.sasl import SaslServer
from wire.security import PLAINTEXT_LISTENER, ListenerSecurity, uses_sasl, uses_tls
from wire.tls import certificate_principal

log = logging.getLogger(__name__)

Handler = Callable[[ParsedRequest], Awaitable[Response]]
_READ_CHUNK = 256 * 1024
_SASL_KEYS = (ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE)
# Connections waiting for the acceptor (max.connections) stay in the kernel's queue.
_BACKLOG = socket.SOMAXCONN
_ACCEPT_RETRY_S = 0.1
# Kafka gives a TLS handshake the connection's whole setup time; a peer that stalls in it
# holds only its own connection.
_TLS_HANDSHAKE_TIMEOUT_S = 10.0


class WireFormat(Protocol):
    """How a listener's frames hold requests and answers: Keel's msgpack envelope, or
    Kafka's binary protocol (`wire/kafka/listener.py`). Either way the handler sees Keel's
    requests and gives Keel's answers."""

    def parse(self, frame: bytes, context: RequestContext) -> ParsedRequest:
        """The request in `frame`; raises WireError, carrying the correlation id when the
        request should be answered with the error rather than its connection closed."""
        ...

    def encode(self, request: ParsedRequest, response: Response) -> bytes | None:
        """The frame payload answering `request`; None when no answer is sent."""
        ...

    def refuse(self, error: WireError) -> bytes:
        """The answer to a request `parse` refused with a correlation id."""
        ...


class _MsgpackFormat:
    """Keel's own wire: `[api_key, api_version, correlation_id, client_id, body]`."""

    def parse(self, frame: bytes, context: RequestContext) -> ParsedRequest:
        return parse_request(frame, context)

    def encode(self, request: ParsedRequest, response: Response) -> bytes | None:
        return encode_response(request.header.correlation_id, response)

    def refuse(self, error: WireError) -> bytes:
        assert error.correlation_id is not None
        return encode_response(error.correlation_id, error_response(error))


MSGPACK: WireFormat = _MsgpackFormat()


class ListenerUnavailable(OSError):
    """The listener's address cannot be bound: the port is in use, the host is not this
    machine's, or the port needs privileges."""


class RpcServer:
    """One listener. `quotas` are shared by all the listeners of a process (the broker-wide
    `max.connections`); each server makes its own when given none."""

    def __init__(
        self,
        handler: Handler,
        host: str,
        port: int,
        *,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        security: ListenerSecurity = PLAINTEXT_LISTENER,
        quotas: ConnectionQuotas | None = None,
        wire_format: WireFormat = MSGPACK,
    ) -> None:
        self._handler = handler
        self._format = wire_format
        self._security = security
        self._host = host
        self._port = port
        self._max_frame_size = max_frame_size
        self._quotas = quotas or ConnectionQuotas()
        self._quotas.register_listener(security.listener_name)
        self._refusals = self._quotas.refusals
        self._tls = security.ssl_context if uses_tls(security.security_protocol) else None
        self._sockets: list[socket.socket] = []
        self._acceptors: list[asyncio.Task[None]] = []
        # Each connection's task and its socket (closed here too for a task cancelled by
        # close() before it ever ran).
        self._connections: dict[asyncio.Task[None], socket.socket] = {}

    @property
    def port(self) -> int:
        """The bound port (the real one when 0 was asked for)."""
        if not self._sockets:
            return self._port
        return int(self._sockets[0].getsockname()[1])

    async def start(self) -> None:
        self._sockets = await _bind(self._host, self._port)
        for listening in self._sockets:
            self._acceptors.append(
                asyncio.create_task(
                    self._accept_loop(listening), name=f"accept-{self._security.listener_name}"
                )
            )

    async def close(self) -> None:
        for task in self._acceptors:
            task.cancel()
        await asyncio.gather(*self._acceptors, return_exceptions=True)
        for listening in self._sockets:
            listening.close()
        connections = dict(self._connections)
        for task in connections:
            task.cancel()
        await asyncio.gather(*connections, return_exceptions=True)
        for sock in connections.values():
            sock.close()

    def _forget(self, task: asyncio.Task[None]) -> None:
        self._connections.pop(task, None)

    async def _accept_loop(self, listening: socket.socket) -> None:
        """Kafka's acceptor: wait for a slot under max.connections, accept, refuse an address
        over max.connections.per.ip, and give the connection its own task."""
        loop = asyncio.get_running_loop()
        listener = self._security.listener_name
        while True:
            await self._quotas.wait_for_slot(listener)
            try:
                sock, address = await loop.sock_accept(listening)
            except OSError as e:
                # Out of file descriptors or memory (EMFILE, ENFILE, ENOBUFS): the pending
                # connection stays in the backlog; try again shortly rather than spin.
                self._refusals.report("accept", "cannot accept on %s: %s", listener, _reason(e))
                await asyncio.sleep(_ACCEPT_RETRY_S)
                continue
            host = _host_of(address)
            if not self._quotas.admit(listener, host):
                sock.close()
                continue
            task = asyncio.create_task(self._connection(sock, host, address))
            self._connections[task] = sock
            task.add_done_callback(self._forget)

    async def _connection(self, sock: socket.socket, host: str, peer: object) -> None:
        loop = asyncio.get_running_loop()
        accepted_at = loop.time()
        writer: asyncio.StreamWriter | None = None
        try:
            reader = asyncio.StreamReader()
            protocol = asyncio.StreamReaderProtocol(reader)
            try:
                transport, _ = await loop.connect_accepted_socket(
                    lambda: protocol,
                    sock,
                    ssl=self._tls,
                    ssl_handshake_timeout=_TLS_HANDSHAKE_TIMEOUT_S if self._tls else None,
                )
            except (OSError, ssl.SSLError, TimeoutError) as e:
                # The transport closed the socket; a scan or a client with the wrong CA.
                self._refusals.report("tls", "TLS handshake with %s failed: %s", peer, e)
                return
            writer = asyncio.StreamWriter(transport, protocol, reader, loop)
            connection = _Connection(self._security, host, writer.get_extra_info("ssl_object"))
            await self._serve(reader, writer, peer, connection, accepted_at)
        except Exception:
            # A bug, not bad input (that is handled where it is read): this connection
            # closes and the others go on, as Kafka's Processor closes a channel it fails on.
            log.exception("connection from %s failed; closing it", peer)
        finally:
            self._quotas.release(self._security.listener_name, host)
            if writer is not None:
                writer.close()

    async def _serve(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        peer: object,
        connection: _Connection,
        accepted_at: float,
    ) -> None:
        """Read, answer, write, until the peer hangs up or a limit closes the connection:
        `connections.max.idle.ms` while waiting for bytes or for the peer to take the
        answers (never while a request is handled: a Fetch may wait), and on a SASL listener
        the authentication deadline and the smaller frame limit until it has authenticated."""
        loop = asyncio.get_running_loop()
        idle_s = self._quotas.limits.connections_max_idle_ms / 1000
        authenticate_by = accepted_at + self._security.authentication_timeout_ms / 1000
        decoder = FrameDecoder(self._max_frame_size)
        if not connection.authenticated:
            decoder.max_frame_size = min(self._max_frame_size, self._security.sasl_max_receive_size)
        waiting = "idle"
        held = HeldRequestBytes(self._quotas.request_memory)
        try:
            async with asyncio.timeout(None) as deadline:
                while True:
                    waiting = "idle" if connection.authenticated else "authentication"
                    deadline.reschedule(
                        loop.time() + idle_s
                        if connection.authenticated
                        else min(loop.time() + idle_s, authenticate_by)
                    )
                    data = await reader.read(_READ_CHUNK)
                    if not data:
                        break
                    decoder.feed(data)
                    deadline.reschedule(None)
                    while (frame := decoder.next_frame()) is not NEED_DATA:
                        assert isinstance(frame, bytes)
                        await held.hold(len(frame))
                        answer, keep_open = await self._answer(frame, peer, connection, held)
                        if connection.authenticated:
                            decoder.max_frame_size = self._max_frame_size
                        if answer is not None:
                            writer.write(encode_frame(answer))
                        # One answer at a time beyond the transport's high-water mark (64
                        # KiB), as Kafka mutes a channel until its response is sent: a
                        # client that pipelines thousands of Fetches in one read and never
                        # reads is not answered all of them into memory at once.
                        waiting = "write"
                        deadline.reschedule(loop.time() + idle_s)
                        await writer.drain()
                        deadline.reschedule(None)
                        if not keep_open:
                            return
                    # The next frame's bytes are read only once the pool has room for all
                    # of them (Kafka allocates a request's buffer when its size arrives).
                    await held.hold(decoder.pending_length() or 0)
            if decoder.buffered:
                self._refusals.report(
                    "torn frame", "connection from %s ended inside a frame (%d bytes)", peer, decoder.buffered
                )
        except TimeoutError:
            self._log_timeout(waiting, peer, decoder.buffered)
        except FrameError as e:
            self._refusals.report("frame", "closing connection from %s: %s", peer, e.message)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            held.release()

    def _log_timeout(self, waiting: str, peer: object, buffered: int) -> None:
        if waiting == "authentication":
            self._refusals.report(
                "authentication timeout",
                "closing connection from %s: not authenticated within %d ms"
                " (sasl.server.authentication.timeout.ms)",
                peer,
                self._security.authentication_timeout_ms,
            )
        elif waiting == "write":
            self._refusals.report(
                "write timeout",
                "closing connection from %s: it took no answer for %d ms (connections.max.idle.ms)",
                peer,
                self._quotas.limits.connections_max_idle_ms,
            )
        elif buffered:
            self._refusals.report(
                "stalled frame",
                "closing connection from %s: %d bytes of a frame, then nothing for %d ms"
                " (connections.max.idle.ms)",
                peer,
                buffered,
                self._quotas.limits.connections_max_idle_ms,
            )
        else:
            self._refusals.report(
                "idle",
                "closing connection from %s: idle for %d ms (connections.max.idle.ms)",
                peer,
                self._quotas.limits.connections_max_idle_ms,
            )

    async def _answer(
        self, frame: bytes, peer: object, connection: _Connection, held: HeldRequestBytes
    ) -> tuple[bytes | None, bool]:
        """The encoded response (None: none), and whether the connection stays open. The
        frame's bytes are `held` until it is parsed."""
        try:
            request = self._format.parse(frame, connection.context)
        except WireError as e:
            held.release()
            if e.correlation_id is None:
                self._refusals.report("frame", "closing connection from %s: %s", peer, e.message)
                return None, False
            self._refusals.report("bad request", "bad request from %s: %s: %s", peer, e.code.name, e.message)
            return self._format.refuse(e), True
        held.release()
        if connection.sasl is not None:
            step = connection.sasl.receive(request.body)
            if step is not None:
                if step.failed_authentication:
                    self._refusals.report(
                        "failed authentication", "failed authentication from %s: %s", peer, step.reason
                    )
                    # Kafka's connection.failed.authentication.delay.ms: the answer, and the
                    # close after it, wait; only this connection's task sleeps.
                    await asyncio.sleep(self._security.failed_authentication_delay_ms / 1000)
                elif step.close:
                    self._refusals.report("sasl", "closing connection from %s: %s", peer, step.reason)
                connection.authenticated_as(connection.sasl.principal)
                answer = None if step.response is None else self._format.encode(request, step.response)
                return answer, not step.close
        elif request.spec.key in _SASL_KEYS:
            # Kafka's KafkaApis: SASL requests on a listener without SASL.
            error = IllegalSaslState(
                f"{request.spec.key.name} on listener {connection.context.listener_name}"
            )
            return self._format.encode(request, error_response(error)), True
        response = await call_handler(self._handler, request, peer)
        return self._format.encode(request, response), True


_CONNECTION_IDS = itertools.count(1)


class _Connection:
    """One connection's security state: its request context, and its SASL exchange on a
    SASL listener. A verified client certificate names the principal from the start."""

    def __init__(self, security: ListenerSecurity, client_host: str, ssl_object: object) -> None:
        self.context = RequestContext(
            principal=certificate_principal(ssl_object) or ANONYMOUS,
            client_host=client_host,
            listener_name=security.listener_name,
            security_protocol=security.security_protocol,
            connection_id=next(_CONNECTION_IDS),
        )
        self.sasl: SaslServer | None = None
        if uses_sasl(security.security_protocol):
            self.sasl = SaslServer(
                security.sasl_mechanisms,
                security.credentials,
                tls=uses_tls(security.security_protocol),
                plain_users=security.plain_users,
            )

    @property
    def authenticated(self) -> bool:
        """Whether requests other than the SASL exchange and ApiVersions may come (always,
        on a listener without SASL)."""
        return self.sasl is None or self.sasl.authenticated

    def authenticated_as(self, principal: str | None) -> None:
        if principal is not None and principal != self.context.principal:
            self.context = dataclasses.replace(self.context, principal=principal)


def _host_of(peer: object) -> str:
    """The client's address from a socket's peer name (a tuple for IP, a string for a Unix
    socket)."""
    if isinstance(peer, tuple) and peer:
        return str(peer[0])
    return "" if peer is None else str(peer)


async def _bind(host: str, port: int) -> list[socket.socket]:
    """Listening sockets on every address `host` resolves to (as asyncio's start_server
    binds them), accepted from by Keel's own loop so that max.connections can hold it back."""
    sockets: list[socket.socket] = []
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
        for family, kind, proto, _, address in dict.fromkeys(infos):
            listening = socket.socket(family, kind, proto)
            sockets.append(listening)
            listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                listening.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            listening.bind(address)
            listening.listen(_BACKLOG)
            listening.setblocking(False)
    except OSError as e:
        for listening in sockets:
            listening.close()
        raise ListenerUnavailable(f"cannot listen on {host}:{port}: {_reason(e)}") from e
    return sockets


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
