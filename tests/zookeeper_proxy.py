"""A TCP proxy in front of a real ZooKeeper server that loses the answer to a write after the
server applied it, as a connection that drops at that moment does.

It forwards ZooKeeper's frames (a 4-byte length before each) both ways and looks at each
request's header (xid, opcode): the chosen write (the nth of the writes whose frame holds the
given bytes) goes through to the server, and when the server's answer to that xid comes back,
the proxy resets the client's connection instead of relaying it. The client reconnects, through
the proxy again, to the same session, and sends the write again. aiozk first asks a server
`srvr` on a connection of its own: a four-letter word is relayed as it is.

A reset (RST), not a close: aiozk hears of a reset at once, while a connection that is merely
closed it notices only when a heartbeat goes unanswered, by which time ZooKeeper may be
expiring the session (both take the session time-out), and the test would race it.

It runs its own event loop in a thread, so that a test's blocking calls (starting broker
processes, kazoo) do not hold it up.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
from collections.abc import Coroutine
from types import TracebackType
from typing import Any

# Create, create2, setData, delete and multi: the writes Keel sends.
WRITE_OPCODES = frozenset({1, 15, 5, 2, 14})
_LENGTH = 4


class ReplyLosingProxy:
    def __init__(
        self, target_port: int, *, matching: bytes, nth: int = 1, opcodes: frozenset[int] = WRITE_OPCODES
    ) -> None:
        self.target_port = target_port
        self.matching = matching
        self.nth = nth
        self.opcodes = opcodes
        self.port = 0
        # Answers lost so far (read from the test's thread; written only by the proxy's).
        self.lost = 0
        self._seen = 0
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, name="zk-reply-losing-proxy", daemon=True)
        self._connections: set[asyncio.Task[None]] = set()
        self._handlers: set[asyncio.Task[Any]] = set()
        self._lost_xids: set[int] = set()

    def start(self) -> ReplyLosingProxy:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the proxy did not start listening")
        return self

    def stop(self) -> None:
        if self._loop is not None and self._stopping is not None:
            self._loop.call_soon_threadsafe(self._stopping.set)
        self._thread.join(10)

    def __enter__(self) -> ReplyLosingProxy:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._serve())
        finally:
            loop.close()

    async def _serve(self) -> None:
        self._stopping = asyncio.Event()
        server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        async with server:
            await self._stopping.wait()
            for task in list(self._connections):
                task.cancel()
            await asyncio.gather(*self._connections, return_exceptions=True)
            # The handlers close the client's side once their forwarding ended: wait for them,
            # or the loop closes with them pending and their sockets are left to the collector.
            await asyncio.gather(*self._handlers, return_exceptions=True)

    async def _accept(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        handler = asyncio.current_task()
        assert handler is not None
        self._handlers.add(handler)
        handler.add_done_callback(self._handlers.discard)
        task = asyncio.create_task(self._forward(client_reader, client_writer))
        self._connections.add(task)
        task.add_done_callback(self._connections.discard)
        try:
            await asyncio.wait([task])
        finally:
            client_writer.close()
            with contextlib.suppress(OSError):
                await client_writer.wait_closed()

    async def _forward(
        self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter
    ) -> None:
        try:
            server_reader, server_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            return
        try:
            head = await client_reader.readexactly(_LENGTH)
            server_writer.write(head)
            if head.isalpha():
                await _both_ways(_raw(client_reader, server_writer), _raw(server_reader, client_writer))
                return
            # The connect request and its answer carry no xid.
            server_writer.write(await client_reader.readexactly(_length(head)))
            client_writer.write(await _frame(server_reader))
            doomed: set[int] = set()
            await _both_ways(
                self._requests(client_reader, server_writer, doomed),
                self._answers(server_reader, client_writer, doomed),
            )
            if doomed & self._lost_xids:
                _reset(client_writer)
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            server_writer.close()
            with contextlib.suppress(OSError):
                await server_writer.wait_closed()

    async def _requests(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, doomed: set[int]
    ) -> None:
        while True:
            frame = await _frame(reader)
            xid, opcode = struct.unpack_from(">ii", frame, _LENGTH)
            if opcode in self.opcodes and self.matching in frame:
                self._seen += 1
                if self._seen == self.nth:
                    doomed.add(xid)
            writer.write(frame)
            await writer.drain()

    async def _answers(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, doomed: set[int]
    ) -> None:
        while True:
            frame = await _frame(reader)
            (xid,) = struct.unpack_from(">i", frame, _LENGTH)
            if xid in doomed:
                # Applied by the server; the client never hears it: the connection ends here.
                self._lost_xids.add(xid)
                self.lost += 1
                return
            writer.write(frame)
            await writer.drain()


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with a reset: no lingering, so the peer's next read fails at once."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


def _length(head: bytes) -> int:
    return int.from_bytes(head, "big", signed=True)


async def _frame(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readexactly(_LENGTH)
    return head + await reader.readexactly(_length(head))


async def _raw(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while chunk := await reader.read(65536):
        writer.write(chunk)
        await writer.drain()


async def _both_ways(up: Coroutine[Any, Any, None], down: Coroutine[Any, Any, None]) -> None:
    """Until either direction ends; then both stop."""
    tasks = [asyncio.create_task(up), asyncio.create_task(down)]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
