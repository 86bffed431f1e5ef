"""The reassignment procedure (Kafka's onPartitionReassignment, spec §7.7), its steps run for
many partitions at once: one topic-znode write per topic, one pipelined read of the states, one
request batch per step.

  U   write the new full assignment (ZooKeeper, then memory) and stop the replicas that a
      superseded reassignment was adding;
  A   while TRS is not inside the ISR: bump the leader epoch and send LeaderAndIsr with the
      new assignment to ORS and AR (A1), mark AR NewReplica (A2), then wait;
  B   once TRS ⊆ ISR: AR online (B1), assignment := TRS (B2), elect a leader from TRS if the
      leader is not in it or not online, else bump the epoch (B3), take RR through the stop
      sequence, StopReplica without then with delete (B4, B5), write TRS to the topic znode
      (B6), drop the partition from `/admin/reassign_partitions` (B7), UpdateMetadata (B8).

`reassignment.py` decides when it runs; this module only runs it.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable, Iterable

from actors.base.ports import ClusterStore, LeadershipInfo, ReplicaAssignment, TopicPartition
from actors.controller.context import ControllerContext, PartitionReplica, PartitionState, ReplicaState
from actors.controller.partition_state_machine import (
    PartitionStateMachine,
    Strategy,
    cached_or_read,
    write_states,
)
from actors.controller.replica_state_machine import ReplicaStateMachine
from actors.controller.request_batch import RequestBatch

log = logging.getLogger(__name__)


def is_complete(assignment: ReplicaAssignment, isr: Iterable[int]) -> bool:
    """A reassignment is complete once every target replica is in the ISR."""
    if not assignment.is_being_reassigned:
        return True
    return set(assignment.target_replicas) <= set(isr)


@dataclasses.dataclass(frozen=True)
class DeletionHooks:
    """How reassignment holds topic deletion back (spec §7.7 step 1: the topic becomes
    ineligible for deletion) and lets it go on (B8: resumeDeletionForTopics)."""

    mark_ineligible: Callable[[set[str]], None]
    resume: Callable[[set[str]], Awaitable[None]]


class ReassignmentSteps:
    def __init__(
        self,
        *,
        context: ControllerContext,
        store: ClusterStore,
        partitions: PartitionStateMachine,
        replicas: ReplicaStateMachine,
        new_batch: Callable[[], RequestBatch],
        rewatch: Callable[[], None],
        deletion: DeletionHooks | None = None,
    ) -> None:
        self._context = context
        self._store = store
        self._partitions = partitions
        self._replicas = replicas
        self._new_batch = new_batch
        # Enqueues ZkPartitionReassignment, which re-arms the creation watch.
        self._rewatch = rewatch
        self._deletion = deletion

    async def on_partition_reassignments(
        self, reassignments: dict[TopicPartition, ReplicaAssignment]
    ) -> None:
        """Kafka's onPartitionReassignment for each partition, batched: one topic znode write
        per topic, one pipelined read of the states, one request batch per step."""
        context = self._context
        reassignments = {tp: self._keeping_the_in_sync(tp, new) for tp, new in reassignments.items()}
        changed = {tp: new for tp, new in reassignments.items() if new != context.assignment(tp)}
        if changed:
            await self._update(changed)
            await self._elect_where_an_in_sync_replica_was_kept(sorted(changed))
        await self._stop_left_behind(sorted(reassignments))
        context.partitions_being_reassigned.update(reassignments)
        if self._deletion is not None:
            # Step 1: a topic being reassigned cannot be deleted until it completes.
            self._deletion.mark_ineligible({tp.topic for tp in reassignments})
        fresh = await self._store.partition_states(sorted(reassignments))
        complete, adding = {}, {}
        for tp, new in reassignments.items():
            info = fresh.get(tp)
            if is_complete(new, () if info is None else info.leader_and_isr.isr):
                complete[tp] = new
            else:
                adding[tp] = new
        if adding:
            await self._start_adding(adding, fresh)
        if complete:
            await self._complete(complete)

    def _keeping_the_in_sync(self, tp: TopicPartition, new: ReplicaAssignment) -> ReplicaAssignment:
        """`new`, unless it drops every in-sync replica while none of its targets is in sync
        (a reassignment back to its origin, say, once only the replica it was adding is left in
        the ISR). Kafka stops and deletes such replicas at once, and with them the only copy
        of acknowledged writes; Keel keeps them as replicas being removed, so that the targets
        catch up from them before they go.

        That includes in-sync replicas already outside the assignment: a superseding
        reassignment's step U was written, dropping them, by a controller that lost its role
        before it stopped them (which takes them out of the ISR). Once the ISR members of the
        assignment are gone, they are the only in-sync replicas, and no replica of the
        assignment may lead."""
        info = self._context.leadership.get(tp)
        if info is None:
            return new
        isr = info.leader_and_isr.isr
        if set(isr) & set(new.target_replicas):
            return new
        current = self._context.assignment(tp).replicas
        kept = tuple(r for r in dict.fromkeys((*current, *isr)) if r in isr and r not in new.replicas)
        if not kept:
            return new
        log.warning(
            "reassignment of %s to %s drops every in-sync replica %s: they stay until the targets catch up",
            tp,
            list(new.target_replicas),
            list(kept),
        )
        return ReplicaAssignment((*new.replicas, *kept), new.adding, (*new.removing, *kept))

    async def _elect_where_an_in_sync_replica_was_kept(self, partitions: list[TopicPartition]) -> None:
        """A partition without a leader whose new assignment keeps an online in-sync replica
        (`_keeping_the_in_sync`) elects it now: no broker change may come to trigger the
        election, and the targets need a leader to catch up from."""
        context = self._context
        electable = []
        for tp in partitions:
            info = context.leadership.get(tp)
            if (
                info is None
                or context.is_replica_online(info.leader_and_isr.leader, tp)
                or self._partitions.state(tp) not in (PartitionState.ONLINE, PartitionState.OFFLINE)
            ):
                continue
            online = context.online_replica_ids(tp)
            if any(r in online and r in info.leader_and_isr.isr for r in context.replicas(tp)):
                electable.append(tp)
        if electable:
            await self._partitions.handle_state_changes(electable, PartitionState.ONLINE, Strategy.OFFLINE)

    async def _update(self, changed: dict[TopicPartition, ReplicaAssignment]) -> None:
        """U: ZooKeeper, then memory; replicas a superseded reassignment was adding stop."""
        context = self._context
        for tp, new in sorted(changed.items()):
            log.info(
                "reassigning %s: replicas %s, adding %s, removing %s",
                tp,
                list(new.replicas),
                list(new.adding),
                list(new.removing),
            )
        await self._write_assignments(changed)
        unneeded: list[PartitionReplica] = []
        for tp, new in changed.items():
            current = context.assignment(tp)
            context.set_assignment(tp, new)
            unneeded.extend(PartitionReplica(tp, r) for r in current.replicas if r not in new.replicas)
            for r in new.origin_replicas:
                if r not in current.replicas:
                    self._adopt(PartitionReplica(tp, r))
        await self._move_leaders_off(unneeded)
        await self._stop_replicas(unneeded)

    async def _stop_left_behind(self, partitions: list[TopicPartition]) -> None:
        """What a controller that lost its role between writing a superseding reassignment
        (step U) and stopping the replicas it dropped left undone: those still in the ISR are
        stopped now, as it would have (leadership handed to the target replicas first). Where
        no target replica was in sync they are back in the assignment by now, as replicas being
        removed (`_keeping_the_in_sync`). Left in the ISR, they would hold the high watermark back
        and keep the ISR from ever matching the assignment."""
        context = self._context
        left: list[PartitionReplica] = []
        for tp in partitions:
            info = context.leadership.get(tp)
            if info is not None:
                assigned = context.replicas(tp)
                left.extend(PartitionReplica(tp, r) for r in info.leader_and_isr.isr if r not in assigned)
        if not left:
            return
        log.warning(
            "stopping in-sync replicas outside the assignment: %s",
            ", ".join(f"{r.replica} of {r.tp}" for r in left),
        )
        for replica in left:
            self._adopt(replica)
        await self._move_leaders_off(left)
        await self._stop_replicas(left)

    def _adopt(self, replica: PartitionReplica) -> None:
        """An in-sync replica outside the assignment, which this controller has never tracked
        (its failover loads only assigned replicas): its state is set as the replica state
        machine's startup sets it, so that it can go through the stop sequence."""
        if replica not in self._context.replica_states:
            online = self._context.is_replica_online(replica.replica, replica.tp)
            self._context.replica_states[replica] = ReplicaState.ONLINE if online else ReplicaState.OFFLINE

    async def _move_leaders_off(self, unneeded: list[PartitionReplica]) -> None:
        """A replica the superseded reassignment was adding may lead by now. Stopping it
        would leave the partition without a leader, and the new reassignment could never
        complete (its replicas have nobody to catch up from), so leadership moves to the new
        target replicas first (Kafka stops it all the same, leaving the partition offline)."""
        context = self._context
        leading = sorted(
            {
                r.tp
                for r in unneeded
                if (info := context.leadership.get(r.tp)) is not None
                and info.leader_and_isr.leader == r.replica
                and self._partitions.state(r.tp) == PartitionState.ONLINE
            }
        )
        if leading:
            await self._partitions.handle_state_changes(leading, PartitionState.ONLINE, Strategy.REASSIGN)

    async def _start_adding(
        self, adding: dict[TopicPartition, ReplicaAssignment], fresh: dict[TopicPartition, LeadershipInfo]
    ) -> None:
        """A1 and A2: tell ORS and AR about the new assignment at a new leader epoch, make
        the AR replicas new followers; then wait for them to join the ISR."""
        bumped = await self._bump_leader_epochs(sorted(adding), fresh)
        batch = self._new_batch()
        for tp, info in bumped.items():
            new = adding[tp]
            batch.add_leader_and_isr(new.origin_replicas, tp, info, new)
            batch.add_leader_and_isr(new.adding, tp, info, new, is_new=True)
        await batch.send()
        # A2 only marks the new replicas New: A1 has just sent them LeaderAndIsr with is_new at
        # the new leader epoch, and Kafka's second copy at the same epoch would be refused.
        for tp, new in sorted(adding.items()):
            written = bumped.get(tp)
            leader = None if written is None else written.leader_and_isr.leader
            for r in new.adding:
                replica = PartitionReplica(tp, r)
                if self._replicas.state(replica) == ReplicaState.NON_EXISTENT and r != leader:
                    self._context.replica_states[replica] = ReplicaState.NEW
            isr = () if written is None else written.leader_and_isr.isr
            log.info(
                "reassignment of %s waits for replicas %s to join the ISR",
                tp,
                [r for r in new.target_replicas if r not in isr],
            )

    async def _complete(self, complete: dict[TopicPartition, ReplicaAssignment]) -> None:
        context = self._context
        targets = {tp: new.target_replicas for tp, new in complete.items()}
        # B1, B2. A replica that is Online already (its broker started since A2) has the
        # current state: sending it again at the same leader epoch would only be refused.
        joined = [PartitionReplica(tp, r) for tp, new in sorted(complete.items()) for r in new.adding]
        await self._replicas.handle_state_changes(
            [r for r in joined if self._replicas.state(r) != ReplicaState.ONLINE], ReplicaState.ONLINE
        )
        for tp, target in targets.items():
            context.set_assignment(tp, ReplicaAssignment(target))
        # B3
        await self._move_leaders_into(targets)
        # B4, B5
        await self._stop_replicas(
            [PartitionReplica(tp, r) for tp, new in sorted(complete.items()) for r in new.removing]
        )
        # B6
        await self._write_assignments({tp: ReplicaAssignment(target) for tp, target in targets.items()})
        # B7
        await self.remove_from_zk(lambda tp, replicas: targets.get(tp) == replicas)
        context.partitions_being_reassigned.difference_update(complete)
        # B8
        batch = self._new_batch()
        batch.add_update_metadata(context.live_or_shutting_down_ids(), sorted(complete))
        await batch.send()
        if self._deletion is not None:
            await self._deletion.resume({tp.topic for tp in complete})
        for tp, target in sorted(targets.items()):
            info = context.leadership.get(tp)
            log.info(
                "reassignment of %s completed: replicas %s, leader %s",
                tp,
                list(target),
                None if info is None else info.leader_and_isr.leader,
            )

    async def _move_leaders_into(self, targets: dict[TopicPartition, tuple[int, ...]]) -> None:
        """B3: elect from the target replicas where the leader is not among them or not online;
        elsewhere only bump the leader epoch so that the target replicas learn the assignment."""
        context = self._context
        elect, bump = [], []
        for tp, target in sorted(targets.items()):
            info = context.leadership.get(tp)
            leader = -1 if info is None else info.leader_and_isr.leader
            if leader in target and context.is_replica_online(leader):
                bump.append(tp)
            elif self._partitions.state(tp) in (PartitionState.ONLINE, PartitionState.OFFLINE):
                elect.append(tp)
        if elect:
            await self._partitions.handle_state_changes(elect, PartitionState.ONLINE, Strategy.REASSIGN)
        if bump:
            bumped = await self._bump_leader_epochs(bump, await cached_or_read(context, self._store, bump))
            batch = self._new_batch()
            for tp, info in bumped.items():
                batch.add_leader_and_isr(targets[tp], tp, info, context.assignment(tp))
            await batch.send()

    async def _stop_replicas(self, replicas: list[PartitionReplica]) -> None:
        """Offline (StopReplica, ISR shrink), DeletionStarted (StopReplica with delete),
        DeletionSuccessful, NonExistent: the replica's log is gone from its broker."""
        if not replicas:
            return
        for state in (
            ReplicaState.OFFLINE,
            ReplicaState.DELETION_STARTED,
            ReplicaState.DELETION_SUCCESSFUL,
            ReplicaState.NON_EXISTENT,
        ):
            await self._replicas.handle_state_changes(replicas, state)

    async def _bump_leader_epochs(
        self, partitions: list[TopicPartition], current: dict[TopicPartition, LeadershipInfo]
    ) -> dict[TopicPartition, LeadershipInfo]:
        """The same leaders and ISRs at leader epoch + 1, each conditional on the partition
        epoch in `current` (re-read on conflict). Partitions without a state, or written by a
        newer controller, are left as they are."""
        context = self._context
        bumped: dict[TopicPartition, LeadershipInfo] = {}
        remaining = partitions
        while remaining:
            updates = {}
            for tp in remaining:
                info = current.get(tp)
                if info is None:
                    log.warning("cannot bump the leader epoch of %s: it has no state", tp)
                elif info.controller_epoch > context.epoch:
                    log.warning("cannot bump the leader epoch of %s: written by a newer controller", tp)
                else:
                    state = info.leader_and_isr
                    updates[tp] = state.new_leader_and_isr(state.leader, state.isr)
            outcome = await write_states(context, self._store, updates)
            bumped.update(outcome.written)
            for tp, error in outcome.failed.items():
                log.warning("cannot bump the leader epoch of %s: %s", tp, error)
            remaining = outcome.conflicts
            if remaining:
                current = await self._store.partition_states(remaining)
        return bumped

    async def _write_assignments(self, assignments: dict[TopicPartition, ReplicaAssignment]) -> None:
        """One fenced write of each topic's znode with these partitions' full assignments."""
        by_topic: dict[str, dict[int, ReplicaAssignment]] = {}
        for tp, assignment in assignments.items():
            by_topic.setdefault(tp.topic, {})[tp.partition] = assignment
        epoch_zk_version = self._context.epoch_zk_version
        for topic, partitions in sorted(by_topic.items()):
            await self._store.set_partition_assignments(topic, partitions, epoch_zk_version)

    async def remove_from_zk(self, should_remove: Callable[[TopicPartition, tuple[int, ...]], bool]) -> None:
        """Drop entries from `/admin/reassign_partitions` (fenced); delete it once empty and
        re-arm its creation watch through the event queue."""
        found = await self._store.partition_reassignments()
        if not found:
            return
        kept = {tp: replicas for tp, replicas in found.items() if not should_remove(tp, replicas)}
        if len(kept) == len(found):
            return
        epoch_zk_version = self._context.epoch_zk_version
        await self._store.set_partition_reassignments(kept, epoch_zk_version)
        if not kept:
            log.info("no more partitions to reassign through %s: deleted it", "/admin/reassign_partitions")
            self._rewatch()
