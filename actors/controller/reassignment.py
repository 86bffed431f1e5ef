"""Partition reassignment on the controller (spec §7.7, KIP-455).

A reassignment moves a partition from its origin replicas (ORS) to target replicas (TRS). While
it runs, the partition's full assignment RS is TRS followed by the origin replicas not in it,
with AR = RS - ORS the replicas being added and RR = RS - TRS those being removed; all three
are written to the topic znode so that a new controller can resume it.

`on_partition_reassignment` is Kafka's onPartitionReassignment, run again at every trigger:
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
from actors.controller.partition_state_machine import PartitionStateMachine, Strategy, write_states
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
        for tp in sorted(set(partitions) & context.partitions_being_reassigned):
            info = context.leadership.get(tp)
            assignment = context.assignment(tp)
            if info is not None and is_complete(assignment, info.leader_and_isr.isr):
                await self._run_guarded(tp, assignment)

    # --- the procedure ---

    async def on_partition_reassignment(self, tp: TopicPartition, new: ReplicaAssignment) -> None:
        context = self._context
        current = context.assignment(tp)
        if new != current:
            await self._update(tp, current, new)
        context.partitions_being_reassigned.add(tp)
        fresh = (await self._store.partition_states([tp])).get(tp)
        isr = () if fresh is None else fresh.leader_and_isr.isr
        if is_complete(new, isr):
            await self._complete(tp, new)
        else:
            await self._start_adding(tp, new, fresh)

    async def _update(self, tp: TopicPartition, current: ReplicaAssignment, new: ReplicaAssignment) -> None:
        """U: ZooKeeper, then memory; replicas a superseded reassignment was adding stop."""
        context = self._context
        log.info(
            "reassigning %s: replicas %s, adding %s, removing %s",
            tp,
            list(new.replicas),
            list(new.adding),
            list(new.removing),
        )
        await self._store.set_partition_assignments(tp.topic, {tp.partition: new}, context.epoch_zk_version)
        context.set_assignment(tp, new)
        unneeded = [r for r in current.replicas if r not in new.replicas]
        await self._stop_replicas(tp, unneeded)

    async def _start_adding(
        self, tp: TopicPartition, new: ReplicaAssignment, fresh: LeadershipInfo | None
    ) -> None:
        """A1 and A2: tell ORS and AR about the new assignment at a new leader epoch, make
        the AR replicas new followers; then wait for them to join the ISR."""
        info = await self._bump_leader_epoch(tp, fresh)
        if info is not None:
            batch = self._new_batch()
            batch.add_leader_and_isr(new.origin_replicas, tp, info, new)
            batch.add_leader_and_isr(new.adding, tp, info, new, is_new=True)
            await batch.send()
        # A2 only marks the new replicas New: A1 has just sent them LeaderAndIsr with is_new at
        # the new leader epoch, and Kafka's second copy at the same epoch would be refused.
        leader = None if info is None else info.leader_and_isr.leader
        for r in new.adding:
            replica = PartitionReplica(tp, r)
            if self._replicas.state(replica) == ReplicaState.NON_EXISTENT and r != leader:
                self._context.replica_states[replica] = ReplicaState.NEW
        waiting = [
            r for r in new.target_replicas if r not in (() if info is None else info.leader_and_isr.isr)
        ]
        log.info("reassignment of %s waits for replicas %s to join the ISR", tp, waiting)

    async def _complete(self, tp: TopicPartition, new: ReplicaAssignment) -> None:
        context = self._context
        target = new.target_replicas
        # B1, B2. A replica that is Online already (its broker started since A2) has the
        # current state: sending it again at the same leader epoch would only be refused.
        joined = [PartitionReplica(tp, r) for r in new.adding]
        await self._replicas.handle_state_changes(
            [r for r in joined if self._replicas.state(r) != ReplicaState.ONLINE], ReplicaState.ONLINE
        )
        context.set_assignment(tp, ReplicaAssignment(target))
        # B3
        await self._move_leader_into(tp, target)
        # B4, B5
        await self._stop_replicas(tp, list(new.removing))
        # B6
        await self._store.set_partition_assignments(
            tp.topic, {tp.partition: ReplicaAssignment(target)}, context.epoch_zk_version
        )
        # B7
        await self._remove_from_zk(lambda found, replicas: found == tp and replicas == target)
        context.partitions_being_reassigned.discard(tp)
        # B8
        batch = self._new_batch()
        batch.add_update_metadata(context.live_or_shutting_down_ids(), [tp])
        await batch.send()
        info = context.leadership.get(tp)
        log.info(
            "reassignment of %s completed: replicas %s, leader %s",
            tp,
            list(target),
            None if info is None else info.leader_and_isr.leader,
        )

    async def _move_leader_into(self, tp: TopicPartition, target: tuple[int, ...]) -> None:
        """B3: elect from the target replicas if the leader is not among them or not online;
        otherwise only bump the leader epoch so that they all learn the new assignment."""
        context = self._context
        info = context.leadership.get(tp)
        leader = -1 if info is None else info.leader_and_isr.leader
        if leader not in target or not context.is_replica_online(leader):
            if self._partitions.state(tp) in (PartitionState.ONLINE, PartitionState.OFFLINE):
                await self._partitions.handle_state_changes([tp], PartitionState.ONLINE, Strategy.REASSIGN)
            return
        bumped = await self._bump_leader_epoch(tp, None)
        if bumped is not None:
            batch = self._new_batch()
            batch.add_leader_and_isr(target, tp, bumped, context.assignment(tp))
            await batch.send()

    async def _stop_replicas(self, tp: TopicPartition, brokers: list[int]) -> None:
        """Offline (StopReplica, ISR shrink), DeletionStarted (StopReplica with delete),
        DeletionSuccessful, NonExistent: the replica's log is gone from its broker."""
        if not brokers:
            return
        replicas = [PartitionReplica(tp, r) for r in brokers]
        for state in (
            ReplicaState.OFFLINE,
            ReplicaState.DELETION_STARTED,
            ReplicaState.DELETION_SUCCESSFUL,
            ReplicaState.NON_EXISTENT,
        ):
            await self._replicas.handle_state_changes(replicas, state)

    async def _bump_leader_epoch(
        self, tp: TopicPartition, fresh: LeadershipInfo | None
    ) -> LeadershipInfo | None:
        """The same leader and ISR at leader epoch + 1, conditional on the partition epoch read
        (re-read on conflict); None if there is no state or a newer controller wrote it."""
        context = self._context
        current = fresh if fresh is not None else (await self._store.partition_states([tp])).get(tp)
        while True:
            if current is None:
                log.warning("cannot bump the leader epoch of %s: it has no state", tp)
                return None
            if current.controller_epoch > context.epoch:
                log.warning("cannot bump the leader epoch of %s: written by a newer controller", tp)
                return None
            state = current.leader_and_isr
            outcome = await write_states(
                context, self._store, {tp: state.new_leader_and_isr(state.leader, state.isr)}
            )
            if tp in outcome.written:
                return outcome.written[tp]
            if tp in outcome.failed:
                log.warning("cannot bump the leader epoch of %s: %s", tp, outcome.failed[tp])
                return None
            current = (await self._store.partition_states([tp])).get(tp)

    # --- shared steps ---

    async def _trigger(
        self, reassignments: dict[TopicPartition, ReplicaAssignment]
    ) -> dict[TopicPartition, Outcome]:
        """Kafka's maybeTriggerPartitionReassignment: per partition, refuse topics queued for
        deletion and unknown partitions, else run the procedure."""
        context = self._context
        results: dict[TopicPartition, Outcome] = {}
        for tp, reassignment in sorted(reassignments.items()):
            if tp.topic in context.topics_to_be_deleted:
                results[tp] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {tp.topic} is being deleted")
            elif not context.replicas(tp):
                results[tp] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"partition {tp} does not exist")
            else:
                results[tp] = await self._run_guarded(tp, reassignment)
        return results

    async def _run_guarded(self, tp: TopicPartition, reassignment: ReplicaAssignment) -> Outcome:
        try:
            await self.on_partition_reassignment(tp, reassignment)
        except ControllerMovedError:
            raise
        except Exception as e:
            log.error("reassignment of %s failed: %r", tp, e, exc_info=e)
            return ErrorCode.UNKNOWN_SERVER_ERROR, str(e)
        return _OK

    async def _resume(self, should_resume: Callable[[TopicPartition, ReplicaAssignment], bool]) -> None:
        context = self._context
        for tp in sorted(context.partitions_being_reassigned):
            assignment = context.assignment(tp)
            if should_resume(tp, assignment):
                await self._run_guarded(tp, assignment)

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
