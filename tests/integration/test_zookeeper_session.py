"""Keel's ZooKeeper client on a real 3-server ensemble, reached through the chaos proxies: after
a lost majority, and whatever aiozk's repair loop does, the client gets a session again and
its session watcher registers again, as a broker's does (`/brokers/ids/N`)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from aiozk.states import States

from node.chaos.proxy import Link, Proxy
from node.cluster.zookeeper import EmbeddedZooKeeper
from node.zk.client import DATA_CHANGED, NodeExists, ZKError, ZooKeeperClient, connection_lost
from tests.support import eventually

SESSION_TIMEOUT_S = 2.0
CONNECTION_TIMEOUT_S = 3.0
REGISTRATION = "/registered"


@pytest.fixture(scope="module")
def ensemble(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedZooKeeper]:
    servers = EmbeddedZooKeeper(Path(tmp_path_factory.mktemp("ensemble")), servers=3)
    servers.start()
    yield servers
    servers.stop()


class Registrar:
    """A SessionWatcher that holds an ephemeral znode in each new session, as a broker's
    registration does."""

    def __init__(self, zk: ZooKeeperClient) -> None:
        self.zk = zk
        self.tasks: set[asyncio.Task[None]] = set()

    async def register(self) -> None:
        """Create the znode; one that an older session still holds is waited out first. A
        request lost with its connection (the test drops them) is tried again: what is tested
        is that the client gets a session and says so, not one request's luck."""
        while True:
            try:
                await self.zk.create(REGISTRATION, b"me", ephemeral=True)
                return
            except NodeExists:
                stat = await self.zk.exists(REGISTRATION)
                if stat is not None and stat.ephemeral_owner == self.zk.session_id:
                    return
                await self.zk.wait_for_deletion(REGISTRATION, 2 * SESSION_TIMEOUT_S)
            except ZKError as e:
                if not connection_lost(e):
                    raise
                await asyncio.sleep(0.2)

    async def before_new_session(self) -> None:
        pass

    def after_new_session(self) -> None:
        task = asyncio.create_task(self.register())
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)


class Client:
    def __init__(self, zk: ZooKeeperClient, proxies: list[Proxy]) -> None:
        self.zk = zk
        self.proxies = proxies
        self.state = zk._zk.session.state

    def drop_connections(self) -> None:
        for proxy in self.proxies:
            proxy.drop()

    async def registered(self) -> bool:
        """Read within a second (a wedged client never answers): the znode is there, and is
        the current session's. A read in flight on a connection that is given up fails."""
        try:
            stat = await asyncio.wait_for(self.zk.exists(REGISTRATION), 1.0)
        except (TimeoutError, ZKError):
            return False
        return stat is not None and stat.ephemeral_owner == self.zk.session_id

    async def until(self, *states: str) -> None:
        await asyncio.wait_for(self.state.wait_for(*states), 30)


@pytest.fixture
async def client(ensemble: EmbeddedZooKeeper) -> AsyncIterator[Client]:
    proxies = [await Proxy(Link(f"zk-{s.server_id}"), s.client_port).start() for s in ensemble.servers]
    chroot = f"/keel-test-{uuid.uuid4().hex[:12]}"
    zk = ZooKeeperClient(
        ",".join(f"127.0.0.1:{p.port}" for p in proxies) + chroot,
        session_timeout_s=SESSION_TIMEOUT_S,
        connection_timeout_s=CONNECTION_TIMEOUT_S,
    )
    await zk.start()
    registrar = Registrar(zk)
    zk.watch_session(registrar)
    await registrar.register()
    # A watch to re-arm on each new connection, as a broker always has.
    zk.add_watch(DATA_CHANGED, REGISTRATION, lambda path: None)
    await zk.get(REGISTRATION, watch=True)
    yield Client(zk, proxies)
    for task in list(registrar.tasks):
        task.cancel()
    await asyncio.wait_for(zk.close(), 10)
    for proxy in proxies:
        await proxy.close()


async def test_a_client_whose_new_connection_drops_as_it_reconnects_registers_again(
    ensemble: EmbeddedZooKeeper, client: Client
) -> None:
    # A majority lost: the client is suspended until it reconnects to a new quorum.
    for server_id in (1, 2):
        ensemble.kill_server(server_id)
    try:
        await client.until(States.SUSPENDED, States.LOST)
    finally:
        for server_id in (1, 2):
            ensemble.start_server(server_id)
    # As it reconnects, before the answer to its re-armed watches, the connection drops (the
    # majority lost again). aiozk waited for that answer forever and never reconnected.
    await client.until(States.CONNECTED)
    client.drop_connections()
    await eventually(client.registered, timeout=30, message="the client never registered again")


async def test_a_session_left_unconnected_is_repaired_afresh(client: Client) -> None:
    # aiozk's repair loop gone (wedged or dead): nothing reconnects the client but the monitor.
    repair = client.zk._zk.session.repair_loop_task
    repair.cancel()
    client.drop_connections()
    await client.until(States.SUSPENDED, States.LOST)
    await eventually(client.registered, timeout=30, message="the client never registered again")


async def test_requests_under_way_when_the_connection_drops_are_answered_once_it_is_back(
    client: Client,
) -> None:
    # Kafka's KafkaZkClient retries a request that meets a lost connection until it is connected
    # again (retryRequestsUntilConnected): callers such as a broker's registration on a new
    # session never see the drop. Requests are held unanswered by a cut link, then their
    # connection drops under them; each must still be answered, on the same session.
    for i in range(5):
        await client.zk.create(f"/under-way-{i}", b"before")
    session = client.zk.session_id
    for proxy in client.proxies:
        proxy.link.cut(to_client=True, to_server=False)
    writes = [asyncio.create_task(client.zk.set(f"/under-way-{i}", b"after")) for i in range(5)]
    reads = [asyncio.create_task(client.zk.exists(REGISTRATION)) for _ in range(5)]
    connection = client.zk._zk.session.conn

    async def sent() -> bool:
        return len(connection.pending) >= 10

    await eventually(sent, timeout=5, message="the requests were never sent")
    client.drop_connections()
    for proxy in client.proxies:
        proxy.link.heal()
    done = await asyncio.wait_for(asyncio.gather(*writes, *reads, return_exceptions=True), 30)
    failures = [r for r in done if isinstance(r, BaseException)]
    assert failures == [], f"requests failed with their dropped connection: {failures!r}"
    assert client.zk.session_id == session, "the drop should not have cost the session"
    for i in range(5):
        value, _ = await client.zk.get(f"/under-way-{i}")
        assert value == b"after"
