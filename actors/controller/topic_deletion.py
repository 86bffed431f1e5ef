"""TopicDeletionManager: how the controller deletes a topic (spec §7.6, Kafka's class of the
same name).

A topic is *queued* when its `/admin/delete_topics/<T>` marker is seen. Its deletion *starts*
once every replica can be reached: the partitions go Offline then NonExistent, every broker
is told (UpdateMetadata with leader -2) to stop serving it, and each replica is stopped and
then deleted (StopReplica with delete). Each broker's answer moves its replicas to
DeletionSuccessful, or to DeletionIneligible when it failed. When every replica is
DeletionSuccessful the topic's znodes go, fenced by the controller epoch, and the controller
forgets it.

A topic is *ineligible* while one of its replicas is on a dead broker, or one of its
partitions is being reassigned. Deletion resumes when such a broker returns or the
reassignment completes: the ineligible replicas are taken Offline and deleted again.

Everything here runs on the controller's event queue; the manager holds no state of its own
beyond the context's three topic sets.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from actors.base.ports import ClusterStore, TopicPartition
from actors.controller.context import ControllerContext, PartitionReplica, PartitionState, ReplicaState
from actors.controller.partition_state_machine import PartitionStateMachine
from actors.controller.replica_state_machine import ReplicaStateMachine
from actors.controller.request_batch import RequestBatch
from wire.api import Response, StopReplicaResponse
from wire.errors import ErrorCode

log = logging.getLogger(__name__)


def deletion_errors(
    response: Response, partitions: Iterable[TopicPartition]
) -> tuple[tuple[TopicPartition, int], ...]:
    """Each partition's error in a StopReplica-with-delete answer. Only a StopReplicaResponse
    that names a partition with no error counts it deleted: another response type (e.g. a
    failed send) fails them all, a partition left out of the answer fails."""
    if not isinstance(response, StopReplicaResponse):
        code = response.error_code or ErrorCode.UNKNOWN_SERVER_ERROR
        return tuple((tp, code) for tp in partitions)
    reported = {(e.topic, e.partition): e.error_code for e in response.partition_errors}
    return tuple(
        (tp, response.error_code or reported.get((tp.topic, tp.partition), ErrorCode.UNKNOWN_SERVER_ERROR))
        for tp in partitions
    )


class TopicDeletionManager:
    def __init__(
        self,
        *,
        context: ControllerContext,
        store: ClusterStore,
        partitions: PartitionStateMachine,
        replicas: ReplicaStateMachine,
        new_batch: Callable[[], RequestBatch],
        delete_topic_enable: bool,
    ) -> None:
        self._context = context
        self._store = store
        self._partitions = partitions
        self._replicas = replicas
        self._new_batch = new_batch
        self.delete_topic_enable = delete_topic_enable

    # --- entry points ---

    async def init(self, to_delete: set[str], ineligible: set[str]) -> None:
        """At failover (spec §4.1 step 5): queue the marked topics, ineligible as given."""
        context = self._context
        if not self.delete_topic_enable:
            if to_delete:
                log.info(
                    "delete.topic.enable is false: removing the deletion markers of %s", sorted(to_delete)
                )
                await self._store.delete_topic_deletions(to_delete, context.epoch_zk_version)
            return
        context.queue_topic_deletion(to_delete)
        context.topics_ineligible_for_deletion |= ineligible & context.topics_to_be_deleted
        if to_delete:
            log.info(
                "topics queued for deletion: %s (ineligible for now: %s)",
                sorted(to_delete),
                sorted(context.topics_ineligible_for_deletion),
            )

    async def on_topic_deletion_event(self) -> None:
        """The `/admin/delete_topics` children changed (the TopicDeletion event)."""
        context = self._context
        marked = await self._store.topics_to_delete(watch=True)
        unknown = marked - context.all_topics
        if unknown:
            log.info("removing deletion markers of topics that do not exist: %s", sorted(unknown))
            await self._store.delete_topic_deletions(unknown, context.epoch_zk_version)
        marked -= unknown
        if not marked:
            return
        if not self.delete_topic_enable:
            log.info("delete.topic.enable is false: removing the deletion markers of %s", sorted(marked))
            await self._store.delete_topic_deletions(marked, context.epoch_zk_version)
            return
        new = marked - context.topics_to_be_deleted
        if new:
            log.info("topics marked for deletion: %s", sorted(new))
        # Queued before being marked ineligible, so that a topic new to the queue is held too.
        context.queue_topic_deletion(marked)
        reassigning = {tp.topic for tp in context.partitions_being_reassigned if tp.topic in marked}
        self.mark_topic_ineligible(reassigning, "a partition is being reassigned")
        await self.resume_deletions()

    async def enqueue_topics(self, topics: set[str]) -> None:
        self._context.queue_topic_deletion(topics)
        await self.resume_deletions()

    async def resume_deletion_for_topics(self, topics: Iterable[str]) -> None:
        """A broker hosting replicas returned, or a reassignment completed: try again. Not a
        topic with a partition still being reassigned: its deletion would take replicas
        offline under that reassignment, which could then never complete, and neither could
        the deletion it holds back. (Kafka resumes the topic when any one of its partitions
        completes its reassignment, which leaves that gap.)"""
        context = self._context
        reassigning = {tp.topic for tp in context.partitions_being_reassigned}
        queued = (set(topics) & context.topics_to_be_deleted) - reassigning
        if queued:
            context.topics_ineligible_for_deletion -= queued
            await self.resume_deletions()

    async def fail_replica_deletion(self, replicas: list[PartitionReplica]) -> None:
        """Replicas whose broker died, or whose deletion failed: retry later."""
        context = self._context
        failed = [r for r in replicas if context.is_topic_queued_up_for_deletion(r.tp.topic)]
        if not failed:
            return
        topics = {r.tp.topic for r in failed}
        log.info("deletion of %d replica(s) of %s failed; retrying later", len(failed), sorted(topics))
        await self._replicas.handle_state_changes(failed, ReplicaState.DELETION_INELIGIBLE)
        self.mark_topic_ineligible(topics, "replica deletion failed")
        await self.resume_deletions()

    async def complete_replica_deletion(self, replicas: list[PartitionReplica]) -> None:
        await self._replicas.handle_state_changes(replicas, ReplicaState.DELETION_SUCCESSFUL)
        await self.resume_deletions()

    async def on_stop_replica_response(
        self, broker_id: int, error_code: int, partition_errors: dict[TopicPartition, int]
    ) -> None:
        """StopReplica with delete answered: a top-level error fails every partition."""
        context = self._context
        started = {
            tp: e for tp, e in partition_errors.items() if tp.topic in context.topics_with_deletion_started
        }
        failed = [PartitionReplica(tp, broker_id) for tp, e in sorted(started.items()) if error_code or e]
        done = [PartitionReplica(tp, broker_id) for tp, e in sorted(started.items()) if not (error_code or e)]
        if failed:
            await self.fail_replica_deletion(failed)
        if done:
            await self.complete_replica_deletion(done)

    def mark_topic_ineligible(self, topics: set[str], reason: str) -> None:
        queued = topics & self._context.topics_to_be_deleted
        if queued:
            self._context.topics_ineligible_for_deletion |= queued
            log.info("topics %s cannot be deleted for now: %s", sorted(queued), reason)

    def is_topic_ineligible(self, topic: str) -> bool:
        return topic in self._context.topics_ineligible_for_deletion

    def is_topic_eligible(self, topic: str) -> bool:
        context = self._context
        return (
            topic in context.topics_to_be_deleted
            and not context.is_topic_deletion_in_progress(topic)
            and not self.is_topic_ineligible(topic)
        )

    # --- the deletion itself ---

    async def resume_deletions(self) -> None:
        """Finish topics whose replicas are all deleted, retry failed replicas of topics with
        nothing in flight, and start (or restart) every eligible topic."""
        context = self._context
        retry, eligible = set(), set()
        for topic in sorted(context.topics_to_be_deleted):
            if context.are_all_replicas_in_state(topic, ReplicaState.DELETION_SUCCESSFUL):
                await self._complete_delete_topic(topic)
                continue
            if not context.is_topic_deletion_in_progress(topic) and context.is_any_replica_in_state(
                topic, ReplicaState.DELETION_INELIGIBLE
            ):
                retry.add(topic)
            if self.is_topic_eligible(topic):
                eligible.add(topic)
        if retry:
            failed = [
                r
                for topic in sorted(retry)
                for r in context.replicas_in_state(topic, ReplicaState.DELETION_INELIGIBLE)
            ]
            await self._replicas.handle_state_changes(failed, ReplicaState.OFFLINE)
        if eligible:
            await self._on_topic_deletion(eligible)

    async def _on_topic_deletion(self, topics: set[str]) -> None:
        context = self._context
        log.info("deleting topics %s", sorted(topics))
        unseen = topics - context.topics_with_deletion_started
        if unseen:
            partitions = [tp for topic in sorted(unseen) for tp in context.partitions_for_topic(topic)]
            await self._partitions.handle_state_changes(partitions, PartitionState.OFFLINE)
            await self._partitions.handle_state_changes(partitions, PartitionState.NON_EXISTENT)
            # After the partition changes, so that the offline gauge counted them out.
            context.topics_with_deletion_started |= unseen
        batch = self._new_batch()
        batch.add_update_metadata(
            context.live_or_shutting_down_ids(),
            [tp for topic in sorted(topics) for tp in context.partitions_for_topic(topic)],
        )
        await batch.send()
        await self._on_partition_deletion(topics)

    async def _on_partition_deletion(self, topics: set[str]) -> None:
        context = self._context
        dead: list[PartitionReplica] = []
        retry: list[PartitionReplica] = []
        with_dead = set()
        for topic in sorted(topics):
            for replica in context.replicas_for_topic(topic):
                if not context.is_replica_online(replica.replica):
                    dead.append(replica)
                    with_dead.add(topic)
                elif self._replicas.state(replica) != ReplicaState.DELETION_SUCCESSFUL:
                    retry.append(replica)
        await self._replicas.handle_state_changes(dead, ReplicaState.DELETION_INELIGIBLE)
        # Stop them first (no more fetching from the leader), then delete them.
        await self._replicas.handle_state_changes(retry, ReplicaState.OFFLINE)
        await self._replicas.handle_state_changes(retry, ReplicaState.DELETION_STARTED)
        self.mark_topic_ineligible(with_dead, "replicas on offline brokers")

    async def _complete_delete_topic(self, topic: str) -> None:
        context = self._context
        await self._replicas.handle_state_changes(
            context.replicas_in_state(topic, ReplicaState.DELETION_SUCCESSFUL), ReplicaState.NON_EXISTENT
        )
        await self._store.delete_topic(topic, context.epoch_zk_version)
        context.remove_topic(topic)
        log.info("deletion of topic %s completed", topic)
