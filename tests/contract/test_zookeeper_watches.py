"""The ZooKeeper client's own waits on a real ZooKeeper: `wait_for_deletion`, on which a broker
restarted before its old session expired and a standing-by planner rely."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from node.zk.client import ZooKeeperClient


@pytest.fixture
async def clients(zk_connect: str) -> AsyncIterator[tuple[ZooKeeperClient, ZooKeeperClient]]:
    started = []
    for _ in range(2):
        client = ZooKeeperClient(zk_connect, session_timeout_s=2.0, connection_timeout_s=10)
        await client.start()
        started.append(client)
    yield started[0], started[1]
    for client in started:
        await client.close()


def callbacks_on(client: ZooKeeperClient, path: str) -> list[object]:
    watched = client._zk.session.watch_callbacks
    return [key for key in watched if key[1] == client.path(path)]


async def test_a_wait_for_deletion_outlasts_a_change_of_the_znode(
    clients: tuple[ZooKeeperClient, ZooKeeperClient],
) -> None:
    waiting, holder = clients
    await holder.create("/held", b"first", ephemeral=True)
    wait = asyncio.create_task(waiting.wait_for_deletion("/held", 30))
    # One turn of the loop: the wait has sent its `exists`, so the next request of that session
    # is answered after it, and its change fires the watch that `exists` armed.
    await asyncio.sleep(0)
    await waiting.set("/held", b"second")
    assert not wait.done(), "a change is not a deletion"
    await holder.delete("/held")
    assert await asyncio.wait_for(wait, 5), "the deletion after a change was not heard"
    assert callbacks_on(waiting, "/held") == []


async def test_a_wait_that_times_out_leaves_no_callback_behind(
    clients: tuple[ZooKeeperClient, ZooKeeperClient],
) -> None:
    waiting, holder = clients
    await holder.create("/held", b"", ephemeral=True)
    for _ in range(3):
        assert await waiting.wait_for_deletion("/held", 0.05) is False
    assert await waiting.wait_for_deletion("/absent", 5) is True
    assert callbacks_on(waiting, "/held") == [] and callbacks_on(waiting, "/absent") == []
