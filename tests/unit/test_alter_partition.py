"""AlterPartition on the controller (spec §7.10), run by KafkaControllers on the in-memory
ClusterStore: each check in Kafka's order, the fenced conditional write, idempotence."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from actors.base.ports import LeaderAndIsr, TopicPartition
from tests.controllers import ControllerCluster as Cluster
from tests.controllers import settled, started
from tests.support import eventually
from wire.api import (
    AlterPartitionItem,
    AlterPartitionRequest,
    AlterPartitionResponse,
    AlterPartitionTopic,
    BrokerState,
    UpdateMetadataRequest,
)
from wire.errors import ErrorCode

TP = TopicPartition("t", 0)


@pytest.fixture
async def cluster() -> AsyncIterator[Cluster]:
    cluster = Cluster()
    await started(cluster, 1, 2, 3)
    await cluster.create_topic("t", {0: (1, 2, 3)})
    await eventually(
        settled(cluster, lambda: len(cluster.zk.partition_states) == 1), timeout=2, message="no topic"
    )
    yield cluster
    await cluster.stop()


# Stands for the broker epoch a member is registered with, which `send` fills in.
REGISTERED = -99


def request(
    isr: list[int],
    *,
    broker: int = 1,
    broker_epoch: int | None = None,
    leader_epoch: int = 0,
    partition_epoch: int = 0,
) -> AlterPartitionRequest:
    return AlterPartitionRequest(
        broker_id=broker,
        broker_epoch=-99 if broker_epoch is None else broker_epoch,
        topics=[
            AlterPartitionTopic(
                topic_name="t",
                partitions=[
                    AlterPartitionItem(
                        partition_index=0,
                        leader_epoch=leader_epoch,
                        new_isr_with_epochs=[BrokerState(broker_id=r, broker_epoch=REGISTERED) for r in isr],
                        partition_epoch=partition_epoch,
                    )
                ],
            )
        ],
    )


async def send(cluster: Cluster, req: AlterPartitionRequest) -> AlterPartitionResponse:
    controller = cluster.controller
    live = controller.context.live_brokers
    if req.broker_epoch == -99:
        req = AlterPartitionRequest(
            broker_id=req.broker_id, broker_epoch=live[req.broker_id].broker_epoch, topics=req.topics
        )
    topics = [
        AlterPartitionTopic(
            topic_name=topic.topic_name,
            partitions=[
                AlterPartitionItem(
                    partition_index=item.partition_index,
                    leader_epoch=item.leader_epoch,
                    new_isr_with_epochs=[
                        BrokerState(
                            broker_id=m.broker_id,
                            broker_epoch=live[m.broker_id].broker_epoch
                            if m.broker_epoch == REGISTERED and m.broker_id in live
                            else m.broker_epoch,
                        )
                        for m in item.new_isr_with_epochs
                    ],
                    partition_epoch=item.partition_epoch,
                )
                for item in topic.partitions
            ],
        )
        for topic in req.topics
    ]
    return await controller.alter_partition(
        AlterPartitionRequest(broker_id=req.broker_id, broker_epoch=req.broker_epoch, topics=topics)
    )


def code(response: AlterPartitionResponse) -> int:
    return response.topics[0].partitions[0].error_code


async def test_a_shrink_is_written_with_a_new_partition_epoch_and_announced(cluster: Cluster) -> None:
    response = await send(cluster, request([1, 2]))
    result = response.topics[0].partitions[0]
    assert (result.error_code, result.leader_id, result.leader_epoch, result.isr) == (0, 1, 0, [1, 2])
    assert result.partition_epoch == 1
    assert cluster.state("t", 0) == LeaderAndIsr(1, 0, (1, 2), 1), "the leader epoch stays; the version moves"
    announced = [r for r in cluster.channel.received(3) if isinstance(r, UpdateMetadataRequest)][-1]
    assert announced.partition_states[0].isr == [1, 2], "every broker hears of it through UpdateMetadata"


async def test_resending_the_same_change_is_an_idempotent_success(cluster: Cluster) -> None:
    await send(cluster, request([1]))
    for partition_epoch in (0, 1):
        again = (await send(cluster, request([1], partition_epoch=partition_epoch))).topics[0].partitions[0]
        assert (again.error_code, again.isr, again.partition_epoch) == (0, [1], 1)
    assert cluster.state("t", 0).partition_epoch == 1, "no second write"


async def test_each_check_in_kafkas_order(cluster: Cluster) -> None:
    assert code(await send(cluster, request([1, 2], partition_epoch=5))) == ErrorCode.NOT_CONTROLLER
    assert code(await send(cluster, request([1, 2], leader_epoch=3))) == ErrorCode.NOT_CONTROLLER
    await send(cluster, request([1, 2]))  # partition epoch 1 now
    assert code(await send(cluster, request([1, 3], partition_epoch=0))) == ErrorCode.INVALID_UPDATE_VERSION
    assert code(await send(cluster, request([1, 2, 9], partition_epoch=1))) == ErrorCode.INELIGIBLE_REPLICA
    assert cluster.state("t", 0) == LeaderAndIsr(1, 0, (1, 2), 1), "a refused change writes nothing"


async def test_only_the_leader_changes_its_partitions_isr(cluster: Cluster) -> None:
    """Broker 2, a follower, at the current leader and partition epochs: refused, as KRaft's
    controller refuses it. ZooKeeper-mode Kafka wrote the sender in as leader, without an
    election and without telling anyone."""
    refused = await send(cluster, request([2, 3], broker=2))
    assert code(refused) == ErrorCode.INVALID_REQUEST
    assert cluster.state("t", 0) == LeaderAndIsr(1, 0, (1, 2, 3), 0)


def with_epochs(isr: list[tuple[int, int]], *, partition_epoch: int) -> AlterPartitionRequest:
    """An ISR change naming each member with the broker epoch given."""
    built = request([], partition_epoch=partition_epoch)
    item = built.topics[0].partitions[0]
    members = [BrokerState(broker_id=b, broker_epoch=e) for b, e in isr]
    return AlterPartitionRequest(
        broker_id=built.broker_id,
        broker_epoch=built.broker_epoch,
        topics=[
            AlterPartitionTopic(
                topic_name="t",
                partitions=[
                    AlterPartitionItem(
                        partition_index=0,
                        leader_epoch=item.leader_epoch,
                        new_isr_with_epochs=members,
                        partition_epoch=partition_epoch,
                    )
                ],
            )
        ],
    )


async def test_a_joining_member_must_be_named_with_its_registered_broker_epoch(cluster: Cluster) -> None:
    """KIP-903: a replica joins the ISR only on its current incarnation's fetches. A member
    already in the ISR may come without an epoch; one joining may not, nor with another
    epoch than it is registered with."""
    await send(cluster, request([1, 2]))  # 3 leaves: partition epoch 1
    registered = cluster.controller.context.live_brokers[3].broker_epoch
    for stale in (-1, registered - 1, registered + 1):
        answer = await send(cluster, with_epochs([(1, REGISTERED), (2, -1), (3, stale)], partition_epoch=1))
        assert code(answer) == ErrorCode.INELIGIBLE_REPLICA, stale
    assert cluster.state("t", 0).isr == (1, 2), "a refused change writes nothing"
    answer = await send(cluster, with_epochs([(1, REGISTERED), (2, -1), (3, registered)], partition_epoch=1))
    assert code(answer) == ErrorCode.NONE
    assert cluster.state("t", 0).isr == (1, 2, 3)


async def test_an_older_leader_epoch_is_fenced(cluster: Cluster) -> None:
    await cluster.kill(2)  # not the leader: a shrink by the controller raises the leader epoch
    await eventually(
        settled(cluster, lambda: cluster.state("t", 0).leader_epoch == 1), timeout=2, message="no shrink"
    )
    state = cluster.state("t", 0)
    response = await send(cluster, request([1, 3], leader_epoch=0, partition_epoch=state.partition_epoch))
    assert code(response) == ErrorCode.FENCED_LEADER_EPOCH


async def test_an_unknown_partition_and_a_stale_broker_epoch(cluster: Cluster) -> None:
    unknown = AlterPartitionRequest(
        broker_id=1,
        broker_epoch=cluster.controller.context.live_brokers[1].broker_epoch,
        topics=[AlterPartitionTopic(topic_name="nope", partitions=request([1]).topics[0].partitions)],
    )
    assert code(await cluster.controller.alter_partition(unknown)) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    stale = await cluster.controller.alter_partition(request([1], broker_epoch=1))
    assert stale.error_code == ErrorCode.STALE_BROKER_EPOCH


async def test_a_broker_that_is_not_the_controller_answers_not_controller(cluster: Cluster) -> None:
    other = next(c for c in cluster.controllers.values() if not c.is_active)
    response = await other.alter_partition(request([1], broker_epoch=0))
    assert response.error_code == ErrorCode.NOT_CONTROLLER


async def test_the_partition_gauges_follow_a_change_without_waiting_for_the_event_to_end(
    cluster: Cluster,
) -> None:
    """A monitor polling during a long event reads the gauges as the controller's maps stand,
    at no cost of a pass over every partition."""
    controller = cluster.controller
    assert controller.metrics.snapshot()["PreferredReplicaImbalanceCount"] == 0
    tp = next(iter(controller.context.leadership))
    info = controller.context.leadership[tp]
    controller.context.leadership[tp] = info._replace(leader_and_isr=info.leader_and_isr._replace(leader=2))
    assert controller.metrics.snapshot()["PreferredReplicaImbalanceCount"] == 1
    controller.context.leadership[tp] = info
    assert controller.metrics.snapshot()["PreferredReplicaImbalanceCount"] == 0


async def test_an_isr_change_whose_write_was_answered_as_a_conflict_is_taken_as_written(
    cluster: Cluster,
) -> None:
    """Its reply lost and its retry refused, the write answers PartitionStateConflict though it
    is in ZooKeeper (issue 32): read back, it is this controller's own, so the leader hears
    success, not INVALID_UPDATE_VERSION, after which it would wait for a LeaderAndIsr that
    never comes."""
    store = cluster.stores[cluster.controller.broker_id]
    lost = [True]
    store.lose_replies = lambda: lost.pop() if lost else False
    result = (await send(cluster, request([1, 2]))).topics[0].partitions[0]
    assert not lost, "the reply was never lost: the test tested nothing"
    assert (result.error_code, result.isr, result.partition_epoch) == (ErrorCode.NONE, [1, 2], 1)
    assert cluster.controller.context.leadership[TP].leader_and_isr == LeaderAndIsr(1, 0, (1, 2), 1)
    again = (await send(cluster, request([1], partition_epoch=1))).topics[0].partitions[0]
    assert (again.error_code, again.isr, again.partition_epoch) == (ErrorCode.NONE, [1], 2)


async def test_a_conflict_with_another_write_stays_a_conflict(cluster: Cluster) -> None:
    """The znode moved on to a state this controller did not write: the change is refused."""
    controller = cluster.controller
    await cluster.stores[controller.broker_id].set_partition_state(
        TP, LeaderAndIsr(1, 0, (1, 3)), controller.context.epoch
    )
    assert code(await send(cluster, request([1, 2]))) == ErrorCode.INVALID_UPDATE_VERSION
    assert cluster.state("t", 0) == LeaderAndIsr(1, 0, (1, 3), 1)
