"""Producer ids claimed in blocks through a real ZooKeeper, as Kafka's brokers claim them:
two brokers never hand out the same id, the znode holds Kafka's layout, and a claim whose
answer was lost still counts as ours (node/zk/producer_ids.py)."""

from __future__ import annotations

import asyncio

import orjson

from node.cluster.zookeeper import EmbeddedZooKeeper
from node.zk import paths
from node.zk.client import ZooKeeperClient
from node.zk.producer_ids import BLOCK_SIZE, ZkProducerIds
from tests.contract.test_retried_writes import ANSWERED_WITHIN_S, LossyLinks


async def test_two_brokers_never_hand_out_the_same_id(zk_connect: str) -> None:
    clients = [ZooKeeperClient(zk_connect, session_timeout_s=6, connection_timeout_s=10) for _ in range(2)]
    for client in clients:
        await client.start()
    try:
        await clients[0].create_all_if_missing(["/"])
        brokers = [ZkProducerIds(client, broker_id) for broker_id, client in enumerate(clients, start=1)]
        ids = await asyncio.gather(*(b.generate() for _ in range(1_500) for b in brokers))
        assert len(set(ids)) == 3_000, "no id handed out twice"
        assert min(ids) == 0 and max(ids) < 4 * BLOCK_SIZE, "blocks follow one another"
        raw, _ = await clients[0].get(paths.LATEST_PRODUCER_ID_BLOCK)
        block = orjson.loads(raw or b"{}")
        assert block["version"] == 1 and block["broker"] in (1, 2)
        assert int(block["block_end"]) - int(block["block_start"]) == BLOCK_SIZE - 1
        assert isinstance(block["block_start"], str), "Kafka writes the bounds as strings"
    finally:
        for client in clients:
            await client.close()


async def test_a_claim_whose_answer_is_lost_is_still_ours(zookeeper: EmbeddedZooKeeper, chroot: str) -> None:
    links = LossyLinks(zookeeper.servers[0].client_port, chroot)
    try:
        setup, _ = await links.client(matching=b"never matches anything")
        await setup.create_all_if_missing(["/"])
        # The first claim creates the znode; the second's conditional set loses its answer.
        client, proxy = await links.client(matching=b'"block_start":"1000"')
        ids = ZkProducerIds(client, broker_id=7)
        assert await ids.generate() == 0
        for expected in range(1, BLOCK_SIZE):
            assert await ids.generate() == expected
        assert await asyncio.wait_for(ids.generate(), ANSWERED_WITHIN_S) == BLOCK_SIZE
        assert proxy.lost, "the answer to the second claim was lost"
        raw, _ = await setup.get(paths.LATEST_PRODUCER_ID_BLOCK)
        assert orjson.loads(raw or b"{}")["block_start"] == str(BLOCK_SIZE), "no block skipped"
    finally:
        await links.close()
