"""Partition reassignment (spec §7.7): the pure decisions (reassign_to, validation,
completion) and the procedure run by KafkaControllers on the in-memory ClusterStore, with the
epoch arithmetic of Kafka's ControllerIntegrationTest."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from actors.base.ports import ReplicaAssignment, TopicPartition
from actors.controller.context import PartitionReplica, ReplicaState
from actors.controller.events import ControllerState, Expire
from actors.controller.reassignment import build_reassignment, is_complete, validate_target
from tests.controllers import ControllerCluster as Cluster
from tests.controllers import settled, started
from tests.support import eventually, topic_admin
from wire.api import (
    AlterPartitionReassignmentsRequest,
    ElectionType,
    LeaderAndIsrRequest,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsTopics,
    ReassignablePartition,
    ReassignableTopic,
    StopReplicaRequest,
)
from wire.errors import ErrorCode

TP = TopicPartition("t", 0)

# --- reassign_to (spec §4.3 examples) ---


def test_reassign_to_a_disjoint_target_adds_all_and_removes_all() -> None:
    got = ReplicaAssignment((1, 2, 3)).reassign_to((4, 5, 6))
    assert got == ReplicaAssignment((4, 5, 6, 1, 2, 3), (4, 5, 6), (1, 2, 3))
    assert got.origin_replicas == (1, 2, 3)
    assert got.target_replicas == (4, 5, 6)
    assert got.is_being_reassigned


def test_reassign_to_an_overlapping_target_adds_and_removes_only_the_difference() -> None:
    got = ReplicaAssignment((1, 2, 3, 4)).reassign_to((4, 2, 5, 3))
    assert got == ReplicaAssignment((4, 2, 5, 3, 1), (5,), (1,))


def test_a_reordering_is_not_a_reassignment() -> None:
    got = ReplicaAssignment((1, 2, 3)).reassign_to((3, 1, 2))
    assert got == ReplicaAssignment((3, 1, 2))
    assert not got.is_being_reassigned


def test_reassign_to_is_idempotent_and_back_to_the_origin_restores_it() -> None:
    moving = ReplicaAssignment((1, 2, 3)).reassign_to((4, 5, 6))
    assert moving.reassign_to((4, 5, 6)) == moving
    assert moving.reassign_to((1, 2, 3)) == ReplicaAssignment((1, 2, 3))


def test_remove_replica_drops_it_from_all_three_lists() -> None:
    moving = ReplicaAssignment((4, 2, 5, 3, 1), (5,), (1,))
    assert moving.remove_replica(5) == ReplicaAssignment((4, 2, 3, 1), (), (1,))
    assert moving.remove_replica(1) == ReplicaAssignment((4, 2, 5, 3), (5,), ())


# --- validation, building, completion ---


@pytest.mark.parametrize(
    ("target", "fragment"),
    [
        ((), "Empty replica list"),
        ((2, 2), "Duplicate replica ids"),
        ((2, -1), "Invalid broker id"),
        ((2, 9), "not alive"),
    ],
)
def test_an_invalid_target_is_refused_with_invalid_replica_assignment(
    target: tuple[int, ...], fragment: str
) -> None:
    error = validate_target(ReplicaAssignment((1,)), target, {1, 2, 3})
    assert error is not None
    assert error[0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert fragment in (error[1] or "")


def test_only_the_added_replicas_must_be_alive() -> None:
    # Broker 1 is dead but is already a replica: it only leaves.
    assert validate_target(ReplicaAssignment((1, 2)), (2, 3), {2, 3}) is None


def test_cancelling_restores_the_origin_and_cancelling_nothing_is_refused() -> None:
    moving = ReplicaAssignment((1,)).reassign_to((2,))
    assert build_reassignment(moving, None) == ReplicaAssignment((1,))
    assert build_reassignment(ReplicaAssignment((1,)), None) is None
    assert build_reassignment(moving, (3,)) == ReplicaAssignment((3, 1), (3,), (1,))


def test_a_reassignment_is_complete_once_the_target_replicas_are_in_the_isr() -> None:
    moving = ReplicaAssignment((1,)).reassign_to((2, 3))
    assert not is_complete(moving, (1, 2))
    assert is_complete(moving, (3, 1, 2))
    assert is_complete(ReplicaAssignment((1,)), ())


# --- the procedure, on the fake store ---


@pytest.fixture
async def cluster() -> AsyncIterator[Cluster]:
    cluster = Cluster()
    await started(cluster, 1, 2)
    yield cluster
    await cluster.stop()


async def topic_on(cluster: Cluster, *replicas: int) -> None:
    await cluster.create_topic("t", {0: replicas})
    await eventually(
        settled(cluster, lambda: TP in cluster.zk.partition_states), timeout=2, message="no topic"
    )


async def catch_up(cluster: Cluster, *isr: int) -> None:
    """What the partition leader does once the new replicas caught up: AlterPartition."""
    await cluster.expand_isr(TP, isr)


def stop_replicas(cluster: Cluster, broker: int) -> list[bool]:
    return [
        p.delete_partition
        for r in cluster.channel.received(broker)
        if isinstance(r, StopReplicaRequest)
        for p in r.partitions
    ]


def others(cluster: Cluster) -> tuple[int, int]:
    c = cluster.controller.broker_id
    return c, 3 - c


async def test_zk_reassignment_runs_a1_a2_then_completes_when_the_target_joins_the_isr(
    cluster: Cluster,
) -> None:
    c, o = others(cluster)
    await topic_on(cluster, c)
    await cluster.stores[c].create_partition_reassignments({TP: (o,)})
    await eventually(
        settled(cluster, lambda: cluster.state("t", 0).leader_epoch == 1), timeout=2, message="no A1"
    )
    assert cluster.zk.topics["t"].partitions[0] == ReplicaAssignment((o, c), (o,), (c,))
    assert cluster.state("t", 0).leader == c
    new_replica = [r for r in cluster.channel.received(o) if isinstance(r, LeaderAndIsrRequest)]
    assert new_replica and new_replica[0].partition_states[0].is_new
    assert new_replica[0].partition_states[0].adding_replicas == [o]
    assert cluster.zk.reassignments == {TP: (o,)}, "the request stays until it completes"
    controller = cluster.controller
    assert controller.context.partitions_being_reassigned == {TP}
    assert controller.metrics.snapshot()["ReassigningPartitions"] == 1

    await catch_up(cluster, c, o)
    await eventually(
        settled(cluster, lambda: cluster.zk.reassignments is None), timeout=2, message="not done"
    )
    state = cluster.state("t", 0)
    assert (state.leader, state.leader_epoch, state.isr) == (o, 3, (o,))
    assert cluster.zk.topics["t"].partitions[0] == ReplicaAssignment((o,))
    assert controller.context.assignment(TP) == ReplicaAssignment((o,))
    assert stop_replicas(cluster, c) == [False, True], "StopReplica without, then with delete"
    assert PartitionReplica(TP, c) not in controller.context.replica_states
    assert controller.context.partitions_being_reassigned == set()
    assert controller.metrics.timers[ControllerState.ALTER_PARTITION_REASSIGNMENT].count >= 1


async def test_a_dead_target_halts_at_a1_and_the_reassignment_resumes_when_it_starts(
    cluster: Cluster,
) -> None:
    c, o = others(cluster)
    await topic_on(cluster, c)
    await cluster.kill(o)
    await eventually(settled(cluster, lambda: True), timeout=2, message="not settled")
    await cluster.stores[c].create_partition_reassignments({TP: (o,)})
    await eventually(
        settled(cluster, lambda: cluster.state("t", 0).leader_epoch == 1), timeout=2, message="no A1"
    )
    assert cluster.zk.reassignments == {TP: (o,)}
    await cluster.start(o)
    await eventually(
        settled(cluster, lambda: cluster.state("t", 0).leader_epoch == 2),
        timeout=2,
        message="A1 did not run again when the target started",
    )
    await catch_up(cluster, c, o)
    await eventually(
        settled(cluster, lambda: cluster.zk.reassignments is None), timeout=2, message="not done"
    )
    state = cluster.state("t", 0)
    assert (state.leader, state.leader_epoch) == (o, 4)
    assert cluster.zk.topics["t"].partitions[0] == ReplicaAssignment((o,))


async def test_a_reassignment_to_the_current_replicas_only_bumps_the_leader_epoch(cluster: Cluster) -> None:
    c, _ = others(cluster)
    await topic_on(cluster, c)
    await cluster.stores[c].create_partition_reassignments({TP: (c,)})
    await eventually(
        settled(cluster, lambda: cluster.zk.reassignments is None), timeout=2, message="not done"
    )
    assert cluster.state("t", 0).leader_epoch == 1


async def reassign(
    cluster: Cluster, replicas: list[int] | None, *, topic: str = "t", partition: int = 0
) -> tuple[int, str | None]:
    answer = await cluster.controller.alter_partition_reassignments(
        AlterPartitionReassignmentsRequest(
            topics=[
                ReassignableTopic(
                    name=topic,
                    partitions=[ReassignablePartition(partition_index=partition, replicas=replicas)],
                )
            ]
        )
    )
    assert answer.error_code == 0
    result = answer.responses[0].partitions[0]
    return result.error_code, result.error_message


async def test_api_reassignment_is_listed_and_can_be_cancelled(cluster: Cluster) -> None:
    c, o = others(cluster)
    await topic_on(cluster, c)
    assert await reassign(cluster, [o]) == (ErrorCode.NONE, None)
    listed = await cluster.controller.list_partition_reassignments(ListPartitionReassignmentsRequest())
    assert listed.error_code == 0
    (topic,) = listed.topics
    (partition,) = topic.partitions
    assert (topic.name, partition.replicas, partition.adding_replicas, partition.removing_replicas) == (
        "t",
        [o, c],
        [o],
        [c],
    )
    named = await cluster.controller.list_partition_reassignments(
        ListPartitionReassignmentsRequest(
            topics=[ListPartitionReassignmentsTopics(name="t", partition_indexes=[0, 7])]
        )
    )
    assert [p.partition_index for t in named.topics for p in t.partitions] == [0]

    assert (await reassign(cluster, None))[0] == ErrorCode.NONE
    await eventually(settled(cluster, lambda: True), timeout=2, message="not settled")
    assert cluster.zk.topics["t"].partitions[0] == ReplicaAssignment((c,))
    assert stop_replicas(cluster, o) == [False, True], "the replica being added is stopped and deleted"
    empty = await cluster.controller.list_partition_reassignments(ListPartitionReassignmentsRequest())
    assert empty.topics == []
    assert (await reassign(cluster, None))[0] == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS


async def test_api_refusals_change_nothing(cluster: Cluster) -> None:
    c, o = others(cluster)
    await topic_on(cluster, c)
    assert (await reassign(cluster, []))[0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert (await reassign(cluster, [o, o]))[0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert (await reassign(cluster, [-3]))[0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert (await reassign(cluster, [o, 9]))[0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert (await reassign(cluster, [o], partition=5))[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert (await reassign(cluster, [o], topic="nope"))[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert cluster.zk.topics["t"].partitions[0] == ReplicaAssignment((c,))
    assert cluster.state("t", 0).leader_epoch == 0


async def test_a_target_on_a_broker_in_controlled_shutdown_is_refused(cluster: Cluster) -> None:
    c, o = others(cluster)
    await topic_on(cluster, c)
    cluster.controller.context.shutting_down.add(o)
    assert (await reassign(cluster, [o]))[0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert cluster.zk.topics["t"].partitions[0] == ReplicaAssignment((c,))


async def test_an_unexpected_error_after_step_u_leaves_the_reassignment_started(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    c, o = others(cluster)
    await topic_on(cluster, c)
    steps = cluster.controller.reassignment._steps

    async def broken(*_: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(steps, "_start_adding", broken)
    assert (await reassign(cluster, [o]))[0] == ErrorCode.NONE, "U was written: started"
    assert cluster.zk.topics["t"].partitions[0] == ReplicaAssignment((o, c), (o,), (c,))
    monkeypatch.setattr(steps, "_update", broken)
    assert (await reassign(cluster, [c]))[0] == ErrorCode.UNKNOWN_SERVER_ERROR, "U not written: failed"


async def test_a_new_target_supersedes_one_in_flight_and_stops_its_new_replica(cluster: Cluster) -> None:
    c, o = others(cluster)
    await cluster.start(3)
    await eventually(settled(cluster, lambda: True), timeout=2, message="not settled")
    await topic_on(cluster, c)
    await reassign(cluster, [o])
    assert (await reassign(cluster, [3]))[0] == ErrorCode.NONE
    await eventually(settled(cluster, lambda: True), timeout=2, message="not settled")
    assert cluster.zk.topics["t"].partitions[0] == ReplicaAssignment((3, c), (3,), (c,))
    assert stop_replicas(cluster, o) == [False, True]
    await catch_up(cluster, c, 3)
    await eventually(
        settled(cluster, lambda: cluster.zk.topics["t"].partitions[0] == ReplicaAssignment((3,))),
        timeout=2,
        message="not done",
    )


async def test_a_superseded_replica_that_leads_hands_leadership_over_before_it_stops(
    cluster: Cluster,
) -> None:
    """Found by the simulation (seed 31): a replica the first reassignment was adding had
    become leader; the second reassignment, which no longer wanted it, stopped it and left
    the partition without a leader, so the new replicas had nobody to catch up from and the
    reassignment never completed."""
    c, o = others(cluster)
    await cluster.start(3)
    await eventually(settled(cluster, lambda: True), timeout=2, message="not settled")
    await topic_on(cluster, c)
    await reassign(cluster, [o, 3])
    await catch_up(cluster, c, o)
    await cluster.controller.elect_leaders(ElectionType.PREFERRED, frozenset({TP}))
    assert cluster.state("t", 0).leader == o, "the replica being added leads"
    assert (await reassign(cluster, [c, 3]))[0] == ErrorCode.NONE
    await eventually(settled(cluster, lambda: True), timeout=2, message="not settled")
    state = cluster.state("t", 0)
    assert (state.leader, state.isr) == (c, (c,)), state
    assert stop_replicas(cluster, o) == [False, True]


async def test_a_reassignment_that_would_drop_every_in_sync_replica_keeps_them_until_the_targets_catch_up(
    cluster: Cluster,
) -> None:
    """Found by the simulation (seed 11680 of 100,000): a reassignment back to its origin came
    when only the replica it was adding was left in the ISR, and leading; Kafka stops and
    deletes that replica at once, and with it the only in-sync copy of acknowledged writes."""
    c, o = others(cluster)
    await cluster.start(3)
    await eventually(settled(cluster, lambda: True), timeout=2, message="not settled")
    await topic_on(cluster, c)
    await reassign(cluster, [o, 3])
    await catch_up(cluster, c, o)
    await cluster.controller.elect_leaders(ElectionType.PREFERRED, frozenset({TP}))
    await catch_up(cluster, o)  # the origin replica fell out of the ISR
    assert (cluster.state("t", 0).leader, cluster.state("t", 0).isr) == (o, (o,))
    assert (await reassign(cluster, [c]))[0] == ErrorCode.NONE
    await eventually(settled(cluster, lambda: True), timeout=2, message="not settled")
    assert stop_replicas(cluster, o) == [], "the only in-sync replica was stopped"
    assert cluster.zk.topics["t"].partitions[0] == ReplicaAssignment((c, o), (), (o,))
    assert cluster.state("t", 0).leader == o
    # Once the target caught up from it, the replica goes.
    await catch_up(cluster, o, c)
    await eventually(
        settled(cluster, lambda: cluster.zk.topics["t"].partitions[0] == ReplicaAssignment((c,))),
        timeout=2,
        message="the reassignment did not complete once its target was in sync",
    )
    assert cluster.state("t", 0).leader == c
    assert stop_replicas(cluster, o)[-1] is True


async def _controller_dies_after_step_u(
    cluster: Cluster, controller: int, written: ReplicaAssignment
) -> None:
    """A superseding reassignment's step U (or a cancellation's) written to ZooKeeper by
    `controller`, which dies before it stops the replicas the new assignment dropped."""
    await cluster.stores[controller].set_partition_assignments(
        "t", {0: written}, cluster.controller.context.epoch_zk_version
    )
    await cluster.kill(controller)


async def test_an_in_sync_replica_dropped_before_the_controller_moved_leads_until_the_targets_catch_up(
    cluster: Cluster,
) -> None:
    """Found by the simulation (seed 40029): a reassignment superseded another and wrote its
    assignment (step U), which dropped a replica the first one had added to the ISR; the
    controller lost its role before it stopped that replica (which takes it out of the ISR).
    The leader, in the new assignment, then died: the dropped replica was the only one left
    in the ISR, no replica of the assignment could lead, and the targets had nobody to catch
    up from, so the reassignment never completed (Kafka's updateCurrentReassignment leaves
    the same gap)."""
    c, o = others(cluster)
    await cluster.start(3)
    await eventually(settled(cluster, lambda: True), timeout=2, message="not settled")
    await topic_on(cluster, c)
    await reassign(cluster, [o, 3])
    await catch_up(cluster, c, o)
    assert cluster.state("t", 0).isr == (c, o)
    # ZooKeeper now holds o in the ISR and out of the assignment.
    await _controller_dies_after_step_u(cluster, c, ReplicaAssignment((c, 3), (3,), ()))
    await eventually(
        settled(cluster, lambda: len(cluster.active()) == 1), timeout=2, message="no new controller"
    )
    await eventually(
        settled(cluster, lambda: cluster.state("t", 0).leader == o),
        timeout=2,
        message=f"the only in-sync replica does not lead: {cluster.state('t', 0)}",
    )
    assert cluster.zk.topics["t"].partitions[0] == ReplicaAssignment((c, 3, o), (3,), (o,))
    assert stop_replicas(cluster, o) == [], "the only in-sync replica was stopped"
    # Once the live target caught up from it, and the dead one is back, the replica goes.
    await catch_up(cluster, o, 3)
    await cluster.start(c)
    await eventually(settled(cluster, lambda: True), timeout=2, message="not settled")
    await catch_up(cluster, o, 3, c)
    await eventually(
        settled(cluster, lambda: cluster.zk.topics["t"].partitions[0] == ReplicaAssignment((c, 3))),
        timeout=2,
        message="the reassignment did not complete once its targets were in sync",
    )
    assert cluster.state("t", 0).leader in (c, 3)
    assert stop_replicas(cluster, o)[-1] is True


async def test_the_next_controller_stops_an_in_sync_replica_a_superseding_reassignment_dropped(
    cluster: Cluster,
) -> None:
    """The same interrupted step U, with a target replica still in sync: the next controller
    stops the dropped replica, as the one that wrote U would have, rather than leave it in
    the ISR, where it would stay once the reassignment completed."""
    c, o = others(cluster)
    await cluster.start(3)
    await cluster.start(4)
    await eventually(settled(cluster, lambda: True), timeout=2, message="not settled")
    await topic_on(cluster, 3)
    await reassign(cluster, [o, 4])
    await catch_up(cluster, 3, o)
    await _controller_dies_after_step_u(cluster, c, ReplicaAssignment((3, 4), (4,), ()))
    await eventually(
        settled(cluster, lambda: len(cluster.active()) == 1), timeout=2, message="no new controller"
    )
    await eventually(
        settled(cluster, lambda: cluster.state("t", 0).isr == (3,)),
        timeout=2,
        message=f"the dropped replica stayed in the ISR: {cluster.state('t', 0)}",
    )
    assert stop_replicas(cluster, o) == [False, True]
    await catch_up(cluster, 3, 4)
    await eventually(
        settled(cluster, lambda: cluster.zk.topics["t"].partitions[0] == ReplicaAssignment((3, 4))),
        timeout=2,
        message="the reassignment did not complete once its target was in sync",
    )
    assert sorted(cluster.state("t", 0).isr) == [3, 4]


async def test_the_next_controller_stops_an_in_sync_replica_a_cancellation_dropped(cluster: Cluster) -> None:
    """The same, for a cancellation: no reassignment is left in progress for the next
    controller to resume, so its failover looks for in-sync replicas outside the assignment."""
    c, o = others(cluster)
    await cluster.start(3)
    await eventually(settled(cluster, lambda: True), timeout=2, message="not settled")
    await topic_on(cluster, 3)
    await reassign(cluster, [o, c])
    await catch_up(cluster, 3, o)
    await _controller_dies_after_step_u(cluster, c, ReplicaAssignment((3,)))
    await eventually(
        settled(cluster, lambda: len(cluster.active()) == 1 and cluster.state("t", 0).isr == (3,)),
        timeout=2,
        message=f"the dropped replica stayed in the ISR: {cluster.state('t', 0)}",
    )
    assert stop_replicas(cluster, o) == [False, True]
    assert cluster.zk.topics["t"].partitions[0] == ReplicaAssignment((3,))
    assert cluster.controller.context.partitions_being_reassigned == set()


async def test_an_api_reassignment_supersedes_the_zookeeper_request(cluster: Cluster) -> None:
    c, o = others(cluster)
    await topic_on(cluster, c)
    await cluster.kill(o)
    await cluster.stores[c].create_partition_reassignments({TP: (o,)})
    await eventually(
        settled(cluster, lambda: cluster.state("t", 0).leader_epoch == 1), timeout=2, message="no A1"
    )
    assert (await reassign(cluster, None))[0] == ErrorCode.NONE
    await eventually(
        settled(cluster, lambda: cluster.zk.reassignments is None), timeout=2, message="node left"
    )
    assert cluster.zk.topics["t"].partitions[0] == ReplicaAssignment((c,))


async def test_an_unreadable_zookeeper_request_is_ignored(cluster: Cluster) -> None:
    c, _ = others(cluster)
    await topic_on(cluster, c)
    cluster.stores[c].write_invalid_reassignments()
    await eventually(settled(cluster, lambda: True), timeout=2, message="not settled")
    assert cluster.zk.topics["t"].partitions[0] == ReplicaAssignment((c,))
    assert cluster.state("t", 0).leader_epoch == 0


async def test_the_next_controller_resumes_a_reassignment_in_flight(cluster: Cluster) -> None:
    c, o = others(cluster)
    await cluster.start(3)
    await eventually(settled(cluster, lambda: True), timeout=2, message="not settled")
    await topic_on(cluster, o)
    await reassign(cluster, [3])
    await cluster.kill(c)
    await eventually(
        settled(cluster, lambda: any(x.is_active for x in cluster.controllers.values())),
        timeout=2,
        message="no new controller",
    )
    new = cluster.controller
    assert new.context.partitions_being_reassigned == {TP}
    await catch_up(cluster, o, 3)
    await eventually(
        settled(cluster, lambda: cluster.zk.topics["t"].partitions[0] == ReplicaAssignment((3,))),
        timeout=2,
        message="the new controller did not finish the reassignment",
    )
    assert cluster.state("t", 0).leader == 3
    assert new.context.replica_states.get(PartitionReplica(TP, o)) is None
    assert ReplicaState.DELETION_STARTED not in new.context.replica_states.values()


async def test_a_controller_that_is_not_active_answers_not_controller(cluster: Cluster) -> None:
    _, o = others(cluster)
    follower = cluster.controllers[o]
    answer = await follower.alter_partition_reassignments(AlterPartitionReassignmentsRequest(topics=[]))
    assert answer.error_code == ErrorCode.NOT_CONTROLLER
    listed = await follower.list_partition_reassignments(ListPartitionReassignmentsRequest())
    assert listed.error_code == ErrorCode.NOT_CONTROLLER


async def test_a_controller_fenced_out_mid_reassignment_answers_not_controller_and_resigns(
    cluster: Cluster,
) -> None:
    c, o = others(cluster)
    await topic_on(cluster, c)
    # Another controller is elected behind this one's back (spec §12.1 ControllerMove...).
    assert cluster.zk.controller is not None and cluster.zk.epoch is not None
    cluster.zk.controller.value = o
    cluster.zk.epoch = (cluster.zk.epoch[0] + 1, cluster.zk.epoch[1] + 1)
    controller = cluster.controllers[c]
    answer = await controller.alter_partition_reassignments(
        AlterPartitionReassignmentsRequest(
            topics=[
                ReassignableTopic(
                    name="t", partitions=[ReassignablePartition(partition_index=0, replicas=[o])]
                )
            ]
        )
    )
    assert answer.error_code == ErrorCode.NOT_CONTROLLER
    await eventually(settled(cluster, lambda: not controller.is_active), timeout=2, message="did not resign")
    assert cluster.zk.topics["t"].partitions[0] == ReplicaAssignment((c,)), "the fenced write changed nothing"


async def test_many_partitions_move_in_one_batch_per_step(cluster: Cluster) -> None:
    c, o = others(cluster)
    await cluster.create_topic("big", {p: (c,) for p in range(20)})
    await eventually(
        settled(cluster, lambda: len(cluster.zk.partition_states) == 20), timeout=2, message="no topic"
    )
    store = cluster.stores[c]
    writes: list[str] = []
    original = store.set_partition_assignments

    async def counting(topic: str, partitions: dict[int, ReplicaAssignment], epoch_zk_version: int) -> None:
        writes.append(topic)
        await original(topic, partitions, epoch_zk_version)

    store.set_partition_assignments = counting  # type: ignore[method-assign]
    cluster.channel.take()
    answer = await cluster.controller.alter_partition_reassignments(
        AlterPartitionReassignmentsRequest(
            topics=[
                ReassignableTopic(
                    name="big",
                    partitions=[ReassignablePartition(partition_index=p, replicas=[o]) for p in range(20)],
                )
            ]
        )
    )
    assert [p.error_code for t in answer.responses for p in t.partitions] == [0] * 20
    assert writes == ["big"], "U writes the topic znode once for all its partitions"
    to_new = [r for r in cluster.channel.received(o) if isinstance(r, LeaderAndIsrRequest)]
    assert len(to_new) == 1 and len(to_new[0].partition_states) == 20, "A1 is one LeaderAndIsr per broker"
    assert cluster.controller.metrics.snapshot()["ReassigningPartitions"] == 20


async def test_reassignment_requests_pre_empted_in_the_queue_answer_not_controller(cluster: Cluster) -> None:
    controller = cluster.controller
    alter = asyncio.create_task(
        controller.alter_partition_reassignments(AlterPartitionReassignmentsRequest(topics=[]))
    )
    listing = asyncio.create_task(
        controller.list_partition_reassignments(ListPartitionReassignmentsRequest())
    )
    await asyncio.sleep(0)  # both are queued; the event loop has not run the controller yet
    controller.event_manager.clear_and_put(Expire())
    assert (await alter).error_code == ErrorCode.NOT_CONTROLLER
    assert (await listing).error_code == ErrorCode.NOT_CONTROLLER


async def test_a_topic_marked_for_deletion_mid_reassignment_is_deleted_once_it_completes(
    cluster: Cluster,
) -> None:
    c, o = others(cluster)
    await topic_on(cluster, c)
    await cluster.stores[c].create_partition_reassignments({TP: (o,)})
    await eventually(
        settled(cluster, lambda: cluster.state("t", 0).leader_epoch == 1), timeout=2, message="no A1"
    )
    await topic_admin(cluster.stores[c]).mark_topic_for_deletion("t")
    context = cluster.controller.context
    await eventually(
        settled(cluster, lambda: "t" in context.topics_ineligible_for_deletion),
        timeout=2,
        message="the topic was not held",
    )
    assert "t" in cluster.zk.topics and TP in cluster.zk.partition_states
    assert await reassign(cluster, None) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "topic t is being deleted")
    await catch_up(cluster, c, o)
    await eventually(
        settled(cluster, lambda: "t" not in cluster.zk.topics and "t" not in context.all_topics),
        timeout=2,
        message="the deletion did not resume after the reassignment",
    )
    assert cluster.zk.reassignments is None
