"""The replica state machine (spec §5.2): New, Online, Offline, and the states a replica
goes through when it is deleted: DeletionStarted, DeletionSuccessful, DeletionIneligible,
then NonExistent.

Taking a replica Offline stops it (StopReplica without delete) and removes it from the ISR
of every partition it is in: a leader that goes offline leaves leader -1, and the last ISR
member stays in the ISR so that only it may lead later unless unclean election is on.

Deletion is the same for a deleted topic and for a replica a reassignment drops: an Offline
replica moves to DeletionStarted, which sends StopReplica with delete; the broker's answer
moves it to DeletionSuccessful (or DeletionIneligible, to retry later); NonExistent then
removes it from the partition's assignment and forgets it.

Each change goes to the state-change log at DEBUG, as Kafka logs them at TRACE: a failover
moves every replica Online, three lines per partition.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable, Iterable

from actors.base.loop_slices import SLICE, each, turn_if_held
from actors.base.ports import ClusterStore, LeaderAndIsr, LeadershipInfo, ReplicaAssignment, TopicPartition
from actors.base.state_change_log import StateChangeLogger
from actors.controller.acknowledged import Resend
from actors.controller.context import ControllerContext, PartitionReplica, ReplicaState
from actors.controller.partition_state_machine import cached_or_read, write_states
from actors.controller.request_batch import RequestBatch

log = logging.getLogger(__name__)

# Replicas handled between two yields to the event loop during a large state change.
_YIELD_EVERY = 500

_VALID_FROM = {
    ReplicaState.NEW: {ReplicaState.NON_EXISTENT},
    ReplicaState.ONLINE: {
        ReplicaState.NEW,
        ReplicaState.ONLINE,
        ReplicaState.OFFLINE,
        ReplicaState.DELETION_INELIGIBLE,
    },
    ReplicaState.OFFLINE: {
        ReplicaState.NEW,
        ReplicaState.ONLINE,
        ReplicaState.OFFLINE,
        ReplicaState.DELETION_INELIGIBLE,
    },
    ReplicaState.DELETION_STARTED: {ReplicaState.OFFLINE},
    ReplicaState.DELETION_SUCCESSFUL: {ReplicaState.DELETION_STARTED},
    ReplicaState.DELETION_INELIGIBLE: {ReplicaState.OFFLINE, ReplicaState.DELETION_STARTED},
    ReplicaState.NON_EXISTENT: {ReplicaState.DELETION_SUCCESSFUL},
}


class ReplicaStateMachine:
    def __init__(
        self,
        context: ControllerContext,
        store: ClusterStore,
        new_batch: Callable[[], RequestBatch],
        state_change_log: StateChangeLogger | None = None,
    ) -> None:
        self._context = context
        self._store = store
        self._new_batch = new_batch
        self._state_change_log = state_change_log or StateChangeLogger.for_controller(
            -1, lambda: context.epoch
        )

    def state(self, replica: PartitionReplica) -> ReplicaState:
        return self._context.replica_states.get(replica, ReplicaState.NON_EXISTENT)

    async def startup(self, resend: Resend | None = None) -> None:
        """Online replicas get LeaderAndIsr with the current state (those `resend` covers,
        where given: the rest have it already); offline ones leave the ISR."""
        online, offline = [], []
        context = self._context
        resent_by_topic: dict[str, list[TopicPartition]] = {}
        for tp in () if resend is None else resend.partitions:
            resent_by_topic.setdefault(tp.topic, []).append(tp)
        # Topic by topic (all_replicas would make 600k replicas at 200k partitions in one step).
        for topic, partitions in list(context.assignments.items()):
            await turn_if_held()
            if self._assume_online(topic, partitions, resend):
                told = (
                    (TopicPartition(topic, p) for p in partitions)
                    if resend is None
                    else resent_by_topic.get(topic, ())
                )
                online += [PartitionReplica(tp, r) for tp in told for r in context.replicas(tp)]
                continue
            replicas = [
                PartitionReplica(tp, r)
                for tp in (TopicPartition(topic, p) for p in partitions)
                for r in context.replicas(tp)
            ]
            for replica in replicas:
                if context.is_replica_online(replica.replica, replica.tp):
                    context.replica_states[replica] = ReplicaState.ONLINE
                    if resend is None or resend.covers(replica):
                        online.append(replica)
                else:
                    context.replica_states[replica] = ReplicaState.DELETION_INELIGIBLE
                    offline.append(replica)
        await self.handle_state_changes(online, ReplicaState.ONLINE)
        await self.handle_state_changes(offline, ReplicaState.OFFLINE)

    def _assume_online(
        self, topic: str, partitions: dict[int, ReplicaAssignment], resend: Resend | None
    ) -> bool:
        """A topic all of whose replicas are on online brokers, none told everything again
        (where only what changed is resent), and no log directory offline anywhere: every
        replica is Online, taken as a whole (ReplicaStates.assume_online) rather than one
        entry each. False otherwise."""
        context = self._context
        if context.replicas_on_offline_dirs:
            return False
        brokers = set(itertools.chain.from_iterable(a.replicas for a in partitions.values()))
        if resend is not None and brokers & resend.brokers:
            return False
        if not all(context.is_replica_online(b) for b in brokers):
            return False
        context.replica_states.assume_online(topic, dict(partitions))
        return True

    async def handle_state_changes(self, replicas: Iterable[PartitionReplica], target: ReplicaState) -> None:
        valid = []
        for count, replica in enumerate(replicas, 1):
            if count % SLICE == 0:
                await turn_if_held()  # a failover moves every replica: 600k at 200k partitions
            if self.state(replica) in _VALID_FROM[target]:
                valid.append(replica)
            else:
                log.error(
                    "invalid replica state change of %d for %s from %s to %s",
                    replica.replica,
                    replica.tp,
                    self.state(replica).name,
                    target.name,
                )
        if not valid:
            return
        logged = StateChangeLogger.enabled(logging.DEBUG)
        before = {replica: self.state(replica) for replica in valid} if logged else {}
        batch = self._new_batch()
        match target:
            case ReplicaState.NEW:
                self._to_new(batch, valid)
            case ReplicaState.ONLINE:
                await self._to_online(batch, valid)
            case ReplicaState.OFFLINE:
                await self._to_offline(batch, valid)
            case ReplicaState.DELETION_STARTED:
                for replica in valid:
                    batch.add_stop_replica([replica.replica], replica.tp, delete=True)
                    self._context.replica_states[replica] = target
            case ReplicaState.DELETION_SUCCESSFUL | ReplicaState.DELETION_INELIGIBLE:
                for replica in valid:
                    self._context.replica_states[replica] = target
            case ReplicaState.NON_EXISTENT:
                self._to_non_existent(valid)
        if logged:
            self._state_change_log.log(
                logging.DEBUG,
                (
                    f"Changed state of replica {replica.replica} for partition {replica.tp} from "
                    f"{state.kafka_name} to {target.kafka_name}"
                    for replica, state in before.items()
                    if self.state(replica) == target
                ),
            )
        await batch.send()

    def _to_non_existent(self, replicas: list[PartitionReplica]) -> None:
        context = self._context
        for replica in replicas:
            current = context.assignment(replica.tp)
            if replica.tp.topic in context.assignments:
                context.set_assignment(
                    replica.tp,
                    ReplicaAssignment(
                        tuple(r for r in current.replicas if r != replica.replica),
                        tuple(r for r in current.adding if r != replica.replica),
                        tuple(r for r in current.removing if r != replica.replica),
                    ),
                )
            context.replica_states.pop(replica, None)

    def _to_new(self, batch: RequestBatch, replicas: list[PartitionReplica]) -> None:
        for replica in replicas:
            info = self._context.leadership.get(replica.tp)
            if info is not None:
                if info.leader_and_isr.leader == replica.replica:
                    log.error(
                        "replica %d of %s cannot become New: it is the leader", replica.replica, replica.tp
                    )
                    continue
                batch.add_leader_and_isr(
                    [replica.replica], replica.tp, info, self._context.assignment(replica.tp), is_new=True
                )
            self._context.replica_states[replica] = ReplicaState.NEW

    async def _to_online(self, batch: RequestBatch, replicas: list[PartitionReplica]) -> None:
        for count, replica in enumerate(replicas, start=1):
            if count % _YIELD_EVERY == 0:
                await asyncio.sleep(0)  # let queued requests go out and heartbeats run
            info = self._context.leadership.get(replica.tp)
            if self.state(replica) != ReplicaState.NEW and info is not None:
                batch.add_leader_and_isr(
                    [replica.replica], replica.tp, info, self._context.assignment(replica.tp)
                )
            self._context.replica_states[replica] = ReplicaState.ONLINE

    async def _to_offline(self, batch: RequestBatch, replicas: list[PartitionReplica]) -> None:
        by_broker: dict[int, list[TopicPartition]] = {}
        for count, replica in enumerate(replicas, 1):
            if count % SLICE == 0:
                await turn_if_held()  # a broker gone: every replica it hosts
            batch.add_stop_replica([replica.replica], replica.tp, delete=False)
            by_broker.setdefault(replica.replica, []).append(replica.tp)
        for broker, partitions in sorted(by_broker.items()):
            with_leadership = [tp async for tp in each(partitions) if tp in self._context.leadership]
            updated = await self.remove_from_isr(broker, with_leadership)
            async for tp, info in each(updated.items()):
                if self._context.is_topic_queued_up_for_deletion(tp.topic):
                    continue  # the topic is going: nobody needs to follow its new leadership
                others = [r for r in self._context.replicas(tp) if r != broker]
                batch.add_leader_and_isr(others, tp, info, self._context.assignment(tp))
            without = [tp async for tp in each(partitions) if tp not in self._context.leadership]
            batch.add_update_metadata(self._context.live_or_shutting_down_ids(), without)
            async for tp in each(partitions):
                self._context.replica_states[PartitionReplica(tp, broker)] = ReplicaState.OFFLINE

    async def remove_from_isr(
        self, broker: int, partitions: list[TopicPartition]
    ) -> dict[TopicPartition, LeadershipInfo]:
        """Take `broker` out of these partitions' ISRs (leader -1 if it led), retrying
        conflicts; returns the new leadership of every partition whose state changed."""
        context = self._context
        done: dict[TopicPartition, LeadershipInfo] = {}
        remaining = partitions
        current = await cached_or_read(context, self._store, remaining)
        while remaining:
            updates: dict[TopicPartition, LeaderAndIsr] = {}
            for count, tp in enumerate(remaining, 1):
                if count % SLICE == 0:
                    await turn_if_held()
                info = current.get(tp)
                if info is None:
                    if not context.is_topic_queued_up_for_deletion(tp.topic):
                        log.warning("cannot remove replica %d from %s's ISR: it has no state", broker, tp)
                elif info.controller_epoch > context.epoch:
                    log.warning("cannot remove replica %d from %s: written by a newer controller", broker, tp)
                elif broker in info.leader_and_isr.isr:
                    state = info.leader_and_isr
                    leader = -1 if state.leader == broker else state.leader
                    # The last ISR member stays: only it may lead later (no unclean election).
                    isr = state.isr if len(state.isr) == 1 else tuple(r for r in state.isr if r != broker)
                    updates[tp] = state.new_leader_and_isr(leader, isr)
                else:
                    # Not in the ISR: nothing to write, and nothing new to tell. (Kafka resends
                    # the unchanged state; after an election in the same event every broker
                    # would refuse it at an unchanged leader epoch, so Keel skips it.)
                    context.leadership[tp] = info
            outcome = await write_states(context, self._store, updates)
            remaining = outcome.conflicts
            for tp, error in outcome.failed.items():
                log.warning("cannot remove replica %d from the ISR of %s: %s", broker, tp, error)
            done.update(outcome.written)
            if remaining:
                current = await self._store.partition_states(remaining)
        return done
