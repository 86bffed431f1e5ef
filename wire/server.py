"""The asyncio RPC server: reads frames, hands parsed requests to a handler, writes answers.

Requests on one connection are handled one at a time, in order, as Kafka's network layer
does (a controller's LeaderAndIsr must be applied before the UpdateMetadata behind it);
clients may still pipeline. Bad input never reaches the handler: it is answered with an
error code when the correlation id could be read, otherwise only that connection is closed.
Each case logs one line.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable

from wire.api import Response
from wire.context import RequestContext
from wire.envelope import ParsedRequest, encode_response, error_response, parse_request
from wire.errors import FrameError, UnknownServerError, WireError
from wire.frames import DEFAULT_MAX_FRAME_SIZE, NEED_DATA, FrameDecoder, encode_frame

log = logging.getLogger(__name__)

Handler = Callable[[ParsedRequest], Awaitable[Response]]
_READ_CHUNK = 256 * 1024


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
    ) -> None:
        self._handler = handler
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
            self._server = await asyncio.start_server(
                self._accept, self._host, self._port, reuse_address=True
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
        context = RequestContext(client_host=_host_of(peer))
        decoder = FrameDecoder(self._max_frame_size)
        try:
            while data := await reader.read(_READ_CHUNK):
                decoder.feed(data)
                while (frame := decoder.next_frame()) is not NEED_DATA:
                    assert isinstance(frame, bytes)
                    answer = await self._answer(frame, peer, context)
                    if answer is None:
                        return
                    writer.write(encode_frame(answer))
                await writer.drain()
            if decoder.buffered:
                log.warning("connection from %s ended inside a frame (%d bytes)", peer, decoder.buffered)
        except FrameError as e:
            log.warning("closing connection from %s: %s", peer, e.message)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass

    async def _answer(self, frame: bytes, peer: object, context: RequestContext) -> bytes | None:
        """The encoded response, or None when the connection must be closed."""
        try:
            request = parse_request(frame, context)
        except WireError as e:
            if e.correlation_id is None:
                log.warning("closing connection from %s: %s", peer, e.message)
                return None
            log.warning("bad request from %s: %s: %s", peer, e.code.name, e.message)
            return encode_response(e.correlation_id, error_response(e))
        response = await call_handler(self._handler, request, peer)
        return encode_response(request.header.correlation_id, response)


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
