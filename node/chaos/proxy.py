"""A fault-injecting TCP proxy: what a network partition looks like to a broker.

Each broker's listener and each of its ZooKeeper connections go through a Link: a broker
advertises its proxy's address, so that clients, the controller and the other brokers'
fetchers all reach it through its link, and its zookeeper.connect names its own proxies of
the ensemble's servers. Cutting a link stalls its streams, one direction or both: nothing is
lost or reordered (TCP retransmits through a real partition), the bytes simply stop moving
until the link heals, so that time-outs, session expiry and ISR shrinking happen as they
would on a network; new connections are accepted and stall the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

log = logging.getLogger(__name__)

CHUNK = 65536


class Link:
    """Whether bytes flow each way: `to_server` (requests) and `to_client` (answers)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.to_server = asyncio.Event()
        self.to_client = asyncio.Event()
        self.heal()

    def cut(self, *, to_server: bool = True, to_client: bool = True) -> None:
        if to_server:
            self.to_server.clear()
        if to_client:
            self.to_client.clear()

    def heal(self) -> None:
        self.to_server.set()
        self.to_client.set()

    @property
    def healthy(self) -> bool:
        return self.to_server.is_set() and self.to_client.is_set()


class Proxy:
    """Listens on `port` (0: any free one) and forwards each connection to `target_port`."""

    def __init__(self, link: Link, target_port: int, port: int = 0) -> None:
        self.link = link
        self.target_port = target_port
        self.port = port
        self._server: asyncio.Server | None = None
        self._pumps: set[asyncio.Task[None]] = set()

    async def start(self) -> Proxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._pumps):
            task.cancel()
        await asyncio.gather(*self._pumps, return_exceptions=True)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await self._server.wait_closed()

    def drop(self) -> None:
        """Close every connection under way at once, both ends, as a server that dies or loses
        its quorum closes its clients'; new connections are accepted as before."""
        for task in list(self._pumps):
            task.cancel()

    async def _accept(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        try:
            server_reader, server_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            # The target is down: the client sees a reset, as it would from the real port.
            client_writer.close()
            return
        up = asyncio.create_task(self._pump(client_reader, server_writer, self.link.to_server))
        down = asyncio.create_task(self._pump(server_reader, client_writer, self.link.to_client))
        for task in (up, down):
            self._pumps.add(task)
            task.add_done_callback(self._pumps.discard)
        await asyncio.wait([up, down], return_when=asyncio.FIRST_COMPLETED)
        for task in (up, down):
            task.cancel()
        for writer in (client_writer, server_writer):
            writer.close()

    @staticmethod
    async def _pump(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter, flowing: asyncio.Event
    ) -> None:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            while True:
                await flowing.wait()
                data = await reader.read(CHUNK)
                if not data:
                    return
                # Cut while this chunk was on its way: it waits for the heal, as a packet
                # retransmitted through a partition would.
                await flowing.wait()
                if writer.is_closing():
                    return
                writer.write(data)
                await writer.drain()
