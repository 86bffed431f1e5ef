"""Controlled shutdown on the controller (spec §7.3), run by KafkaControllers on the in-memory
ClusterStore: the checks and their codes, the leader moves, the ISR shrink, what is sent,
and when a broker becomes eligible again."""

from __future__ import annotations

from actors.base.ports import TopicPartition
from actors.controller.context import PartitionReplica, ReplicaState
from tests.controllers import ControllerCluster as Cluster
from tests.controllers import leader_and_isr_to, settled, started
from tests.support import eventually
from wire.api import (
    AlterPartitionItem,
    AlterPartitionRequest,
    AlterPartitionTopic,
    BrokerState,
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    RemainingPartition,
    StopReplicaRequest,
)
from wire.errors import ErrorCode


async def with_topic(cluster: Cluster, replicas: dict[int, tuple[int, ...]]) -> None:
    await started(cluster, 0, 1, 2)
    await cluster.create_topic("t", replicas)
    await eventually(
        settled(cluster, lambda: len(cluster.zk.partition_states) == len(replicas)),
        timeout=2,
        message="topic not created",
    )


async def shut_down(
    cluster: Cluster, broker: int, broker_epoch: int | None = None
) -> ControlledShutdownResponse:
    epoch = cluster.controllers[broker].broker_epoch if broker_epoch is None else broker_epoch
    return await cluster.controller.controlled_shutdown(
        ControlledShutdownRequest(broker_id=broker, broker_epoch=epoch)
    )


async def test_brokers_shut_down_in_turn_as_kafka_controller_integration_test(cluster: Cluster) -> None:
    """Spec §12.1 ControlledShutdown: one partition on [0, 1, 2]."""
    await with_topic(cluster, {0: (0, 1, 2)})
    answer = await shut_down(cluster, 2)
    assert (answer.error_code, answer.remaining_partitions) == (ErrorCode.NONE, [])
    assert (cluster.state("t", 0).leader, cluster.state("t", 0).isr) == (0, (0, 1))
    answer = await shut_down(cluster, 1)
    assert (answer.error_code, answer.remaining_partitions) == (ErrorCode.NONE, [])
    assert (cluster.state("t", 0).leader, cluster.state("t", 0).isr) == (0, (0,))
    answer = await shut_down(cluster, 0)
    assert answer.error_code == ErrorCode.NONE
    assert answer.remaining_partitions == [RemainingPartition(topic_name="t", partition_index=0)]
    assert cluster.state("t", 0).leader == 0, "no other replica may lead: the leader stays"
    assert cluster.controller.context.shutting_down == {0, 1, 2}


async def test_led_partitions_move_to_the_next_live_isr_member_in_one_batch(cluster: Cluster) -> None:
    await with_topic(cluster, {0: (1, 2, 0), 1: (1, 0, 2), 2: (2, 1, 0), 3: (1,)})
    cluster.channel.take()
    answer = await shut_down(cluster, 1)
    assert (answer.error_code, answer.remaining_partitions) == (ErrorCode.NONE, [])
    assert (cluster.state("t", 0).leader, cluster.state("t", 0).isr) == (2, (2, 0))
    assert (cluster.state("t", 1).leader, cluster.state("t", 1).isr) == (0, (0, 2))
    assert cluster.state("t", 0).leader_epoch == 1 and cluster.state("t", 1).leader_epoch == 1
    assert (cluster.state("t", 2).leader, cluster.state("t", 2).isr) == (2, (2, 0)), (
        "a follower leaves the ISR"
    )
    assert cluster.state("t", 2).leader_epoch == 1
    assert (cluster.state("t", 3).leader, cluster.state("t", 3).isr) == (1, (1,)), "RF 1 is left alone"
    # The shutting-down broker hears of the new leaders, then is told to stop every replica
    # it no longer leads; it is not told to stop the partition it still leads.
    told = {
        (s.partition, s.leader) for r in leader_and_isr_to(cluster.channel, 1) for s in r.partition_states
    }
    assert {(0, 2), (1, 0)} <= told
    stops = [r for r in cluster.channel.received(1) if isinstance(r, StopReplicaRequest)]
    assert len(stops) == 1
    assert {(p.partition, p.delete_partition) for p in stops[0].partitions} == {
        (0, False),
        (1, False),
        (2, False),
    }
    elections = [
        r
        for r in leader_and_isr_to(cluster.channel, 0)
        if {s.partition for s in r.partition_states} >= {0, 1}
    ]
    assert elections, "the moved partitions go to broker 0 in one LeaderAndIsr"
    replicas = cluster.controller.context.replica_states
    assert all(
        replicas[PartitionReplica(TopicPartition("t", p), 1)] == ReplicaState.OFFLINE for p in (0, 1, 2)
    )
    snapshot = cluster.controller.metrics.snapshot()
    assert snapshot["ControlledShutdownRateAndTimeMs.count"] == 1


async def test_a_stale_broker_epoch_is_refused_and_changes_nothing(cluster: Cluster) -> None:
    await with_topic(cluster, {0: (1, 2, 0)})
    before = dict(cluster.zk.partition_states)
    answer = await shut_down(cluster, 1, cluster.controllers[1].broker_epoch - 1)
    assert answer.error_code == ErrorCode.STALE_BROKER_EPOCH
    assert cluster.controller.context.shutting_down == set()
    assert cluster.zk.partition_states == before


async def test_an_unknown_broker_epoch_is_not_checked(cluster: Cluster) -> None:
    await with_topic(cluster, {0: (1, 2, 0)})
    answer = await shut_down(cluster, 1, -1)
    assert (answer.error_code, cluster.state("t", 0).leader) == (ErrorCode.NONE, 2)


async def test_an_unregistered_broker_is_not_available(cluster: Cluster) -> None:
    await with_topic(cluster, {0: (1, 2, 0)})
    answer = await shut_down(cluster, 7, 123)
    assert answer.error_code == ErrorCode.BROKER_NOT_AVAILABLE
    assert cluster.controller.context.shutting_down == set()


async def test_a_broker_that_is_not_the_controller_answers_stale_controller_epoch(cluster: Cluster) -> None:
    await with_topic(cluster, {0: (1, 2, 0)})
    other = next(c for c in cluster.controllers.values() if not c.is_active)
    answer = await other.controlled_shutdown(ControlledShutdownRequest(broker_id=1, broker_epoch=-1))
    assert answer.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
    assert cluster.state("t", 0).leader == 1


async def test_a_pre_empted_controlled_shutdown_answers_stale_controller_epoch(cluster: Cluster) -> None:
    await with_topic(cluster, {0: (1, 2, 0)})
    controller = cluster.controller
    await controller.event_manager.close()
    answer = await controller.controlled_shutdown(ControlledShutdownRequest(broker_id=1, broker_epoch=-1))
    assert answer.error_code == ErrorCode.STALE_CONTROLLER_EPOCH


async def test_a_shutting_down_broker_may_not_rejoin_an_isr_until_it_registers_again(
    cluster: Cluster,
) -> None:
    await with_topic(cluster, {0: (0, 1, 2)})
    await shut_down(cluster, 2)
    state = cluster.state("t", 0)

    def rejoin() -> AlterPartitionRequest:
        """Broker 2 back in the ISR, named with the broker epoch it is registered with now."""
        live = cluster.controller.context.live_brokers
        return AlterPartitionRequest(
            broker_id=0,
            broker_epoch=cluster.controllers[0].broker_epoch,
            topics=[
                AlterPartitionTopic(
                    topic_name="t",
                    partitions=[
                        AlterPartitionItem(
                            partition_index=0,
                            leader_epoch=state.leader_epoch,
                            new_isr_with_epochs=[
                                BrokerState(broker_id=r, broker_epoch=live[r].broker_epoch) for r in (0, 1, 2)
                            ],
                            partition_epoch=state.partition_epoch,
                        )
                    ],
                )
            ],
        )

    before_restart = rejoin()
    answer = await cluster.controller.alter_partition(before_restart)
    assert answer.topics[0].partitions[0].error_code == ErrorCode.INELIGIBLE_REPLICA
    assert cluster.state("t", 0).isr == (0, 1)
    # It stops and starts again: a new registration makes it eligible.
    await cluster.kill(2)
    await eventually(
        settled(cluster, lambda: 2 not in cluster.controller.context.live_brokers),
        timeout=2,
        message="broker 2 not gone",
    )
    assert cluster.controller.context.shutting_down == set()
    await cluster.start(2)
    await eventually(
        settled(cluster, lambda: 2 in cluster.controller.context.live_brokers), timeout=2, message="not back"
    )
    # Named with its previous incarnation's broker epoch, it is still refused (KIP-903).
    answer = await cluster.controller.alter_partition(before_restart)
    assert answer.topics[0].partitions[0].error_code == ErrorCode.INELIGIBLE_REPLICA
    answer = await cluster.controller.alter_partition(rejoin())
    assert answer.topics[0].partitions[0].error_code == ErrorCode.NONE
    assert cluster.state("t", 0).isr == (0, 1, 2)


async def test_asking_again_moves_only_what_is_left(cluster: Cluster) -> None:
    await with_topic(cluster, {0: (1, 2, 0)})
    first = await shut_down(cluster, 1)
    epoch = cluster.state("t", 0).leader_epoch
    second = await shut_down(cluster, 1)
    assert first.remaining_partitions == second.remaining_partitions == []
    assert cluster.state("t", 0).leader_epoch == epoch, "nothing to write the second time"


async def test_partitions_of_a_topic_queued_for_deletion_are_left_alone(cluster: Cluster) -> None:
    await started(cluster, 0, 1, 2)
    await cluster.create_topic("t", {0: (1, 2, 0)})
    await cluster.create_topic("d", {0: (1, 2, 0)})
    await eventually(
        settled(cluster, lambda: len(cluster.zk.partition_states) == 2),
        timeout=2,
        message="topics not created",
    )
    cluster.controller.context.topics_to_be_deleted.add("d")
    answer = await shut_down(cluster, 1)
    assert (answer.error_code, answer.remaining_partitions) == (ErrorCode.NONE, [])
    assert cluster.state("t", 0).leader == 2
    assert (cluster.state("d", 0).leader, cluster.state("d", 0).isr) == (1, (1, 2, 0)), "deletion owns it"
