"""Writes whose answer is lost after a real ZooKeeper applied them: a proxy between the client
and the server (tests/zookeeper_proxy.py) closes the connection instead of relaying the answer;
the client reconnects to the same session and sends the write again, which ZooKeeper refuses
(NodeExists, BadVersion). The client recognises its own write in the znodes and answers as the
first send would have (node/zk/retried_writes.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from actors.base.clock import SystemClock
from actors.base.ports import LeaderAndIsr, TopicPartition
from node.cluster.zookeeper import EmbeddedZooKeeper
from node.zk import data, paths
from node.zk.client import ZooKeeperClient
from node.zk.store import ZkClusterStore
from tests.zookeeper_proxy import ReplyLosingProxy

SESSION_TIMEOUT_S = 2.0
# The lost answer is noticed when a heartbeat goes unanswered, then the client reconnects.
ANSWERED_WITHIN_S = 30.0


class LossyLinks:
    """Clients on the test's chroot, each through a proxy that loses the answer to the first
    write whose request holds the given bytes."""

    def __init__(self, server_port: int, chroot: str) -> None:
        self.server_port = server_port
        self.chroot = chroot
        self.opened: list[tuple[ZooKeeperClient, ReplyLosingProxy]] = []

    async def client(self, matching: bytes) -> tuple[ZooKeeperClient, ReplyLosingProxy]:
        proxy = ReplyLosingProxy(self.server_port, matching=matching).start()
        client = ZooKeeperClient(
            f"127.0.0.1:{proxy.port}{self.chroot}",
            session_timeout_s=SESSION_TIMEOUT_S,
            connection_timeout_s=10,
        )
        self.opened.append((client, proxy))
        await client.start()
        return client, proxy

    async def close(self) -> None:
        for client, proxy in self.opened:
            await asyncio.wait_for(client.close(), 10)
            proxy.stop()


@pytest.fixture
async def links(zookeeper: EmbeddedZooKeeper, chroot: str) -> AsyncIterator[LossyLinks]:
    links = LossyLinks(zookeeper.servers[0].client_port, chroot)
    yield links
    await links.close()


async def test_a_create_whose_answer_is_lost_is_answered_as_created(
    links: LossyLinks,
) -> None:
    client, proxy = await links.client(b"/lost-create")
    session = client.session_id
    await asyncio.wait_for(client.create("/lost-create", b"mine"), ANSWERED_WITHIN_S)
    assert proxy.lost == 1, "the proxy lost no answer: the test tested nothing"
    assert client.session_id == session, "the client should have kept its session"
    value, stat = await client.get("/lost-create")
    assert (value, stat.version) == (b"mine", 0)


async def test_a_versioned_set_whose_answer_is_lost_is_answered_with_the_version_it_wrote(
    links: LossyLinks,
) -> None:
    client, proxy = await links.client(b"written-again")
    await client.create("/lost-set", b"before")
    stat = await asyncio.wait_for(client.set("/lost-set", b"written-again", 0), ANSWERED_WITHIN_S)
    assert proxy.lost == 1, "the proxy lost no answer: the test tested nothing"
    assert stat.version == 1


async def test_partition_states_whose_multi_op_answer_is_lost_are_all_created(
    links: LossyLinks,
) -> None:
    """The controller's fenced multi-op of partition-state creates (issue 32): sent again, it
    was refused with NodeExists, and the controller gave those partitions up."""
    client, proxy = await links.client(b"/brokers/topics/lossy/partitions")
    store = ZkClusterStore(client, SystemClock())
    await store.ensure_persistent_paths()
    epoch = await store.register_controller_and_increment_epoch(1)
    await client.create(paths.topic("lossy"), b"{}")
    states = {TopicPartition("lossy", p): LeaderAndIsr(1, 0, (1, 2, 3)) for p in range(20)}
    written = await asyncio.wait_for(
        store.create_partition_states(states, epoch.epoch, epoch.zk_version), ANSWERED_WITHIN_S
    )
    assert proxy.lost == 1, "the proxy lost no answer: the test tested nothing"
    assert written == {tp: state._replace(partition_epoch=0) for tp, state in states.items()}
    read = await store.partition_states(sorted(states))
    assert {tp: info.controller_epoch for tp, info in read.items()} == dict.fromkeys(states, epoch.epoch)
    raw, _ = await client.get(paths.partition_state("lossy", 0))
    assert raw == data.encode_partition_state(LeaderAndIsr(1, 0, (1, 2, 3)), epoch.epoch)
