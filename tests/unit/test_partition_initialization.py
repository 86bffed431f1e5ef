"""A partition whose state znode create failed is never dropped (issue 32): the controller reads
the znode back and adopts it when this controller epoch wrote it, elects from it when another
did, and creates it again after a pause when it is missing; each failure is counted
(PartitionInitializationFailures) and written to the state-change log. A partition with no
live replica stays New, as in Kafka, until one of its brokers starts."""

from __future__ import annotations

import logging

import pytest

from actors.base.ports import LeaderAndIsr, TopicPartition
from actors.base.state_change_log import STATE_CHANGE_LOGGER
from actors.controller.context import PartitionState
from actors.controller.initialization_retries import FIRST_RETRY_S, MAX_RETRY_S
from tests.controllers import ControllerCluster as Cluster
from tests.controllers import leader_and_isr_to, settled, started
from tests.support import eventually

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def _lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        line for r in caplog.records if r.name == STATE_CHANGE_LOGGER for line in r.getMessage().splitlines()
    ]


async def test_a_create_applied_but_answered_as_failed_is_adopted_as_this_controllers_own(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    await started(cluster, 1, 2, 3)
    controller = cluster.controller
    store = cluster.stores[controller.broker_id]
    lost = [True]
    store.lose_replies = lambda: lost.pop() if lost else False
    with caplog.at_level(logging.INFO, logger=STATE_CHANGE_LOGGER):
        await cluster.create_topic("t", {0: (1, 2, 3), 1: (2, 3, 1)})
        await eventually(
            settled(cluster, lambda: controller.context.partition_states.get(T1) == PartitionState.ONLINE),
            timeout=2,
            message="the partitions never came online",
        )
    assert [cluster.state("t", p) for p in (0, 1)] == [
        LeaderAndIsr(1, 0, (1, 2, 3), 0),
        LeaderAndIsr(2, 0, (2, 3, 1), 0),
    ]
    assert controller.context.partition_states[T0] == PartitionState.ONLINE
    for broker in (1, 2, 3):
        told = {s.partition for r in leader_and_isr_to(cluster.channel, broker) for s in r.partition_states}
        assert told == {0, 1}, f"broker {broker} was not told of both partitions"
    assert controller.metrics.snapshot()["PartitionInitializationFailures"] == 2
    lines = _lines(caplog)
    assert any("Failed to create the state znode of partition t-0" in line for line in lines), lines
    adopted = (
        "Partition t-1's state znode holds LeaderAndIsr(leader=2, leaderEpoch=0, isr=2,3,1, "
        "partitionEpoch=0), written at this controller epoch: taken as its initial state"
    )
    assert any(adopted in line for line in lines), lines


async def test_a_create_that_failed_outright_is_made_again_after_a_pause(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    await started(cluster, 1, 2)
    controller = cluster.controller
    store = cluster.stores[controller.broker_id]
    store.fail_next_create_partition_states = TimeoutError("ZooKeeper did not answer")
    with caplog.at_level(logging.INFO, logger=STATE_CHANGE_LOGGER):
        await cluster.create_topic("t", {0: (1, 2), 1: (2, 1)})
        await eventually(
            settled(cluster, lambda: controller.initialization_retries.pending == {T0, T1}),
            timeout=2,
            message="no retry scheduled",
        )
        assert cluster.zk.partition_states == {}
        assert controller.context.partition_states[T0] == PartitionState.NEW
        # The pause is on the controller's clock; the queue is free meanwhile.
        clock = cluster.clocks[controller.broker_id]
        assert clock.pending() and clock.pending()[0] <= FIRST_RETRY_S * 1.2
        clock.advance(MAX_RETRY_S)
        await eventually(
            settled(cluster, lambda: len(cluster.zk.partition_states) == 2),
            timeout=2,
            message="the partitions were never created again",
        )
    assert cluster.state("t", 1) == LeaderAndIsr(2, 0, (2, 1), 0)
    assert controller.context.partition_states[T1] == PartitionState.ONLINE
    assert controller.initialization_retries.pending == set()
    assert controller.metrics.snapshot()["PartitionInitializationFailures"] == 2
    lines = _lines(caplog)
    assert any("Retrying initialization of partition t-0 in " in line for line in lines), lines
    assert any(line.endswith("Retrying initialization of partition t-1") for line in lines), lines


async def test_a_state_znode_written_by_another_controller_epoch_is_elected_from(cluster: Cluster) -> None:
    """A state left by an earlier controller (its create applied as it lost its role): the
    partition is an existing one, and its leader is elected from the ISR it holds (the first
    live replica of the assignment in it, as Kafka's offline election picks)."""
    await started(cluster, 1, 2, 3)
    controller = cluster.controller
    cluster.zk.write_partition_state(T0, LeaderAndIsr(3, 4, (3, 2)), controller.context.epoch - 1)
    await cluster.create_topic("t", {0: (1, 2, 3)})
    await eventually(
        settled(cluster, lambda: controller.context.partition_states.get(T0) == PartitionState.ONLINE),
        timeout=2,
        message="no leader elected from the existing state",
    )
    assert cluster.state("t", 0) == LeaderAndIsr(2, 5, (3, 2), 1)
    assert controller.metrics.snapshot()["PartitionInitializationFailures"] == 1


async def test_a_retry_ends_with_the_controllers_reign(cluster: Cluster) -> None:
    await started(cluster, 1, 2)
    controller = cluster.controller
    store = cluster.stores[controller.broker_id]
    store.fail_next_create_partition_states = TimeoutError("no answer")
    await cluster.create_topic("t", {0: (1, 2)})
    await eventually(
        settled(cluster, lambda: bool(controller.initialization_retries.pending)),
        timeout=2,
        message="no retry",
    )
    # Its session expires: it resigns (and may be elected again, at a new epoch).
    await store.expire_session()
    await eventually(
        settled(cluster, lambda: T0 in cluster.zk.partition_states),
        timeout=2,
        message="the next reign did not initialise the partition at its failover",
    )
    assert controller.initialization_retries.pending == set()
    assert not controller.initialization_retries.scheduled, "the old reign's retry is still due"


async def test_a_partition_with_no_live_replica_stays_new_until_a_replica_starts(cluster: Cluster) -> None:
    """Kafka's onBrokerStartup moves New partitions Online: the one that could not be
    initialised gets its state when its broker comes."""
    await started(cluster, 1, 2)
    controller = cluster.controller
    await cluster.create_topic("t", {0: (3,), 1: (1, 2)})
    await eventually(
        settled(cluster, lambda: T1 in cluster.zk.partition_states), timeout=2, message="not created"
    )
    assert T0 not in cluster.zk.partition_states
    assert controller.context.partition_states[T0] == PartitionState.NEW
    assert controller.initialization_retries.pending == set(), "no retry: it waits for a replica"
    assert controller.metrics.snapshot()["PartitionInitializationFailures"] == 0
    await cluster.start(3)
    await eventually(
        settled(cluster, lambda: T0 in cluster.zk.partition_states),
        timeout=2,
        message="the partition never got a leader once its replica started",
    )
    assert cluster.state("t", 0) == LeaderAndIsr(3, 0, (3,), 0)
    assert controller.context.partition_states[T0] == PartitionState.ONLINE
