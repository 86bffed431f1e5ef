"""The controller's state-change log (actors/base/state_change_log.py): its state machines' lines in
Kafka's words, with the controller epoch, on the real state machines, the in-memory store and
a recording channel."""

from __future__ import annotations

import logging

import pytest

from actors.base.ports import (
    LeaderAndIsr,
    LeadershipInfo,
    RegisteredBroker,
    ReplicaAssignment,
    TopicPartition,
)
from actors.base.state_change_log import STATE_CHANGE_LOGGER, StateChangeLogger
from actors.controller.context import ControllerContext, PartitionReplica, PartitionState, ReplicaState
from actors.controller.partition_state_machine import PartitionStateMachine, Strategy
from actors.controller.replica_state_machine import ReplicaStateMachine
from actors.controller.request_batch import RequestBatch
from tests.controllers import info
from tests.fakes import FakeBrokerChannel, FakeClusterStore, FakeZooKeeper

TP = TopicPartition("t", 0)


class Controller:
    """Controller 9 at epoch 4: t-0 on brokers 0 and 1, led by 0, every replica online."""

    def __init__(self) -> None:
        zk = FakeZooKeeper()
        zk.elected(9, (4, 4))
        self.store = FakeClusterStore(zk)
        self.channel = FakeBrokerChannel()
        self.context = ControllerContext(epoch=4, epoch_zk_version=4)
        for broker in (0, 1):
            registered = RegisteredBroker(info(broker), 100 + broker)
            self.context.live_brokers[broker] = registered
            self.channel.add_broker(registered)
        state = LeaderAndIsr(0, 3, (0, 1), partition_epoch=6)
        zk.partition_states[TP] = (state, 4, 6)
        self.context.all_topics.add("t")
        self.context.set_assignment(TP, ReplicaAssignment((0, 1)))
        self.context.leadership[TP] = LeadershipInfo(state, 4)
        self.context.partition_states[TP] = PartitionState.ONLINE
        for replica in (0, 1):
            self.context.replica_states[PartitionReplica(TP, replica)] = ReplicaState.ONLINE
        log = StateChangeLogger.for_controller(9, lambda: self.context.epoch)
        self.partitions = PartitionStateMachine(
            self.context,
            self.store,
            self.new_batch,
            unclean_default=False,
            on_unclean_election=lambda tp: None,
            state_change_log=log,
        )
        self.replicas = ReplicaStateMachine(self.context, self.store, self.new_batch, log)

    def new_batch(self) -> RequestBatch:
        return RequestBatch(self.context, self.channel, 9)


def _lines(caplog: pytest.LogCaptureFixture, level: int = logging.INFO) -> list[str]:
    return [
        line
        for r in caplog.records
        if r.name == STATE_CHANGE_LOGGER and r.levelno == level
        for line in r.getMessage().split("\n")
    ]


async def test_a_dead_leaders_partition_goes_offline_then_online_with_the_controller_epoch(
    caplog: pytest.LogCaptureFixture,
) -> None:
    controller = Controller()
    del controller.context.live_brokers[0]
    with caplog.at_level(logging.DEBUG, logger=STATE_CHANGE_LOGGER):
        await controller.replicas.handle_state_changes([PartitionReplica(TP, 0)], ReplicaState.OFFLINE)
        await controller.partitions.handle_state_changes([TP], PartitionState.OFFLINE)
        await controller.partitions.handle_state_changes([TP], PartitionState.ONLINE, Strategy.OFFLINE)

    prefix = "[Controller id=9 epoch=4] "
    assert _lines(caplog, logging.DEBUG) == [
        f"{prefix}Changed state of replica 0 for partition t-0 from OnlineReplica to OfflineReplica"
    ]
    changes = [line for line in _lines(caplog) if "Changed partition" in line]
    # Broker 0 left the ISR as it went offline (leader -1, leader epoch 4); broker 1 leads at 5.
    assert changes == [
        f"{prefix}Changed partition t-0 state from OnlinePartition to OfflinePartition",
        f"{prefix}Changed partition t-0 from OfflinePartition to OnlinePartition with state "
        "LeaderAndIsr(leader=1, leaderEpoch=5, isr=1, partitionEpoch=8)",
    ]
    sent = f"{prefix}Sending LeaderAndIsr request to broker 1 with 1 become-leader and 0 become-follower"
    assert f"{sent} partitions" in _lines(caplog)


async def test_replica_changes_cost_nothing_below_debug(caplog: pytest.LogCaptureFixture) -> None:
    controller = Controller()
    with caplog.at_level(logging.INFO, logger=STATE_CHANGE_LOGGER):
        await controller.replicas.handle_state_changes([PartitionReplica(TP, 1)], ReplicaState.ONLINE)
    assert not any("Changed state of replica" in r.getMessage() for r in caplog.records)
