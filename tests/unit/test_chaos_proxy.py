"""The chaos proxy over loopback sockets: a cut link stalls its streams (nothing lost, nothing
reordered) until it heals, one direction or both, for old and new connections alike; a cut
between two brokers stalls only the connections one of them opened to the other, told apart
by their first request frame."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest

from node.chaos.proxy import Link, PeerLinks, Proxy, source_broker
from tests.support import eventually
from wire.api.api_versions import ApiVersionsRequest, ApiVersionsResponse
from wire.api.keys import ApiKey
from wire.client import RpcClient
from wire.envelope import RequestHeader, decode_request_header, encode_request, encode_response
from wire.frames import NEED_DATA, FrameDecoder, encode_frame


@pytest.fixture
async def echo() -> AsyncIterator[int]:
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(1024):
            writer.write(data)
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    yield server.sockets[0].getsockname()[1]
    server.close()


async def exchange(port: int, payload: bytes, timeout: float) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(payload)
        return await asyncio.wait_for(reader.readexactly(len(payload)), timeout)
    finally:
        writer.close()


async def test_a_healthy_link_forwards(echo: int) -> None:
    proxy = await Proxy(Link("l"), echo).start()
    try:
        assert await exchange(proxy.port, b"hello", 5) == b"hello"
    finally:
        await proxy.close()


@pytest.mark.parametrize("cut", [{}, {"to_server": False}, {"to_client": False}])
async def test_a_cut_link_stalls_until_it_heals(echo: int, cut: dict[str, bool]) -> None:
    link = Link("l")
    proxy = await Proxy(link, echo).start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        writer.write(b"one")
        assert await asyncio.wait_for(reader.readexactly(3), 5) == b"one"
        link.cut(**cut)
        assert not link.healthy
        writer.write(b"two")
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(reader.readexactly(3), 0.3)
        link.heal()
        # Nothing was lost while the link was down: the stream goes on where it stopped.
        assert await asyncio.wait_for(reader.readexactly(3), 5) == b"two"
        writer.close()
    finally:
        await proxy.close()


async def test_new_connections_stall_on_a_cut_link(echo: int) -> None:
    link = Link("l")
    proxy = await Proxy(link, echo).start()
    try:
        link.cut()
        attempt = asyncio.create_task(exchange(proxy.port, b"late", 10))
        done, _ = await asyncio.wait([attempt], timeout=0.3)
        assert not done
        link.heal()
        assert await attempt == b"late"
    finally:
        await proxy.close()


async def test_a_target_that_is_down_resets_the_connection() -> None:
    proxy = await Proxy(Link("l"), 1).start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        assert await asyncio.wait_for(reader.read(10), 5) == b""
        writer.close()
    finally:
        await proxy.close()


async def test_dropping_closes_the_connections_under_way_and_accepts_new_ones(echo: int) -> None:
    proxy = await Proxy(Link("l"), echo).start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        writer.write(b"one")
        assert await asyncio.wait_for(reader.readexactly(3), 5) == b"one"
        proxy.drop()
        assert await asyncio.wait_for(reader.read(), 5) == b""
        writer.close()
        assert await exchange(proxy.port, b"again", 5) == b"again"
    finally:
        await proxy.close()


# --- cuts between two brokers: the proxy reads who a connection comes from ---


def request_frame(client_id: str | None, correlation_id: int = 1) -> bytes:
    header = RequestHeader(int(ApiKey.API_VERSIONS), 0, correlation_id, client_id)
    return encode_frame(encode_request(header, ApiVersionsRequest()))


@pytest.mark.parametrize(
    ("client_id", "broker"),
    [
        ("controller-3", 3),
        ("broker-2-fetcher", 2),
        ("broker-12-control", 12),
        ("keel-admin", None),
        ("chaos-producer-chaos-a", None),
        ("broker-2", None),
        ("controller-", None),
        (None, None),
    ],
)
def test_the_first_frame_names_the_broker_that_sent_it(client_id: str | None, broker: int | None) -> None:
    assert source_broker(request_frame(client_id)[4:]) == broker


def test_what_is_not_a_request_comes_from_a_client() -> None:
    assert source_broker(b"\x00\x01not msgpack") is None
    assert source_broker(encode_frame(b"\x93\x01\x02\x03")[4:]) is None


class Backend:
    """A server that hands each accepted connection's ends to the test, so that each direction
    is written and read on its own."""

    def __init__(self) -> None:
        self.accepted: asyncio.Queue[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = asyncio.Queue()
        self.server: asyncio.Server | None = None

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await self.accepted.put((reader, writer))

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])

    async def next(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await asyncio.wait_for(self.accepted.get(), 5)


class Connection:
    """Both ends of one connection through a proxy: the client's and the server's."""

    def __init__(
        self,
        client: tuple[asyncio.StreamReader, asyncio.StreamWriter],
        server: tuple[asyncio.StreamReader, asyncio.StreamWriter],
    ) -> None:
        self.client_reader, self.client_writer = client
        self.server_reader, self.server_writer = server

    async def request_arrives(self, payload: bytes, timeout: float = 5) -> bool:
        self.client_writer.write(payload)
        return await arrives(self.server_reader, payload, timeout)

    async def answer_arrives(self, payload: bytes, timeout: float = 5) -> bool:
        self.server_writer.write(payload)
        return await arrives(self.client_reader, payload, timeout)

    def close(self) -> None:
        self.client_writer.close()
        self.server_writer.close()


async def arrives(reader: asyncio.StreamReader, payload: bytes, timeout: float) -> bool:
    """Whether `payload` comes through within `timeout`; what is held stays in the reader."""
    try:
        got = await asyncio.wait_for(reader.readexactly(len(payload)), timeout)
    except TimeoutError:
        return False
    assert got == payload
    return True


# How long a stalled stream is watched for bytes that must not come through.
STALL_S = 0.3


@pytest.fixture
async def backend() -> AsyncIterator[Backend]:
    backend = Backend()
    await backend.start()
    yield backend
    assert backend.server is not None
    backend.server.close()


@pytest.fixture
async def brokers(backend: Backend) -> AsyncIterator[tuple[PeerLinks, dict[int, Proxy]]]:
    """Brokers 1, 2 and 3's listener proxies (all in front of the one backend)."""
    peers = PeerLinks()
    assert backend.server is not None
    port = backend.server.sockets[0].getsockname()[1]
    proxies = {b: await Proxy(Link(f"broker-{b}"), port, peers=peers, broker=b).start() for b in (1, 2, 3)}
    yield peers, proxies
    for proxy in proxies.values():
        await proxy.close()


async def connect(backend: Backend, proxy: Proxy, client_id: str | None) -> Connection:
    """A connection whose first request frame (sent here) has come through byte for byte."""
    client = await asyncio.open_connection("127.0.0.1", proxy.port)
    connection = Connection(client, await backend.next())
    assert await connection.request_arrives(request_frame(client_id))
    return connection


@pytest.mark.parametrize(
    ("server", "client_id"),
    [
        (1, "broker-2-fetcher"),
        (1, "broker-2-control"),
        (1, "controller-2"),
        (2, "broker-1-fetcher"),
        (2, "controller-1"),
    ],
)
async def test_a_pair_cut_stalls_the_connections_between_the_two_brokers_both_ways(
    backend: Backend, brokers: tuple[PeerLinks, dict[int, Proxy]], server: int, client_id: str
) -> None:
    peers, proxies = brokers
    between = await connect(backend, proxies[server], client_id)
    from_a_client = await connect(backend, proxies[server], "keel-admin")
    from_broker_3 = await connect(backend, proxies[server], "broker-3-fetcher")
    peers.cut(1, 2)
    assert not await between.request_arrives(b"request", STALL_S)
    assert not await between.answer_arrives(b"answer", STALL_S)
    # The clients and the third broker still reach the server, both ways.
    for other in (from_a_client, from_broker_3):
        assert await other.request_arrives(b"produce")
        assert await other.answer_arrives(b"acknowledged")
    peers.heal(1, 2)
    # What was held comes through, in order, nothing lost.
    assert await arrives(between.server_reader, b"request", 5)
    assert await arrives(between.client_reader, b"answer", 5)
    assert await between.request_arrives(b"after")
    for connection in (between, from_a_client, from_broker_3):
        connection.close()


async def test_new_connections_between_cut_brokers_stall_until_the_pair_heals(
    backend: Backend, brokers: tuple[PeerLinks, dict[int, Proxy]]
) -> None:
    peers, proxies = brokers
    peers.cut(2, 1)
    client = await asyncio.open_connection("127.0.0.1", proxies[1].port)
    connection = Connection(client, await backend.next())
    frame = request_frame("broker-2-fetcher")
    assert not await connection.request_arrives(frame, STALL_S)
    peers.heal(1, 2)
    assert await arrives(connection.server_reader, frame, 5)
    connection.close()


async def test_cuts_of_one_pair_nest(backend: Backend, brokers: tuple[PeerLinks, dict[int, Proxy]]) -> None:
    peers, proxies = brokers
    between = await connect(backend, proxies[1], "controller-2")
    peers.cut(1, 2)
    peers.cut(2, 1)
    peers.heal(1, 2)
    # One of the two faults healed; the other still holds the pair cut.
    assert not await between.request_arrives(b"request", STALL_S)
    peers.heal(2, 1)
    assert await arrives(between.server_reader, b"request", 5)
    peers.cut(1, 2)
    peers.heal_all()
    assert await between.request_arrives(b"again")
    between.close()
    with pytest.raises(ValueError, match="itself"):
        peers.cut(3, 3)


async def test_the_servers_link_still_cuts_every_connection(
    backend: Backend, brokers: tuple[PeerLinks, dict[int, Proxy]]
) -> None:
    _, proxies = brokers
    connections = [await connect(backend, proxies[1], c) for c in ("keel-admin", "broker-2-fetcher")]
    proxies[1].link.cut()
    for connection in connections:
        assert not await connection.request_arrives(b"request", STALL_S)
        assert not await connection.answer_arrives(b"answer", STALL_S)
    # A new connection's first frame is held too.
    client = await asyncio.open_connection("127.0.0.1", proxies[1].port)
    late = Connection(client, await backend.next())
    frame = request_frame("keel-admin")
    assert not await late.request_arrives(frame, STALL_S)
    proxies[1].link.heal()
    assert await arrives(late.server_reader, frame, 5)
    for connection in connections:
        assert await arrives(connection.server_reader, b"request", 5)
        assert await arrives(connection.client_reader, b"answer", 5)
    for connection in (*connections, late):
        connection.close()


@pytest.mark.parametrize(
    "first",
    [
        # A request frame, and a second one written with it in one segment.
        request_frame("broker-2-fetcher") + request_frame("broker-2-fetcher", 2),
        # A frame that is no request: forwarded unchanged for the broker to refuse.
        encode_frame(b"\xc1 not msgpack"),
        # A length no frame may have.
        b"\xff\xff\xff\xfe rest",
        # An empty frame.
        encode_frame(b""),
    ],
)
async def test_the_first_frame_is_forwarded_byte_for_byte(
    backend: Backend, brokers: tuple[PeerLinks, dict[int, Proxy]], first: bytes
) -> None:
    _, proxies = brokers
    client = await asyncio.open_connection("127.0.0.1", proxies[1].port)
    connection = Connection(client, await backend.next())
    assert await connection.request_arrives(first)
    assert await connection.answer_arrives(b"answer")
    connection.close()


async def test_a_brokers_request_sent_while_cut_is_answered_after_the_heal() -> None:
    """End to end with Keel's RPC client, on a connection opened during the cut."""
    writers: list[asyncio.StreamWriter] = []

    async def answer_api_versions(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)
        decoder = FrameDecoder()
        while data := await reader.read(1024):
            decoder.feed(data)
            while (frame := decoder.next_frame()) is not NEED_DATA:
                assert isinstance(frame, bytes)
                header, _ = decode_request_header(frame)
                writer.write(encode_frame(encode_response(header.correlation_id, ApiVersionsResponse())))

    server = await asyncio.start_server(answer_api_versions, "127.0.0.1", 0)
    peers = PeerLinks()
    proxy = await Proxy(Link("broker-1"), server.sockets[0].getsockname()[1], peers=peers, broker=1).start()
    try:
        peers.cut(1, 2)
        client = await RpcClient.connect("127.0.0.1", proxy.port, client_id="broker-2-control")
        sent = asyncio.create_task(client.send(ApiVersionsRequest(), timeout=10))
        done, _ = await asyncio.wait([sent], timeout=STALL_S)
        assert not done
        peers.heal(1, 2)
        assert isinstance(await asyncio.wait_for(sent, 5), ApiVersionsResponse)
        assert isinstance(await client.send(ApiVersionsRequest(), timeout=5), ApiVersionsResponse)
        await client.close()
    finally:
        await proxy.close()
        server.close()
        for writer in writers:
            writer.close()


def proxy_tasks() -> set[asyncio.Task[object]]:
    """The tasks of node/chaos/proxy.py still running."""
    return {
        task
        for task in asyncio.all_tasks()
        if not task.done() and task.get_coro().cr_code.co_filename.endswith("chaos/proxy.py")  # type: ignore[union-attr]
    }


async def test_a_connection_that_leaves_before_a_whole_first_frame_is_closed(
    backend: Backend, brokers: tuple[PeerLinks, dict[int, Proxy]]
) -> None:
    _, proxies = brokers
    reader, writer = await asyncio.open_connection("127.0.0.1", proxies[1].port)
    server_reader, server_writer = await backend.next()
    writer.write(request_frame("broker-2-fetcher")[:7])
    await writer.drain()
    writer.close()
    # The server's side is closed, without a byte of the torn frame.
    assert await asyncio.wait_for(server_reader.read(), 5) == b""
    await until(lambda: proxies[1].connections == 0, "the proxy forgets the connection")
    assert await asyncio.wait_for(reader.read(), 5) == b""
    server_writer.close()


async def test_a_connection_that_never_sends_a_whole_first_frame_ends_with_the_proxy(
    backend: Backend, brokers: tuple[PeerLinks, dict[int, Proxy]]
) -> None:
    _, proxies = brokers
    before = proxy_tasks()
    _, writer = await asyncio.open_connection("127.0.0.1", proxies[1].port)
    _, server_writer = await backend.next()
    writer.write(b"\x00\x00")
    await writer.drain()
    await until(lambda: proxy_tasks() - before, "the proxy serves the connection")
    await asyncio.wait_for(proxies[1].close(), 5)
    assert proxies[1].connections == 0
    await until(lambda: not proxy_tasks() - before, "every task of the proxy ends")
    writer.close()
    server_writer.close()


async def until(condition: Callable[[], object], message: str) -> None:
    async def probe() -> object:
        return condition()

    await eventually(probe, timeout=5, message=message)
