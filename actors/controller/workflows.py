"""What the active controller does for each cluster change (spec §4.1, §7.1 to §7.5):
failover, broker startup and failure, new topics and partitions, broker modifications.

Each workflow drives the state machines, which write ZooKeeper first, then memory, then send
one request batch per state change. ZooKeeper reads that scale with partitions are pipelined.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from actors.base.clock import Clock
from actors.base.loop_slices import sliced, turn_if_held
from actors.base.ports import (
    AcknowledgedChanges,
    BrokerChannel,
    ClusterStore,
    LeaderAndIsr,
    LeadershipInfo,
    RegisteredBroker,
    TopicAssignment,
    TopicPartition,
)
from actors.controller.acknowledged import Resend, resend_after
from actors.controller.context import ControllerContext, PartitionReplica, PartitionState, ReplicaState
from actors.controller.partition_state_machine import PartitionStateMachine, Strategy
from actors.controller.replica_state_machine import ReplicaStateMachine
from actors.controller.request_batch import RequestBatch
from actors.controller.standby import StandbyFollower
from actors.controller.topic_deletion import TopicDeletionManager

if TYPE_CHECKING:
    from actors.controller.reassignment import PartitionReassignment

log = logging.getLogger(__name__)

# New partitions taken through their creation together (on_new_partition_creation).
NEW_PARTITIONS_PER_STEP = 1000


class Workflows:
    def __init__(
        self,
        *,
        context: ControllerContext,
        store: ClusterStore,
        channel: BrokerChannel,
        partitions: PartitionStateMachine,
        replicas: ReplicaStateMachine,
        new_batch: Callable[[], RequestBatch],
        clock: Clock,
        topic_deletion: TopicDeletionManager,
        reassignment: PartitionReassignment | None = None,
        standby: StandbyFollower | None = None,
    ) -> None:
        self._topic_deletion = topic_deletion
        self._clock = clock
        self._reassignment = reassignment
        self._context = context
        self._store = store
        self._channel = channel
        self._partitions = partitions
        self._replicas = replicas
        self._new_batch = new_batch
        self._standby = standby
        # Whether this failover took the states over from the standby view.
        self._taken_over = False

    # --- failover (spec §4.1) ---

    async def on_failover(self) -> None:
        started = self._clock.monotonic()
        acknowledged = None
        if self._standby is not None:
            acknowledged = await self._store.acknowledged_changes()
            # Before anything else it writes: the standbys learn that this epoch records.
            await self._store.start_change_records(self._context.epoch, self._context.epoch_zk_version)
        await self._initialize_context()
        loaded = self._clock.monotonic()
        await self._initialize_topic_deletion()
        resend = await self._resend(acknowledged)
        batch = self._new_batch()
        batch.add_update_metadata(self._context.live_or_shutting_down_ids())
        await batch.send()
        if resend is not None and resend.brokers:
            batch.add_update_metadata(resend.brokers, self._context.all_partitions())
            await batch.send()
        await self._context.leadership.recount_in_slices()  # the imbalance gauge, once sent
        await self._replicas.startup(resend)
        await self._partitions.startup()
        await self._partitions.trigger_online_partition_state_change()
        if self._reassignment is not None:
            await self._reassignment.resume_at_failover()
        await self._topic_deletion.resume_deletions()
        log.info(
            "failover done in %.0f ms (context loaded in %.0f ms)",
            (self._clock.monotonic() - started) * 1000,
            (loaded - started) * 1000,
        )

    async def _initialize_context(self) -> None:
        context = self._context
        brokers, topics = await asyncio.gather(
            self._store.registered_brokers(watch=True), self._store.topics(watch=True)
        )
        context.live_brokers = {b.info.broker_id: b for b in brokers}
        context.all_topics = topics
        assignments = await self._store.topic_assignments(topics, watch=True)
        # Spec §4.1 step 4.4: partitions whose znode shows adding or removing replicas.
        context.partitions_being_reassigned = set()
        for topic, assignment in assignments.items():
            await turn_if_held()  # 200 topics of 1,000 partitions: a pass of 200k
            context.set_topic_assignment(topic, dict(assignment.partitions))
            context.partitions_being_reassigned.update(
                TopicPartition(topic, p)
                for p, replicas in assignment.partitions.items()
                if replicas.is_being_reassigned
            )
        context.leadership.load(await self._leadership())
        # The failover's UpdateMetadata to every broker follows, with what these reads show.
        await self._watch_brokers(list(context.live_brokers))
        for broker in context.live_brokers.values():
            self._channel.add_broker(broker)
        log.info(
            "controller context loaded: %d brokers, %d topics, %d partitions",
            len(brokers),
            len(topics),
            len(context.leadership),
        )

    async def _leadership(self) -> dict[TopicPartition, LeadershipInfo]:
        """Every partition's state: from the warm standby's view where it can be trusted
        (docs/STANDBY.md), else read from ZooKeeper, all of them."""
        self._taken_over = False
        context = self._context
        if self._standby is not None:
            assigned = {topic: partitions.keys() for topic, partitions in context.assignments.items()}
            held = await self._standby.takeover(context.epoch, assigned)
            if held is not None:
                log.info("partition states taken over from the standby view: %d", len(held))
                self._taken_over = True
                return held
            log.info("the standby view cannot be taken over; reading every partition state")
        return await self._store.partition_states(context.all_partitions())

    async def _resend(self, acknowledged: AcknowledgedChanges | None) -> Resend | None:
        """What to tell brokers again, after a takeover from the standby view under a mark
        of what they acknowledged (actors/controller/acknowledged.py); None: everything, as
        Kafka's failover does."""
        if acknowledged is None or not self._taken_over or self._standby is None:
            return None
        changed = await self._standby.changed_after(acknowledged)
        if changed is None:
            log.info("the standby view cannot tell what changed since the mark; resending every state")
            return None
        resend = await resend_after(self._context, acknowledged, changed)
        log.info(
            "resending %d partition states changed since the acknowledged mark, and everything to brokers %s",
            len(resend.partitions),
            sorted(resend.brokers),
        )
        return resend

    async def _initialize_topic_deletion(self) -> None:
        """Spec §4.1 step 5: queue the marked topics; those with an offline replica or a
        partition being reassigned cannot be deleted for now."""
        context = self._context
        marked = await self._store.topics_to_delete(watch=True)
        # Only the marked topics' replicas matter here: not a pass over every replica.
        offline = {
            r.tp.topic
            for topic in marked & context.all_topics
            for r in context.replicas_for_topic(topic)
            if not context.is_replica_online(r.replica)
        }
        reassigning = {tp.topic for tp in context.partitions_being_reassigned}
        await self._topic_deletion.init(marked & context.all_topics, (offline | reassigning) & marked)
        unknown = marked - context.all_topics
        if unknown:
            await self._store.delete_topic_deletions(unknown, context.epoch_zk_version)

    async def _watch_brokers(self, broker_ids: list[int]) -> bool:
        """Arm each broker's data watch by reading its registration again, and take what that
        read shows: a change made between the read that listed the broker and this one fired
        no watch (none was armed yet), so it is seen only here. True if one changed."""
        current = await asyncio.gather(*(self._store.registered_broker(b, watch=True) for b in broker_ids))
        changed = [self._take_registration(b, c) for b, c in zip(broker_ids, current, strict=True)]
        return any(changed)

    def _take_registration(self, broker_id: int, current: RegisteredBroker | None) -> bool:
        """Keep a live broker's registration as read (its endpoints, rack), under the broker
        epoch known: a new epoch is a bounce, which the `/brokers/ids` watch reports."""
        context = self._context
        cached = context.live_brokers.get(broker_id)
        if current is None or cached is None or current.info == cached.info:
            return False
        log.info("broker %d changed its registration: %s", broker_id, current.info)
        context.live_brokers[broker_id] = RegisteredBroker(current.info, cached.broker_epoch)
        return True

    # --- brokers (spec §7.1, §7.2) ---

    async def on_broker_change(self) -> None:
        context = self._context
        registered = {b.info.broker_id: b for b in await self._store.registered_brokers(watch=True)}
        cached = context.live_brokers
        new = sorted(set(registered) - set(cached))
        dead = sorted(set(cached) - set(registered))
        bounced = sorted(
            b for b in set(registered) & set(cached) if registered[b].broker_epoch > cached[b].broker_epoch
        )
        if not (new or dead or bounced):
            return
        log.info("broker change: new %s, dead %s, bounced %s", new, dead, bounced)
        for broker_id in new:
            self._channel.add_broker(registered[broker_id])
        for broker_id in bounced:
            self._channel.remove_broker(broker_id)
            self._channel.add_broker(registered[broker_id])
        for broker_id in dead:
            self._channel.remove_broker(broker_id)
        if new:
            context.live_brokers.update({b: registered[b] for b in new})
            await self.on_broker_startup(new)
        if bounced:
            for broker_id in bounced:
                del context.live_brokers[broker_id]
            await self.on_broker_failure(bounced)
            context.live_brokers.update({b: registered[b] for b in bounced})
            await self.on_broker_startup(bounced)
        if dead:
            for broker_id in dead:
                del context.live_brokers[broker_id]
            await self.on_broker_failure(dead)

    async def on_broker_startup(self, new: list[int]) -> None:
        context = self._context
        for broker_id in new:
            # A (re)started broker's log directories are all online again (spec §7.1).
            context.replicas_on_offline_dirs.pop(broker_id, None)
        batch = self._new_batch()
        batch.add_update_metadata(context.live_or_shutting_down_ids() - set(new))
        batch.add_update_metadata(new, [tp for tp in context.leadership])
        await batch.send()
        hosted = await context.replicas_on_brokers(set(new))
        await self._replicas.handle_state_changes(hosted, ReplicaState.ONLINE)
        await self._partitions.trigger_online_partition_state_change()
        if self._reassignment is not None:
            await self._reassignment.on_brokers_started(new)
        deleting = {r.tp.topic for r in hosted if context.is_topic_queued_up_for_deletion(r.tp.topic)}
        if deleting:
            await self._topic_deletion.resume_deletion_for_topics(sorted(deleting))
        if await self._watch_brokers(new):
            await self._send_update_metadata_to_all()

    async def on_broker_failure(self, dead: list[int]) -> None:
        self._context.shutting_down.difference_update(dead)
        for broker_id in dead:
            self._context.replicas_on_offline_dirs.pop(broker_id, None)
        await self.on_replicas_become_offline(await self._context.replicas_on_brokers(set(dead)))

    async def on_replicas_become_offline(self, replicas: list[PartitionReplica]) -> None:
        context = self._context
        # Replicas of topics queued for deletion fail their deletion instead (spec §7.2).
        deleting = [r for r in replicas if context.is_topic_queued_up_for_deletion(r.tp.topic)]
        replicas = [r for r in replicas if not context.is_topic_queued_up_for_deletion(r.tp.topic)]
        await self._partitions.handle_state_changes(
            context.partitions_with_offline_leader(), PartitionState.OFFLINE
        )
        elected = await self._partitions.trigger_online_partition_state_change()
        await self._replicas.handle_state_changes(replicas, ReplicaState.OFFLINE)
        if deleting:
            await self._topic_deletion.fail_replica_deletion(deleting)
        if not replicas and not any(isinstance(r, LeaderAndIsr) for r in elected.values()):
            # Nothing else will tell the brokers that one of them is gone.
            batch = self._new_batch()
            batch.add_update_metadata(context.live_or_shutting_down_ids())
            await batch.send()

    async def on_broker_modifications(self, broker_id: int) -> None:
        if await self._watch_brokers([broker_id]):
            await self._send_update_metadata_to_all()

    async def _send_update_metadata_to_all(self) -> None:
        batch = self._new_batch()
        batch.add_update_metadata(self._context.live_or_shutting_down_ids())
        await batch.send()

    # --- topics (spec §7.4, §7.5) ---

    async def on_topic_change(self) -> None:
        context = self._context
        topics = await self._store.topics(watch=True)
        new, deleted = topics - context.all_topics, context.all_topics - topics
        # Known but never read: its znode was gone by the time it was read after a listing
        # (deleted, maybe to be created again) or unreadable, so no data watch is armed on it
        # and only this children watch can tell that it is back. Read it again.
        unread = {
            t
            for t in topics & context.all_topics
            if t not in context.assignments and not context.is_topic_queued_up_for_deletion(t)
        }
        context.all_topics = set(topics)
        for topic in deleted:
            context.remove_topic(topic)
        if not (new or unread):
            return
        read = await self._store.topic_assignments(new | unread, watch=True)
        assignments = {t: a for t, a in read.items() if t in new or a.partitions}
        if not (new or assignments):
            return
        created = []
        for topic, assignment in sorted(assignments.items()):
            await turn_if_held()  # 200 topics of 1,000 partitions: a pass of 200k
            for partition, replicas in sorted(assignment.partitions.items()):
                tp = TopicPartition(topic, partition)
                context.set_assignment(tp, replicas)
                created.append(tp)
        log.info("new topics %s with %d partitions", sorted(assignments), len(created))
        await self.on_new_partition_creation(created)

    async def on_partition_modifications(self, topic: str) -> None:
        context = self._context
        if topic not in context.all_topics:
            return
        assignment = (await self._store.topic_assignments({topic}, watch=True)).get(topic)
        if assignment is None:
            return
        known = context.assignments.get(topic, {})
        to_add = {p: r for p, r in assignment.partitions.items() if p not in known}
        if to_add and context.is_topic_queued_up_for_deletion(topic):
            await self._restore_topic_assignment(topic, assignment, sorted(to_add))
            return
        added = []
        for partition, replicas in sorted(to_add.items()):
            tp = TopicPartition(topic, partition)
            context.set_assignment(tp, replicas)
            added.append(tp)
        if added:
            log.info("new partitions of %s: %s", topic, [tp.partition for tp in added])
            await self.on_new_partition_creation(added)

    async def _restore_topic_assignment(
        self, topic: str, written: TopicAssignment, ignored: list[int]
    ) -> None:
        """Partitions added to a topic queued for deletion are ignored, and the topic znode
        gets back the partitions that exist (spec §7.5 step 2)."""
        context = self._context
        existing = await self._store.topic_partition_ids(topic)
        known = context.assignments.get(topic, {})
        restored = {p: a for p, a in known.items() if p in existing}
        log.info(
            "ignoring partitions %s added to %s: the topic is queued for deletion; restoring %d partitions",
            ignored,
            topic,
            len(restored),
        )
        await self._store.set_topic_assignment(
            TopicAssignment(topic, restored, written.topic_id), context.epoch_zk_version
        )

    async def on_new_partition_creation(self, partitions: list[TopicPartition]) -> None:
        """Kafka's onNewPartitionCreation, NEW_PARTITIONS_PER_STEP partitions at a time: each
        group goes New, its replicas New, Online (its state znodes created, LeaderAndIsr and
        UpdateMetadata sent) and its replicas Online before the next begins. Done for 200k
        partitions at once, every step is a pass of seconds over all of them, and each
        broker's requests hold 200k partition states to encode, decode and apply; in groups,
        each step and each request is bounded, and the brokers start on the first group while
        the controller writes the next."""
        async for group in sliced(partitions, NEW_PARTITIONS_PER_STEP):
            replicas = [PartitionReplica(tp, r) for tp in group for r in self._context.replicas(tp)]
            await self._partitions.handle_state_changes(group, PartitionState.NEW)
            await self._replicas.handle_state_changes(replicas, ReplicaState.NEW)
            await self._partitions.handle_state_changes(group, PartitionState.ONLINE, Strategy.OFFLINE)
            await self._replicas.handle_state_changes(replicas, ReplicaState.ONLINE)
