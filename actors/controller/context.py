"""ControllerContext: what the active controller holds in memory (spec §4.3).

`reset` puts it back to the state of a broker that is not the controller.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, MutableMapping
from enum import IntEnum
from typing import NamedTuple, overload

from actors.base.loop_slices import each
from actors.base.ports import (
    RegisteredBroker,
    ReplicaAssignment,
    TopicPartition,
)
from actors.controller.partition_gauges import Leadership, PartitionStates


class PartitionState(IntEnum):
    NEW = 0
    ONLINE = 1
    OFFLINE = 2
    NON_EXISTENT = 3

    @property
    def kafka_name(self) -> str:
        """The name Kafka's state-change log gives the state (`OnlinePartition`)."""
        return _PARTITION_STATE_NAMES[self]


class ReplicaState(IntEnum):
    NEW = 1
    ONLINE = 2
    OFFLINE = 3
    DELETION_STARTED = 4
    DELETION_SUCCESSFUL = 5
    DELETION_INELIGIBLE = 6
    NON_EXISTENT = 7

    @property
    def kafka_name(self) -> str:
        """The name Kafka's state-change log gives the state (`OnlineReplica`)."""
        return _REPLICA_STATE_NAMES[self]


_PARTITION_STATE_NAMES = {
    PartitionState.NEW: "NewPartition",
    PartitionState.ONLINE: "OnlinePartition",
    PartitionState.OFFLINE: "OfflinePartition",
    PartitionState.NON_EXISTENT: "NonExistentPartition",
}
_REPLICA_STATE_NAMES = {
    ReplicaState.NEW: "NewReplica",
    ReplicaState.ONLINE: "OnlineReplica",
    ReplicaState.OFFLINE: "OfflineReplica",
    ReplicaState.DELETION_STARTED: "ReplicaDeletionStarted",
    ReplicaState.DELETION_SUCCESSFUL: "ReplicaDeletionSuccessful",
    ReplicaState.DELETION_INELIGIBLE: "ReplicaDeletionIneligible",
    ReplicaState.NON_EXISTENT: "NonExistentReplica",
}


_NO_REPLICAS = ReplicaAssignment(())


class PartitionReplica(NamedTuple):
    """A NamedTuple, as TopicPartition: a controller holds one per replica (3M at 1M
    partitions of replication factor 3), and a tuple is a quarter smaller than a frozen
    dataclass with the same hash."""

    tp: TopicPartition
    replica: int


_UNSET = object()


class ReplicaStates(MutableMapping[PartitionReplica, ReplicaState]):
    """The replica state machine's states (a mapping of replica to state; a replica absent
    is NonExistent), kept per topic, so that a topic goes in one step.

    A failover sets every online replica Online (spec §5.2): one entry per replica (3M at 1M
    partitions), held for as long as nothing changes. Instead a topic whose replicas' brokers
    are all online is *assumed* online, from a copy of its assignment then. A state
    set since overrides the assumption, and a replica removed since is remembered as removed
    (None), so that the assumption does not bring it back."""

    def __init__(self) -> None:
        self._set: dict[str, dict[PartitionReplica, ReplicaState | None]] = {}
        self._assumed: dict[str, dict[int, ReplicaAssignment]] = {}

    def assume_online(self, topic: str, assignment: dict[int, ReplicaAssignment]) -> None:
        """Every replica of `assignment` (which must not change afterwards) is Online unless
        set otherwise."""
        self._assumed[topic] = assignment

    def remove_topic(self, topic: str) -> None:
        self._set.pop(topic, None)
        self._assumed.pop(topic, None)

    def _assumed_online(self, replica: PartitionReplica) -> bool:
        assumed = self._assumed.get(replica.tp.topic)
        found = None if assumed is None else assumed.get(replica.tp.partition)
        return found is not None and replica.replica in found.replicas

    # Mapping's get also takes a default of any type; states are all this one needs.
    @overload  # type: ignore[override]
    def get(self, replica: PartitionReplica) -> ReplicaState | None: ...

    @overload
    def get(self, replica: PartitionReplica, default: ReplicaState) -> ReplicaState: ...

    def get(self, replica: PartitionReplica, default: ReplicaState | None = None) -> ReplicaState | None:
        set_here = self._set.get(replica.tp.topic)
        state = _UNSET if set_here is None else set_here.get(replica, _UNSET)
        if state is _UNSET:
            return ReplicaState.ONLINE if self._assumed_online(replica) else default
        return default if state is None else state  # type: ignore[return-value]

    def __getitem__(self, replica: PartitionReplica) -> ReplicaState:
        state = self.get(replica)
        if state is None:
            raise KeyError(replica)
        return state

    def __setitem__(self, replica: PartitionReplica, state: ReplicaState) -> None:
        if state is ReplicaState.ONLINE and self._assumed_online(replica):
            # What the assumption already says: no entry (a failover sets every replica
            # Online, which would otherwise make one per replica).
            set_here = self._set.get(replica.tp.topic)
            if set_here is not None:
                set_here.pop(replica, None)
            return
        self._set.setdefault(replica.tp.topic, {})[replica] = state

    def __delitem__(self, replica: PartitionReplica) -> None:
        if self.get(replica) is None:
            raise KeyError(replica)
        set_here = self._set.setdefault(replica.tp.topic, {})
        if self._assumed_online(replica):
            set_here[replica] = None
        else:
            del set_here[replica]

    def __iter__(self) -> Iterator[PartitionReplica]:
        for topic in self._set.keys() | self._assumed.keys():
            set_here = self._set.get(topic, {})
            yield from (r for r, state in set_here.items() if state is not None)
            for partition, assignment in self._assumed.get(topic, {}).items():
                tp = TopicPartition(topic, partition)
                yield from (
                    r for r in (PartitionReplica(tp, b) for b in assignment.replicas) if r not in set_here
                )

    def __len__(self) -> int:
        return sum(1 for _ in self)


@dataclasses.dataclass
class ControllerContext:
    epoch: int = 0
    # The data version of /controller_epoch this controller wrote; fences all its writes.
    epoch_zk_version: int = 0
    live_brokers: dict[int, RegisteredBroker] = dataclasses.field(default_factory=dict)
    shutting_down: set[int] = dataclasses.field(default_factory=set)
    all_topics: set[str] = dataclasses.field(default_factory=set)
    assignments: dict[str, dict[int, ReplicaAssignment]] = dataclasses.field(default_factory=dict)
    # Both keep a gauge current as they change (actors/controller/partition_gauges.py).
    leadership: Leadership = dataclasses.field(init=False)
    partition_states: PartitionStates[PartitionState] = dataclasses.field(init=False)
    replica_states: ReplicaStates = dataclasses.field(default_factory=ReplicaStates)
    # Topic deletion (spec §7.6): topics queued (their /admin/delete_topics marker seen), those
    # whose deletion has started, and those that cannot progress for now.
    topics_to_be_deleted: set[str] = dataclasses.field(default_factory=set)
    topics_with_deletion_started: set[str] = dataclasses.field(default_factory=set)
    topics_ineligible_for_deletion: set[str] = dataclasses.field(default_factory=set)
    # Partitions under reassignment; a topic with one cannot be deleted until it completes.
    partitions_being_reassigned: set[TopicPartition] = dataclasses.field(default_factory=set)
    # Per live broker, the replicas it answered LeaderAndIsr for with KAFKA_STORAGE_ERROR
    # (spec §7.11): offline although the broker is up, until it answers NONE or re-registers.
    replicas_on_offline_dirs: dict[int, set[TopicPartition]] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        self.leadership = Leadership(self.assignment, self.topic_assignment)
        self.partition_states = PartitionStates(PartitionState.OFFLINE, PartitionState.NEW)

    def reset(self) -> None:
        fresh = ControllerContext()
        for field in dataclasses.fields(self):
            setattr(self, field.name, getattr(fresh, field.name))
        # The maps' view of the assignments is this context's, not the discarded one's.
        self.__post_init__()

    # --- brokers ---

    @property
    def live_broker_epochs(self) -> dict[int, int]:
        return {broker_id: b.broker_epoch for broker_id, b in self.live_brokers.items()}

    def live_or_shutting_down_ids(self) -> set[int]:
        return set(self.live_brokers)

    def live_ids(self) -> set[int]:
        """Live means registered and not in controlled shutdown."""
        return set(self.live_brokers) - self.shutting_down

    def broker_epoch(self, broker_id: int) -> int:
        broker = self.live_brokers.get(broker_id)
        return -1 if broker is None else broker.broker_epoch

    def is_replica_online(self, broker_id: int, tp: TopicPartition | None = None) -> bool:
        """Live, not shutting down, and (given `tp`) its replica of `tp` not on an offline
        log directory (Kafka's isReplicaOnline)."""
        if broker_id not in self.live_brokers or broker_id in self.shutting_down:
            return False
        offline = self.replicas_on_offline_dirs.get(broker_id) if tp is not None else None
        return offline is None or tp not in offline

    def online_replica_ids(self, tp: TopicPartition) -> set[int]:
        """The brokers whose replica of `tp` is online (elections choose among them)."""
        live = self.live_ids()
        if self.replicas_on_offline_dirs:
            live -= {b for b, offline in self.replicas_on_offline_dirs.items() if tp in offline}
        return live

    # --- topics and partitions ---

    def set_assignment(self, tp: TopicPartition, assignment: ReplicaAssignment) -> None:
        self.assignments.setdefault(tp.topic, {})[tp.partition] = assignment
        self.leadership.assignment_changed(tp, assignment)

    def set_topic_assignment(self, topic: str, partitions: dict[int, ReplicaAssignment]) -> None:
        """A topic's whole assignment, as loaded (before its partitions' leadership, which
        then counts each against it)."""
        self.assignments[topic] = partitions
        leadership = self.leadership
        if leadership:
            for partition, assignment in partitions.items():
                leadership.assignment_changed(TopicPartition(topic, partition), assignment)

    def topic_assignment(self, topic: str) -> dict[int, ReplicaAssignment] | None:
        return self.assignments.get(topic)

    def assignment(self, tp: TopicPartition) -> ReplicaAssignment:
        partitions = self.assignments.get(tp.topic)
        found = None if partitions is None else partitions.get(tp.partition)
        return _NO_REPLICAS if found is None else found

    def replicas(self, tp: TopicPartition) -> tuple[int, ...]:
        return self.assignment(tp).replicas

    def all_partitions(self) -> list[TopicPartition]:
        return [
            TopicPartition(topic, partition)
            for topic, partitions in self.assignments.items()
            for partition in partitions
        ]

    async def replicas_on_brokers(self, broker_ids: set[int]) -> list[PartitionReplica]:
        """A pass over every replica (600k at 200k partitions), in slices between which the
        loop turns (actors/base/loop_slices.py)."""
        return [
            PartitionReplica(tp, replica)
            async for tp in each(self.all_partitions())
            for replica in self.replicas(tp)
            if replica in broker_ids
        ]

    def all_replicas(self) -> list[PartitionReplica]:
        return [PartitionReplica(tp, r) for tp in self.all_partitions() for r in self.replicas(tp)]

    def partitions_with_offline_leader(self) -> list[TopicPartition]:
        deleting = self.topics_whose_deletion_may_proceed()
        return [
            tp
            for tp, info in self.leadership.items()
            if not self.is_replica_online(info.leader_and_isr.leader, tp) and tp.topic not in deleting
        ]

    def topics_whose_deletion_may_proceed(self) -> set[str]:
        """Topics queued for deletion and not held back (ineligible: a partition being
        reassigned, a replica offline). Their partitions get no new leader; a topic held
        back still does, or what holds it back (a reassignment) could never end. Kafka
        elects no leader for any topic queued for deletion."""
        return self.topics_to_be_deleted - self.topics_ineligible_for_deletion

    def remove_topic(self, topic: str) -> None:
        self.topics_to_be_deleted.discard(topic)
        self.topics_with_deletion_started.discard(topic)
        self.topics_ineligible_for_deletion.discard(topic)
        self.all_topics.discard(topic)
        for partition in self.assignments.pop(topic, {}):
            tp = TopicPartition(topic, partition)
            self.leadership.pop(tp, None)
            self.partition_states.pop(tp, None)
        self.replica_states.remove_topic(topic)
        self.partitions_being_reassigned -= {
            tp for tp in self.partitions_being_reassigned if tp.topic == topic
        }

    # --- topic deletion (spec §4.3, §7.6) ---

    def is_topic_queued_up_for_deletion(self, topic: str) -> bool:
        return topic in self.topics_to_be_deleted

    def queue_topic_deletion(self, topics: set[str]) -> None:
        # The imbalance gauge leaves queued topics out as it counts, so queueing twice is harmless.
        self.topics_to_be_deleted |= topics

    def partitions_for_topic(self, topic: str) -> list[TopicPartition]:
        return [TopicPartition(topic, p) for p in sorted(self.assignments.get(topic, {}))]

    def replicas_for_topic(self, topic: str) -> list[PartitionReplica]:
        return [PartitionReplica(tp, r) for tp in self.partitions_for_topic(topic) for r in self.replicas(tp)]

    def replicas_in_state(self, topic: str, state: ReplicaState) -> list[PartitionReplica]:
        return [
            r
            for r in self.replicas_for_topic(topic)
            if self.replica_states.get(r, ReplicaState.NON_EXISTENT) == state
        ]

    def is_any_replica_in_state(self, topic: str, state: ReplicaState) -> bool:
        return bool(self.replicas_in_state(topic, state))

    def are_all_replicas_in_state(self, topic: str, state: ReplicaState) -> bool:
        return all(
            self.replica_states.get(r, ReplicaState.NON_EXISTENT) == state
            for r in self.replicas_for_topic(topic)
        )

    def is_topic_deletion_in_progress(self, topic: str) -> bool:
        return self.is_any_replica_in_state(topic, ReplicaState.DELETION_STARTED)

    def leader_epoch(self, tp: TopicPartition) -> int:
        """The leader epoch StopReplica carries: -2 while the topic is queued for deletion,
        -1 when unknown (spec §4.3)."""
        if tp.topic in self.topics_to_be_deleted:
            return -2
        info = self.leadership.get(tp)
        return -1 if info is None else info.leader_and_isr.leader_epoch

    # --- gauges (spec §13) ---

    def offline_partition_count(self) -> int:
        """Offline partitions, those of topics whose deletion started left out."""
        return self.partition_states.offline_count(self.topics_with_deletion_started)

    def topics_to_delete_count(self) -> int:
        return len(self.topics_to_be_deleted)

    def replicas_to_delete_count(self) -> int:
        return sum(
            1
            for topic in self.topics_to_be_deleted
            for r in self.replicas_for_topic(topic)
            if self.replica_states.get(r) != ReplicaState.DELETION_SUCCESSFUL
        )

    def topics_ineligible_to_delete_count(self) -> int:
        return len(self.topics_ineligible_for_deletion)

    def replicas_ineligible_to_delete_count(self) -> int:
        return sum(
            len(self.replicas_in_state(topic, ReplicaState.DELETION_INELIGIBLE))
            for topic in self.topics_to_be_deleted
        )

    def preferred_replica_imbalance_count(self) -> int:
        """Partitions with a leader other than their preferred replica, topics queued for
        deletion left out (spec §4.3)."""
        return self.leadership.imbalanced_count(self.topics_to_be_deleted)

    def global_partition_count(self) -> int:
        return len(self.leadership)
