"""The controller's partition maps keep OfflinePartitionsCount and PreferredReplicaImbalanceCount
current as they change: each count equals a pass over every partition, whatever the writes."""

from __future__ import annotations

import random

import pytest

from actors.base.ports import LeaderAndIsr, LeadershipInfo, ReplicaAssignment, TopicPartition
from actors.controller.context import ControllerContext, PartitionState
from node.sim.invariants import partition_gauges_by_a_pass, unelected_by_a_pass


def led_by(leader: int, isr: tuple[int, ...] = (1, 2, 3)) -> LeadershipInfo:
    return LeadershipInfo(LeaderAndIsr(leader=leader, leader_epoch=0, isr=isr), 1)


def gauges(context: ControllerContext) -> tuple[int, int]:
    return context.offline_partition_count(), context.preferred_replica_imbalance_count()


def test_each_write_moves_the_gauges_at_once() -> None:
    context = ControllerContext()
    t0, t1, u0 = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 0)
    for tp in (t0, t1, u0):
        context.set_assignment(tp, ReplicaAssignment((1, 2, 3)))
        context.leadership[tp] = led_by(1)
        context.partition_states[tp] = PartitionState.ONLINE
    assert gauges(context) == (0, 0)
    context.leadership[t0] = led_by(2)
    context.partition_states[t1] = PartitionState.OFFLINE
    context.partition_states[u0] = PartitionState.OFFLINE
    assert gauges(context) == (2, 1)
    context.set_assignment(t0, ReplicaAssignment((2, 1, 3)))  # its leader is now preferred
    assert gauges(context) == (2, 0)
    context.topics_with_deletion_started.add("u")
    assert gauges(context) == (1, 0)
    context.remove_topic("u")
    context.partition_states[t1] = PartitionState.ONLINE
    assert gauges(context) == (0, 0) == partition_gauges_by_a_pass(context)


def test_a_loaded_leadership_is_counted_in_slices_or_at_the_first_read() -> None:
    context = ControllerContext()
    states = {}
    for p in range(10):
        tp = TopicPartition("t", p)
        context.set_assignment(tp, ReplicaAssignment((1, 2, 3)))
        states[tp] = led_by(1 + p % 3)
    context.leadership.load(states)
    assert context.preferred_replica_imbalance_count() == 6 == partition_gauges_by_a_pass(context)[1]
    # A second load replaces the first, counted anew.
    context.leadership.load({TopicPartition("t", 0): led_by(2)})
    assert len(context.leadership) == 1
    assert context.preferred_replica_imbalance_count() == 1


async def test_a_recount_in_slices_gives_what_a_pass_gives() -> None:
    context = ControllerContext()
    states = {}
    for p in range(5000):
        tp = TopicPartition(f"t{p % 7}", p)
        context.set_assignment(tp, ReplicaAssignment((1, 2, 3)))
        states[tp] = led_by(1 + p % 2)
    context.leadership.load(states)
    await context.leadership.recount_in_slices()
    assert context.preferred_replica_imbalance_count() == 2500 == partition_gauges_by_a_pass(context)[1]


def test_writes_that_would_bypass_the_gauges_are_refused() -> None:
    context = ControllerContext()
    tp = TopicPartition("t", 0)
    with pytest.raises(TypeError):
        context.partition_states.update({tp: PartitionState.OFFLINE})
    with pytest.raises(TypeError):
        context.leadership.setdefault(tp, led_by(1))
    with pytest.raises(TypeError):
        context.leadership.clear()
    assert gauges(context) == (0, 0)


def test_the_gauges_equal_a_pass_over_every_partition_under_any_mix_of_writes() -> None:
    rng = random.Random(11)
    context = ControllerContext()
    tps = [TopicPartition(f"t{t}", p) for t in range(4) for p in range(30)]
    for _ in range(5000):
        tp = rng.choice(tps)
        replicas = tuple(rng.sample([1, 2, 3, 4], 3))
        match rng.randrange(9):
            case 0 | 1:
                context.leadership[tp] = led_by(rng.choice(replicas), tuple(rng.sample(replicas, 2)))
            case 2:
                adding = (replicas[0],) if rng.random() < 0.3 else ()
                context.set_assignment(tp, ReplicaAssignment(replicas, adding=adding))
            case 3 | 4:
                context.partition_states[tp] = rng.choice(list(PartitionState))
            case 5:
                context.partition_states.pop(tp, None)
                context.leadership.pop(tp, None)
            case 6:
                context.topics_to_be_deleted ^= {tp.topic}
            case 7:
                context.topics_with_deletion_started ^= {tp.topic}
            case 8:
                if rng.random() < 0.05:
                    context.remove_topic(tp.topic)
        assert gauges(context) == partition_gauges_by_a_pass(context)
        assert sorted(context.partition_states.new_or_offline()) == unelected_by_a_pass(context)


def test_states_loaded_at_once_are_counted_as_if_set_one_by_one() -> None:
    context = ControllerContext()
    t0, t1, t2 = (TopicPartition("t", p) for p in range(3))
    context.partition_states[t0] = PartitionState.OFFLINE
    context.partition_states.load(
        {t0: PartitionState.ONLINE, t1: PartitionState.NEW, t2: PartitionState.OFFLINE}
    )
    assert context.offline_partition_count() == 1
    assert sorted(context.partition_states.new_or_offline()) == [t1, t2] == unelected_by_a_pass(context)
