"""Producer ids for idempotent producers, in blocks claimed through ZooKeeper as Kafka's
brokers claim them (ProducerIdManager, ZK mode).

`/latest_producer_id_block` holds the last block any broker claimed:
`{"version":1,"broker":B,"block_start":"S","block_end":"E"}` (Kafka's layout: the bounds are
strings). A broker claims the next 1,000 ids by writing the block after it, conditional on
the znode's version, and hands them out one by one; two brokers racing for a block cannot
both have it. A write whose answer was lost is read back: the block is ours if the znode
names us with the bounds we wrote (issue: retried ZooKeeper writes are idempotent).
"""

from __future__ import annotations

import asyncio
import logging

import orjson

from node.zk import paths
from node.zk.client import BadVersion, NodeExists, ZooKeeperClient

log = logging.getLogger(__name__)

BLOCK_SIZE = 1000


def encode_block(broker_id: int, start: int) -> bytes:
    return orjson.dumps(
        {
            "version": 1,
            "broker": broker_id,
            "block_start": str(start),
            "block_end": str(start + BLOCK_SIZE - 1),
        }
    )


def block_end(raw: bytes | None) -> int:
    """The last id of the block in the znode's data; -1 for none."""
    if not raw:
        return -1
    try:
        return int(orjson.loads(raw)["block_end"])
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as e:
        raise ValueError(f"{paths.LATEST_PRODUCER_ID_BLOCK} holds no producer id block: {e}") from None


class ZkProducerIds:
    def __init__(self, zk: ZooKeeperClient, broker_id: int) -> None:
        self._zk = zk
        self._broker_id = broker_id
        self._next = 0
        self._end = -1
        self._claiming = asyncio.Lock()

    async def generate(self) -> int:
        """A producer id no broker has handed out."""
        async with self._claiming:
            if self._next > self._end:
                self._next = await self._claim_block()
                self._end = self._next + BLOCK_SIZE - 1
                log.info("claimed producer ids %d to %d", self._next, self._end)
            producer_id = self._next
            self._next += 1
            return producer_id

    async def _claim_block(self) -> int:
        while True:
            current = await self._zk.get_or_none(paths.LATEST_PRODUCER_ID_BLOCK)
            start = block_end(None if current is None else current[0]) + 1
            ours = encode_block(self._broker_id, start)
            try:
                if current is None:
                    await self._zk.create(paths.LATEST_PRODUCER_ID_BLOCK, ours)
                else:
                    await self._zk.set(paths.LATEST_PRODUCER_ID_BLOCK, ours, version=current[1].version)
                return start
            except (NodeExists, BadVersion):
                written = await self._zk.get_or_none(paths.LATEST_PRODUCER_ID_BLOCK)
                if written is not None and written[0] == ours:
                    return start  # our own write, whose answer was lost
                # Another broker claimed this block first: claim the one after it.
