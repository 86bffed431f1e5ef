"""New partitions are taken through their creation a group at a time: a topic larger than a
group comes online whole, each group with its own LeaderAndIsr and UpdateMetadata to every
broker, none holding more than a group's partition states."""

from __future__ import annotations

from actors.base.ports import TopicPartition
from actors.controller.workflows import NEW_PARTITIONS_PER_STEP
from tests.controllers import ControllerCluster, leader_and_isr_to, settled, started
from tests.support import eventually
from wire.api import UpdateMetadataRequest

PARTITIONS = 2 * NEW_PARTITIONS_PER_STEP + 10


async def test_a_topic_larger_than_a_group_comes_online_in_bounded_requests(
    cluster: ControllerCluster,
) -> None:
    await started(cluster, 1, 2, 3)
    await cluster.create_topic("big", {p: (1 + p % 3, 1 + (p + 1) % 3) for p in range(PARTITIONS)})
    context = cluster.controller.context
    await eventually(
        settled(cluster, lambda: len(context.leadership) == PARTITIONS),
        timeout=30,
        message="the topic's partitions are not all initialised",
    )
    assert all(cluster.state("big", p).leader == 1 + p % 3 for p in range(PARTITIONS))
    for broker in (1, 2, 3):
        orders = [r for r in leader_and_isr_to(cluster.channel, broker) if r.partition_states]
        told = {TopicPartition(s.topic, s.partition) for r in orders for s in r.partition_states}
        assert len(told) == sum(1 for p in range(PARTITIONS) if broker in (1 + p % 3, 1 + (p + 1) % 3))
        assert len(orders) == 3
        assert max(len(r.partition_states) for r in orders) <= NEW_PARTITIONS_PER_STEP
        updates = [
            r
            for r in cluster.channel.received(broker)
            if isinstance(r, UpdateMetadataRequest) and r.partition_states
        ]
        assert sum(len(r.partition_states) for r in updates) == PARTITIONS
        assert max(len(r.partition_states) for r in updates) <= NEW_PARTITIONS_PER_STEP
