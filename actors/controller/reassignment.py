"""Partition reassignment on the controller (spec §7.7, KIP-455).

A reassignment moves a partition from its origin replicas (ORS) to target replicas (TRS). While
it runs, the partition's full assignment RS is TRS followed by the origin replicas not in it,
with AR = RS - ORS the replicas being added and RR = RS - TRS those being removed; all three
are written to the topic znode so that a new controller can resume it.

The procedure itself (Kafka's onPartitionReassignment: steps U, A1-A2, B1-B8) is in
`reassignment_steps.py`. This module decides when it runs and for which partitions: on a
request through `/admin/reassign_partitions` or AlterPartitionReassignments, on an ISR change
accepted through AlterPartition, when a broker of TRS starts, and at failover.

The decisions (how to build a reassignment, whether a target is valid, whether it is complete)
are pure functions; the classes apply them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from actors.base.ports import ClusterStore, ControllerMovedError, ReplicaAssignment, TopicPartition
from actors.controller.context import ControllerContext
from actors.controller.partition_state_machine import PartitionStateMachine
from actors.controller.reassignment_steps import DeletionHooks, ReassignmentSteps, is_complete
from actors.controller.replica_state_machine import ReplicaStateMachine
from actors.controller.request_batch import RequestBatch
from wire.errors import ErrorCode

log = logging.getLogger(__name__)

# A partition's outcome: the error code (NONE on success) and a message for the caller.
Outcome = tuple[ErrorCode, str | None]
_OK: Outcome = (ErrorCode.NONE, None)

# --- pure decisions ---


def validate_target(current: ReplicaAssignment, target: tuple[int, ...], live: set[int]) -> Outcome | None:
    """Kafka's checks of an API reassignment's target replicas: an error, or None if valid.
    Only the replicas the reassignment would add must be on live brokers (registered and
    not in controlled shutdown: Kafka's liveBrokerIds, spec §7.7)."""
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
    if not set(adding) <= live:
        return (
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"Replica assignment has brokers that are not alive. Replica list: {list(adding)}, "
            f"live broker list: {sorted(live)}",
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
        deletion: DeletionHooks | None = None,
    ) -> None:
        self._context = context
        self._store = store
        self._steps = ReassignmentSteps(
            context=context,
            store=store,
            partitions=partitions,
            replicas=replicas,
            new_batch=new_batch,
            rewatch=rewatch,
            deletion=deletion,
        )

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
            await self._steps.remove_from_zk(lambda tp, _: tp in failed)
        return {tp for tp, (code, _) in results.items() if code == ErrorCode.NONE}

    async def on_api_reassignment(
        self, reassignments: dict[TopicPartition, tuple[int, ...] | None]
    ) -> dict[TopicPartition, Outcome]:
        """AlterPartitionReassignments: validate each target, cancel (None) or start it. An
        API reassignment supersedes one asked for through ZooKeeper."""
        context = self._context
        live = context.live_ids()
        results: dict[TopicPartition, Outcome] = {}
        to_reassign: dict[TopicPartition, ReplicaAssignment] = {}
        for tp, target in reassignments.items():
            current = context.assignment(tp)
            error = None if target is None else validate_target(current, target, live)
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
            await self._steps.remove_from_zk(lambda tp, _: tp in to_reassign)
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
        started = await self.on_zk_reassignment()
        await self._resume(lambda tp, _: tp not in started)
        await self._finish_cancellations_left_behind()

    async def _finish_cancellations_left_behind(self) -> None:
        """A reassignment cancelled (back to its origin) by a controller that lost its role
        before it stopped the replicas being added leaves them in the ISR and no reassignment
        in progress to resume. The procedure, run for the assignment as it is, stops them or,
        if they are the only in-sync replicas, keeps them until the others catch up (see
        `ReassignmentSteps`)."""
        context = self._context
        # One pass over every partition at failover: sort only the few found (the order of
        # what the controller does next must not depend on a set's).
        found = [
            tp
            for tp, info in context.leadership.items()
            if tp not in context.partitions_being_reassigned
            and not set(info.leader_and_isr.isr) <= set(context.replicas(tp))
        ]
        if found:
            await self._trigger({tp: context.assignment(tp) for tp in sorted(found)})

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
            results.update(await self._run_guarded(valid))
        return results

    async def _run_guarded(
        self, reassignments: dict[TopicPartition, ReplicaAssignment]
    ) -> dict[TopicPartition, Outcome]:
        """Run the procedure; the outcome per partition. After an unexpected error (a fenced
        write is not unexpected: the controller resigns) a partition whose new assignment was
        written (step U) counts as started: it is in ZooKeeper and memory, and is resumed as
        any reassignment in progress is. The others failed."""
        try:
            await self._steps.on_partition_reassignments(reassignments)
        except ControllerMovedError:
            raise
        except Exception as e:
            log.error("reassignment of %s failed: %r", sorted(map(str, reassignments)), e, exc_info=e)
            context = self._context
            return {
                tp: _OK
                if tp in context.partitions_being_reassigned and context.assignment(tp) == new
                else (ErrorCode.UNKNOWN_SERVER_ERROR, str(e))
                for tp, new in reassignments.items()
            }
        return dict.fromkeys(reassignments, _OK)

    async def _resume(self, should_resume: Callable[[TopicPartition, ReplicaAssignment], bool]) -> None:
        context = self._context
        resumed = {}
        for tp in sorted(context.partitions_being_reassigned):
            assignment = context.assignment(tp)
            if should_resume(tp, assignment):
                resumed[tp] = assignment
        if resumed:
            await self._run_guarded(resumed)


__all__ = [
    "DeletionHooks",
    "Outcome",
    "PartitionReassignment",
    "build_reassignment",
    "is_complete",
    "validate_target",
]
