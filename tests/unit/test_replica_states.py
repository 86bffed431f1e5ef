"""ReplicaStates (actors/controller/context.py): a mapping of replica to state, kept per topic,
where a whole topic can be assumed online without an entry per replica; what is set or
removed since overrides the assumption."""

from __future__ import annotations

import pytest

from actors.base.ports import ReplicaAssignment, TopicPartition
from actors.controller.context import PartitionReplica, ReplicaState, ReplicaStates

T0, T1, U0 = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 0)


def r(tp: TopicPartition, broker: int) -> PartitionReplica:
    return PartitionReplica(tp, broker)


def test_a_topic_assumed_online_reads_as_an_entry_per_replica() -> None:
    states = ReplicaStates()
    states[r(U0, 1)] = ReplicaState.OFFLINE
    states.assume_online("t", {0: ReplicaAssignment((1, 2)), 1: ReplicaAssignment((2, 3))})
    assert states[r(T0, 1)] == ReplicaState.ONLINE and states.get(r(T1, 3)) == ReplicaState.ONLINE
    assert r(T0, 3) not in states
    assert states.get(r(T0, 3), ReplicaState.NON_EXISTENT) == ReplicaState.NON_EXISTENT
    assert states == {
        r(U0, 1): ReplicaState.OFFLINE,
        r(T0, 1): ReplicaState.ONLINE,
        r(T0, 2): ReplicaState.ONLINE,
        r(T1, 2): ReplicaState.ONLINE,
        r(T1, 3): ReplicaState.ONLINE,
    }
    assert len(states) == 5


def test_a_state_set_or_a_replica_removed_overrides_the_assumption() -> None:
    states = ReplicaStates()
    states.assume_online("t", {0: ReplicaAssignment((1, 2))})
    states[r(T0, 1)] = ReplicaState.OFFLINE
    assert states[r(T0, 1)] == ReplicaState.OFFLINE
    assert states.pop(r(T0, 2), None) == ReplicaState.ONLINE
    assert r(T0, 2) not in states, "removed: NonExistent, not assumed online again"
    del states[r(T0, 1)]
    assert r(T0, 1) not in states and len(states) == 0
    with pytest.raises(KeyError):
        del states[r(T0, 1)]
    states[r(T0, 2)] = ReplicaState.NEW
    assert states[r(T0, 2)] == ReplicaState.NEW, "set again after its removal"


def test_a_topic_goes_in_one_step() -> None:
    states = ReplicaStates()
    states.assume_online("t", {0: ReplicaAssignment((1,))})
    states[r(T1, 4)] = ReplicaState.DELETION_STARTED
    states[r(U0, 1)] = ReplicaState.ONLINE
    states.remove_topic("t")
    assert dict(states) == {r(U0, 1): ReplicaState.ONLINE}
