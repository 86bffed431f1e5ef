"""The replicated log across real broker processes on a real ZooKeeper (issue: replicated
log, acceptance): produce and consume, leader and controller failures under acks=all, ISR
shrink and expansion, min.insync.replicas, unclean election, and log recovery."""

from __future__ import annotations

from kazoo.client import KazooClient

from node.producer import KeelProducer
from tests.integration.conftest import Brokers
from tests.integration.replication import bootstrap, consume_all, log_records
from tests.integration.test_partition_leadership import controller_of, create_topic, settled_to


async def test_ten_thousand_records_with_acks_all_come_back_in_order(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    brokers.start(1, 2, 3)
    controller = await controller_of(brokers)
    await create_topic(brokers.by_id(controller), "orders", partitions=3, rf=3)
    await settled_to(brokers, kazoo, "orders", lambda s: len(s) == 3, "topic never agreed")
    next_offset = {0: 0, 1: 0, 2: 0}
    async with KeelProducer(bootstrap(brokers), acks=-1) as producer:
        for start in range(0, 10_000, 500):
            values = [f"record-{i}".encode() for i in range(start, start + 500)]
            for delivered in await producer.send_many("orders", [(None, v) for v in values]):
                assert delivered.base_offset == next_offset[delivered.partition], "acknowledged in order"
                next_offset[delivered.partition] += delivered.count
    got = await consume_all(brokers, "orders", [0, 1, 2], expected=10_000)
    assert sum(len(v) for v in got.values()) == 10_000
    for partition, items in got.items():
        assert [r.offset for r in items] == list(range(len(items))), "offsets are dense and in order"
        numbers = [int(r.value.split(b"-")[1]) for r in items if r.value]
        assert numbers == sorted(numbers), f"partition {partition} is in send order"
        logs = [log_records(b, "orders", partition) for b in brokers.all]
        assert logs[0] == logs[1] == logs[2] == items, "every replica holds the same log"
