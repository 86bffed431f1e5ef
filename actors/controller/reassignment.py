"""Partition reassignment on the controller (spec §7.7, KIP-455).

A reassignment moves a partition from its origin replicas (ORS) to target replicas (TRS). While
it runs, the partition's full assignment RS is TRS followed by the origin replicas not in it,
with AR = RS - ORS the replicas being added and RR = RS - TRS those being removed; all three
are written to the topic znode so that a new controller can resume it.

`on_partition_reassignments` is Kafka's onPartitionReassignment, run again at every trigger
(for many partitions at once, each step batched):
  U   write the new full assignment (ZooKeeper, then memory) and stop the replicas that a
      superseded reassignment was adding;
  A   while TRS is not inside the ISR: bump the leader epoch and send LeaderAndIsr with the
      new assignment to ORS and AR (A1), move AR to NewReplica (A2), then wait;
  B   once TRS ⊆ ISR: AR online (B1), assignment := TRS (B2), elect a leader from TRS if the
      leader is not in it or not online, else bump the epoch (B3), take RR through the stop
      sequence, StopReplica without then with delete (B4, B5), write TRS to the topic znode
      (B6), drop the partition from `/admin/reassign_partitions` (B7), UpdateMetadata (B8).
It runs on the start of a reassignment, on an ISR change accepted through AlterPartition, when
a broker of TRS starts, and at failover.

The decisions (how to build a reassignment, whether a target is valid, whether it is complete)
are pure functions below; the class applies them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from actors.controller.context import ControllerContext, PartitionReplica, PartitionState, ReplicaState
from actors.controller.partition_state_machine import (
    PartitionStateMachine,
    Strategy,
    cached_or_read,
    write_states,
)
from actors.controller.replica_state_machine import ReplicaStateMachine
from actors.controller.request_batch import RequestBatch
from actors.ports import (
    ClusterStore,
    ControllerMovedError,
    LeadershipInfo,
    ReplicaAssignment,
    TopicPartition,
)
from wire.errors import ErrorCode

log = logging.getLogger(__name__)

# A partition's outcome: the error code (NONE on success) and a message for the caller.
Outcome = tuple[ErrorCode, str | None]
_OK: Outcome = (ErrorCode.NONE, None)

# --- pure decisions ---


def validate_target(
    current: ReplicaAssignment, target: tuple[int, ...], registered: set[int]
) -> Outcome | None:
    """Kafka's checks of an API reassignment's target replicas: an error, or None if valid.
    Only the replicas the reassignment would add must be on registered brokers."""
    if not target:
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Empty replica list specified in partition reassignment."
    if len(set(target)) != len(target):
        return (
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"Duplicate replica ids in partition reassignment replica list: {list(target)}",
        )
    if any(r < 0 for r in target):
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Invalid broker id in replica list: {list(target)}"
    adding = current.reassign_to(target).adding
    if not set(adding) <= registered:
        return (
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"Replica assignment has brokers that are not alive. Replica list: {list(adding)}, "
            f"live broker list: {sorted(registered)}",
        )
    return None


def build_reassignment(
    current: ReplicaAssignment, target: tuple[int, ...] | None
) -> ReplicaAssignment | None:
    """The full assignment a request asks for (Kafka's maybeBuildReassignment). A None target
    cancels: back to the origin replicas if a reassignment is in progress, else nothing to do
    (None, which the caller answers NO_REASSIGNMENT_IN_PROGRESS)."""
    if current.is_being_reassigned:
        return current.reassign_to(target if target is not None else current.origin_replicas)
    return None if target is None else current.reassign_to(target)


def is_complete(assignment: ReplicaAssignment, isr: Iterable[int]) -> bool:
    """A reassignment is complete once every target replica is in the ISR."""
    if not assignment.is_being_reassigned:
        return True
    return set(assignment.target_replicas) <= set(isr)


# --- applying them ---


class PartitionReassignment:
    def __init__(
        self,
        *,
        context: ControllerContext,
        store: ClusterStore,
        partitions: PartitionStateMachine,
        replicas: ReplicaStateMachine,
        new_batch: Callable[[], RequestBatch],
        rewatch: Callable[[], None],
    ) -> None:
        self._context = context
        self._store = store
        self._partitions = partitions
        self._replicas = replicas
        self._new_batch = new_batch
        # Enqueues ZkPartitionReassignment, which re-arms the creation watch.
        self._rewatch = rewatch

    # --- entry points ---

    async def on_zk_reassignment(self) -> set[TopicPartition]:
        """Start what `/admin/reassign_partitions` asks (no replica validation on this path),
        re-arming its creation watch; partitions that fail are removed from it. Returns the
        partitions started."""
        found = await self._store.partition_reassignments(watch=True)
        if found is None:
            return set()
        results: dict[TopicPartition, Outcome] = {}
        to_reassign: dict[TopicPartition, ReplicaAssignment] = {}
        for tp, target in sorted(found.items()):
            built = build_reassignment(self._context.assignment(tp), target)
            if built is None:
                results[tp] = (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None)
            else:
                to_reassign[tp] = built
        results.update(await self._trigger(to_reassign))
        failed = {tp for tp, (code, _) in results.items() if code != ErrorCode.NONE}
        if failed:
            log.warning(
                "reassignments in %s failed: %s",
                "/admin/reassign_partitions",
                {str(tp): ErrorCode(results[tp][0]).name for tp in sorted(failed)},
            )
            await self._remove_from_zk(lambda tp, _: tp in failed)
        return {tp for tp, (code, _) in results.items() if code == ErrorCode.NONE}

    async def on_api_reassignment(
        self, reassignments: dict[TopicPartition, tuple[int, ...] | None]
    ) -> dict[TopicPartition, Outcome]:
        """AlterPartitionReassignments: validate each target, cancel (None) or start it. An
        API reassignment supersedes one asked for through ZooKeeper."""
        context = self._context
        registered = set(context.live_brokers)
        results: dict[TopicPartition, Outcome] = {}
        to_reassign: dict[TopicPartition, ReplicaAssignment] = {}
        for tp, target in reassignments.items():
            current = context.assignment(tp)
            error = None if target is None else validate_target(current, target, registered)
            if error is not None:
                log.info("reassignment of %s to %s refused: %s", tp, target, error[1])
                results[tp] = error
                continue
            built = build_reassignment(current, target)
            if built is None:
                results[tp] = (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, f"No reassignment of {tp} in progress")
            else:
                to_reassign[tp] = built
        if to_reassign:
            await self._remove_from_zk(lambda tp, _: tp in to_reassign)
        results.update(await self._trigger(to_reassign))
        return results

    def list_reassignments(
        self, partitions: list[TopicPartition] | None
    ) -> dict[TopicPartition, ReplicaAssignment]:
        """The full assignment of each of these (default: every) partition being reassigned."""
        context = self._context
        wanted = sorted(context.partitions_being_reassigned) if partitions is None else partitions
        found = {}
        for tp in wanted:
            assignment = context.assignment(tp)
            if assignment.is_being_reassigned:
                found[tp] = assignment
        return found

    async def resume_at_failover(self) -> None:
        """Spec §4.1 step 8: what `/admin/reassign_partitions` asks, then every reassignment
        the topic znodes show in progress (started through the API)."""
        context = self._context
        context.partitions_being_reassigned = {
            tp for tp in context.all_partitions() if context.assignment(tp).is_being_reassigned
        }
        started = await self.on_zk_reassignment()
        await self._resume(lambda tp, _: tp not in started)

    async def on_brokers_started(self, new: list[int]) -> None:
        """Spec §7.2 step 6: rerun every reassignment whose target replicas include a broker
        that just started (from A1, since its new replica may have missed LeaderAndIsr)."""
        new_set = set(new)
        await self._resume(lambda _, assignment: bool(new_set & set(assignment.target_replicas)))

    async def maybe_complete(self, partitions: Iterable[TopicPartition]) -> None:
        """After accepted ISR changes: complete the reassignments whose targets are now in sync."""
        context = self._context
        complete = {}
        for tp in sorted(set(partitions) & context.partitions_being_reassigned):
            info = context.leadership.get(tp)
            assignment = context.assignment(tp)
            if info is not None and is_complete(assignment, info.leader_and_isr.isr):
                complete[tp] = assignment
        if complete:
            await self._run_guarded(complete)

    # --- the procedure, for many partitions at once ---

    async def on_partition_reassignments(
        self, reassignments: dict[TopicPartition, ReplicaAssignment]
    ) -> None:
        """Kafka's onPartitionReassignment for each partition, batched: one topic znode write
        per topic, one pipelined read of the states, one request batch per step."""
        context = self._context
        changed = {tp: new for tp, new in reassignments.items() if new != context.assignment(tp)}
        if changed:
            await self._update(changed)
        context.partitions_being_reassigned.update(reassignments)
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
        await self._stop_replicas(unneeded)

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
        await self._remove_from_zk(lambda tp, replicas: targets.get(tp) == replicas)
        context.partitions_being_reassigned.difference_update(complete)
        # B8
        batch = self._new_batch()
        batch.add_update_metadata(context.live_or_shutting_down_ids(), sorted(complete))
        await batch.send()
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

    # --- shared steps ---

    async def _trigger(
        self, reassignments: dict[TopicPartition, ReplicaAssignment]
    ) -> dict[TopicPartition, Outcome]:
        """Kafka's maybeTriggerPartitionReassignment: per partition, refuse topics queued for
        deletion and unknown partitions, and run the procedure for the others."""
        context = self._context
        results: dict[TopicPartition, Outcome] = {}
        valid = {}
        for tp, reassignment in sorted(reassignments.items()):
            if tp.topic in context.topics_to_be_deleted:
                results[tp] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {tp.topic} is being deleted")
            elif not context.replicas(tp):
                results[tp] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"partition {tp} does not exist")
            else:
                valid[tp] = reassignment
        if valid:
            outcome = await self._run_guarded(valid)
            results.update(dict.fromkeys(valid, outcome))
        return results

    async def _run_guarded(self, reassignments: dict[TopicPartition, ReplicaAssignment]) -> Outcome:
        """Run the procedure; an unexpected error fails every partition of the call (a fenced
        write is not unexpected: the controller resigns)."""
        try:
            await self.on_partition_reassignments(reassignments)
        except ControllerMovedError:
            raise
        except Exception as e:
            log.error("reassignment of %s failed: %r", sorted(map(str, reassignments)), e, exc_info=e)
            return ErrorCode.UNKNOWN_SERVER_ERROR, str(e)
        return _OK

    async def _resume(self, should_resume: Callable[[TopicPartition, ReplicaAssignment], bool]) -> None:
        context = self._context
        resumed = {}
        for tp in sorted(context.partitions_being_reassigned):
            assignment = context.assignment(tp)
            if should_resume(tp, assignment):
                resumed[tp] = assignment
        if resumed:
            await self._run_guarded(resumed)

    async def _remove_from_zk(self, should_remove: Callable[[TopicPartition, tuple[int, ...]], bool]) -> None:
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
