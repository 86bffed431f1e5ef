"""A fault-injecting TCP proxy: what a network partition looks like to a broker.

Each broker's listener and each of its ZooKeeper connections go through a Link: a broker
advertises its proxy's address, so that clients, the controller and the other brokers'
fetchers all reach it through its link, and its zookeeper.connect names its own proxies of
the ensemble's servers. Cutting a link stalls its streams, one direction or both: nothing is
lost or reordered (TCP retransmits through a real partition), the bytes simply stop moving
until the link heals, so that time-outs, session expiry and ISR shrinking happen as they
would on a network; new connections are accepted and stall the same way.

A broker's listener proxy also knows where each connection comes from, without the brokers'
help: it reads the connection's first request frame, whose client_id names the broker that
opened it (`controller-<id>` is broker id's controller channel, `broker-<id>-fetcher` and
`broker-<id>-control` its replica link); anything else is a client. The frame is forwarded
unchanged and nothing after it is parsed. A connection from another broker then flows only
while the pair's link (PeerLinks) flows too, so two brokers can be cut from each other while
both still reach ZooKeeper, their other peers and the clients.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re

from wire.envelope import decode_request_header
from wire.errors import WireError
from wire.frames import DEFAULT_MAX_FRAME_SIZE

log = logging.getLogger(__name__)

CHUNK = 65536
# The 4-byte big-endian length before each frame (wire/frames.py).
LENGTH_SIZE = 4
# The client ids of a broker's own connections (node/broker/channel_manager.py, replica_link.py).
_BROKER_CLIENT_ID = re.compile(r"controller-(\d+)|broker-(\d+)-(?:fetcher|control)")

# The events that must all be set for bytes to move one way through one connection.
Gate = tuple[asyncio.Event, ...]


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


class PeerLinks:
    """The link between each two brokers, whichever of them opened a connection: cutting
    (a, b) stalls a's connections to b and b's connections to a, both directions of each.
    Cuts nest, so that two faults cutting one pair at once do not heal it for each other: the
    pair flows again when every cut has healed."""

    def __init__(self) -> None:
        self._links: dict[frozenset[int], Link] = {}
        self._cuts: dict[frozenset[int], int] = {}

    def link(self, a: int, b: int) -> Link:
        pair = frozenset((a, b))
        if pair not in self._links:
            self._links[pair] = Link("broker-" + "/".join(str(x) for x in sorted(pair)))
        return self._links[pair]

    def cut(self, a: int, b: int) -> None:
        if a == b:
            raise ValueError(f"broker {a} cannot be cut from itself")
        pair = frozenset((a, b))
        self._cuts[pair] = self._cuts.get(pair, 0) + 1
        self.link(a, b).cut()

    def heal(self, a: int, b: int) -> None:
        pair = frozenset((a, b))
        self._cuts[pair] = max(0, self._cuts.get(pair, 0) - 1)
        if not self._cuts[pair]:
            self.link(a, b).heal()

    def heal_all(self) -> None:
        self._cuts.clear()
        for link in self._links.values():
            link.heal()


def source_broker(payload: bytes) -> int | None:
    """The broker that sent a request frame, from its client_id; None for a client (or for
    what is not a request at all)."""
    try:
        client_id = decode_request_header(payload)[0].client_id
    except WireError:
        return None
    match = _BROKER_CLIENT_ID.fullmatch(client_id or "")
    if match is None:
        return None
    return int(match.group(1) or match.group(2))


class Proxy:
    """Listens on `port` (0: any free one) and forwards each connection to `target_port`.

    With `peers` and `broker` (the broker behind the proxy), each connection is identified
    by its first request frame, and one from another broker also needs the pair's link to
    flow. The server must not speak first (Keel's brokers answer requests only): nothing is
    forwarded to the client before the first frame has been read."""

    def __init__(
        self,
        link: Link,
        target_port: int,
        port: int = 0,
        *,
        peers: PeerLinks | None = None,
        broker: int | None = None,
    ) -> None:
        if (peers is None) != (broker is None):
            raise ValueError("peers and broker go together")
        self.link = link
        self.target_port = target_port
        self.port = port
        self.peers = peers
        self.broker = broker
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()

    async def start(self) -> Proxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    @property
    def connections(self) -> int:
        """Connections being forwarded (or waiting for their first frame)."""
        return len(self._connections)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await self._server.wait_closed()

    def drop(self) -> None:
        """Close every connection under way at once, both ends, as a server that dies or loses
        its quorum closes its clients'; new connections are accepted as before."""
        for task in list(self._connections):
            task.cancel()

    async def _accept(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        # The connection is served by a task of the proxy's own, which close() cancels: the
        # handler asyncio runs ends normally either way (a cancelled one is reported as an error).
        task = asyncio.create_task(self._forward(client_reader, client_writer))
        self._connections.add(task)
        task.add_done_callback(self._connections.discard)
        try:
            await asyncio.wait([task])
        finally:
            client_writer.close()

    async def _forward(
        self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter
    ) -> None:
        try:
            server_reader, server_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            # The target is down: the client sees a reset, as it would from the real port.
            return
        try:
            first = b""
            up: Gate = (self.link.to_server,)
            down: Gate = (self.link.to_client,)
            if self.peers is not None and self.broker is not None:
                frame = await _first_frame(client_reader)
                if frame is None:
                    return  # the client left before it sent a whole frame
                first, source = frame
                if source is not None:
                    pair = self.peers.link(source, self.broker)
                    up, down = (*up, pair.to_server), (*down, pair.to_client)
            await _relay(
                asyncio.create_task(_pump(client_reader, server_writer, up, first)),
                asyncio.create_task(_pump(server_reader, client_writer, down)),
            )
        finally:
            server_writer.close()


async def _first_frame(reader: asyncio.StreamReader) -> tuple[bytes, int | None] | None:
    """The connection's first frame, byte for byte, and the broker that sent it (None for a
    client); None when the stream ends before a whole frame. A length no request can have is
    a client's business: it is forwarded as it is, for the server to refuse."""
    try:
        prefix = await reader.readexactly(LENGTH_SIZE)
        length = int.from_bytes(prefix, "big", signed=True)
        if not 0 <= length <= DEFAULT_MAX_FRAME_SIZE:
            return prefix, None
        payload = await reader.readexactly(length)
    except (OSError, asyncio.IncompleteReadError):
        return None
    return prefix + payload, source_broker(payload)


async def _relay(up: asyncio.Task[None], down: asyncio.Task[None]) -> None:
    """Until either direction ends (or the proxy closes); then both stop."""
    try:
        await asyncio.wait([up, down], return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (up, down):
            task.cancel()
        await asyncio.gather(up, down, return_exceptions=True)


async def _flowing(gate: Gate) -> None:
    while not all(event.is_set() for event in gate):
        for event in gate:
            await event.wait()


async def _pump(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, gate: Gate, first: bytes = b""
) -> None:
    with contextlib.suppress(OSError, asyncio.IncompleteReadError):
        data = first
        while True:
            if data:
                # Cut while this chunk was on its way: it waits for the heal, as a packet
                # retransmitted through a partition would.
                await _flowing(gate)
                if writer.is_closing():
                    return
                writer.write(data)
                await writer.drain()
            await _flowing(gate)
            data = await reader.read(CHUNK)
            if not data:
                return
