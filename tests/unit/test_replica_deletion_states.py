"""The replica state machine's deletion path (spec §5.2, §12.3), which reassignment uses to
take removed replicas down: Offline → DeletionStarted (StopReplica with delete) →
DeletionSuccessful → NonExistent (gone from the assignment), and the invalid transitions."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from actors.base.ports import ReplicaAssignment, TopicPartition
from actors.controller.context import PartitionReplica, ReplicaState
from tests.controllers import ControllerCluster as Cluster
from tests.controllers import settled, started
from tests.support import eventually
from wire.api import StopReplicaRequest

TP = TopicPartition("t", 0)


@pytest.fixture
async def cluster() -> AsyncIterator[Cluster]:
    cluster = Cluster()
    await started(cluster, 1, 2)
    await cluster.create_topic("t", {0: (1, 2)})
    await eventually(
        settled(cluster, lambda: TP in cluster.zk.partition_states), timeout=2, message="no topic"
    )
    yield cluster
    await cluster.stop()


def deletes_to(cluster: Cluster, broker: int) -> list[bool]:
    return [
        p.delete_partition
        for r in cluster.channel.received(broker)
        if isinstance(r, StopReplicaRequest)
        for p in r.partitions
    ]


async def test_the_deletion_path_stops_deletes_and_forgets_the_replica(cluster: Cluster) -> None:
    controller = cluster.controller
    machine = controller.replica_state_machine
    replica = PartitionReplica(TP, 2)
    cluster.channel.take()
    await machine.handle_state_changes([replica], ReplicaState.OFFLINE)
    assert deletes_to(cluster, 2) == [False]
    await machine.handle_state_changes([replica], ReplicaState.DELETION_STARTED)
    assert deletes_to(cluster, 2) == [False, True]
    assert machine.state(replica) == ReplicaState.DELETION_STARTED
    await machine.handle_state_changes([replica], ReplicaState.DELETION_SUCCESSFUL)
    assert machine.state(replica) == ReplicaState.DELETION_SUCCESSFUL
    await machine.handle_state_changes([replica], ReplicaState.NON_EXISTENT)
    assert machine.state(replica) == ReplicaState.NON_EXISTENT
    assert replica not in controller.context.replica_states
    assert controller.context.assignment(TP) == ReplicaAssignment((1,))


async def test_deletion_ineligible_is_reached_from_offline_and_deletion_started(cluster: Cluster) -> None:
    machine = cluster.controller.replica_state_machine
    replica = PartitionReplica(TP, 2)
    await machine.handle_state_changes([replica], ReplicaState.OFFLINE)
    await machine.handle_state_changes([replica], ReplicaState.DELETION_INELIGIBLE)
    assert machine.state(replica) == ReplicaState.DELETION_INELIGIBLE
    await machine.handle_state_changes([replica], ReplicaState.OFFLINE)
    await machine.handle_state_changes([replica], ReplicaState.DELETION_STARTED)
    await machine.handle_state_changes([replica], ReplicaState.DELETION_INELIGIBLE)
    assert machine.state(replica) == ReplicaState.DELETION_INELIGIBLE


@pytest.mark.parametrize(
    "target",
    [ReplicaState.DELETION_STARTED, ReplicaState.DELETION_SUCCESSFUL, ReplicaState.NON_EXISTENT],
)
async def test_an_online_replica_cannot_skip_to_the_deletion_states(
    cluster: Cluster, target: ReplicaState
) -> None:
    controller = cluster.controller
    replica = PartitionReplica(TP, 2)
    cluster.channel.take()
    await controller.replica_state_machine.handle_state_changes([replica], target)
    assert controller.replica_state_machine.state(replica) == ReplicaState.ONLINE
    assert controller.context.assignment(TP) == ReplicaAssignment((1, 2))
    assert deletes_to(cluster, 2) == []
