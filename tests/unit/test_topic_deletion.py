"""Topic deletion (spec §7.6, §12.7 TopicDeletionManagerTest): first the manager on its own,
on a context, the real state machines, the in-memory store and a recording channel; then
whole controllers deleting topics through the marker, with brokers failing and controllers
moving."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import pytest

from actors.base.ports import (
    LeaderAndIsr,
    LeadershipInfo,
    RegisteredBroker,
    ReplicaAssignment,
    TopicAssignment,
    TopicPartition,
)
from actors.controller import KafkaController
from actors.controller.context import (
    ControllerContext,
    PartitionReplica,
    PartitionState,
    ReplicaState,
)
from actors.controller.controller import ControllerConfig
from actors.controller.partition_state_machine import PartitionStateMachine
from actors.controller.replica_state_machine import ReplicaStateMachine
from actors.controller.request_batch import RequestBatch
from actors.controller.topic_deletion import TopicDeletionManager, deletion_errors
from tests.controllers import ControllerCluster as Cluster
from tests.controllers import info, settled, started
from tests.fakes import FakeBrokerChannel, FakeClusterStore, FakeZooKeeper
from tests.support import ManualClock, eventually, topic_admin
from wire.api import (
    LeaderAndIsrResponse,
    PartitionError,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataRequest,
)
from wire.errors import ErrorCode

BROKERS = (0, 1, 2)


class Deletion:
    """A controller's context with topics foo and bar, three partitions each on brokers 0-2,
    every partition led and every replica online; the manager and state machines over it."""

    def __init__(self) -> None:
        self.zk = FakeZooKeeper()
        self.zk.elected(0, (1, 1))
        self.store = FakeClusterStore(self.zk)
        self.channel = FakeBrokerChannel()
        context = ControllerContext(epoch=1, epoch_zk_version=1)
        for broker in BROKERS:
            registered = RegisteredBroker(info(broker), 100 + broker)
            context.live_brokers[broker] = registered
            self.channel.add_broker(registered)
        for topic in ("foo", "bar"):
            assignment = {p: ReplicaAssignment(BROKERS[p:] + BROKERS[:p]) for p in range(3)}
            self.zk.topics[topic] = TopicAssignment(topic, assignment)
            context.all_topics.add(topic)
            for partition, replicas in assignment.items():
                tp = TopicPartition(topic, partition)
                state = LeaderAndIsr(replicas.replicas[0], 0, replicas.replicas)
                self.zk.partition_states[tp] = (state, 1, 0)
                context.set_assignment(tp, replicas)
                context.leadership[tp] = LeadershipInfo(state, 1)
                context.partition_states[tp] = PartitionState.ONLINE
                for replica in replicas.replicas:
                    context.replica_states[PartitionReplica(tp, replica)] = ReplicaState.ONLINE
        self.context = context
        self.partitions = PartitionStateMachine(
            context, self.store, self.new_batch, unclean_default=False, on_unclean_election=lambda tp: None
        )
        self.replicas = ReplicaStateMachine(context, self.store, self.new_batch)
        self.manager = TopicDeletionManager(
            context=context,
            store=self.store,
            partitions=self.partitions,
            replicas=self.replicas,
            new_batch=self.new_batch,
            delete_topic_enable=True,
        )

    def new_batch(self) -> RequestBatch:
        return RequestBatch(self.context, self.channel, 0)

    def replicas_of(self, topic: str, *, on: set[int] | None = None) -> list[PartitionReplica]:
        return [r for r in self.context.replicas_for_topic(topic) if on is None or r.replica in on]

    def states(self, replicas: list[PartitionReplica]) -> set[ReplicaState]:
        return {self.context.replica_states.get(r, ReplicaState.NON_EXISTENT) for r in replicas}

    def take_down(self, broker: int) -> None:
        """Broker `broker` died earlier: its replicas are Offline."""
        del self.context.live_brokers[broker]
        for replica in self.context.all_replicas():
            if replica.replica == broker:
                self.context.replica_states[replica] = ReplicaState.OFFLINE

    def bring_back(self, broker: int) -> None:
        self.context.live_brokers[broker] = RegisteredBroker(info(broker), 200 + broker)


@pytest.fixture
def deletion() -> Deletion:
    return Deletion()


async def test_initialization_keeps_only_queued_topics_as_ineligible(deletion: Deletion) -> None:
    await deletion.manager.init({"foo", "bar"}, {"bar", "baz"})
    assert deletion.context.topics_to_be_deleted == {"foo", "bar"}
    assert deletion.context.topics_ineligible_for_deletion == {"bar"}


async def test_initialization_with_deletion_disabled_removes_the_markers(deletion: Deletion) -> None:
    deletion.zk.deletion_markers = {"foo"}
    deletion.manager.delete_topic_enable = False
    await deletion.manager.init({"foo"}, set())
    assert deletion.context.topics_to_be_deleted == set()
    assert deletion.zk.deletion_markers == set()


async def test_basic_deletion(deletion: Deletion) -> None:
    context = deletion.context
    await deletion.manager.enqueue_topics({"foo", "bar"})
    every = deletion.replicas_of("foo") + deletion.replicas_of("bar")
    assert deletion.states(every) == {ReplicaState.DELETION_STARTED}
    assert {context.partition_states[tp] for tp in context.all_partitions()} == {PartitionState.NON_EXISTENT}
    assert context.topics_with_deletion_started == {"foo", "bar"}
    assert context.topics_ineligible_for_deletion == set()
    sent = deletion.channel.take()
    updates = [r for _, r in sent if isinstance(r, UpdateMetadataRequest) and r.partition_states]
    assert updates and all(s.leader == -2 for r in updates for s in r.partition_states)
    assert {(s.topic, s.partition) for s in updates[0].partition_states} == set(context.all_partitions())
    deletes = [(broker, p) for broker, r in sent if isinstance(r, StopReplicaRequest) for p in r.partitions]
    deleted = {(broker, p.topic, p.partition) for broker, p in deletes if p.delete_partition}
    assert deleted == {(r.replica, r.tp.topic, r.tp.partition) for r in every}
    assert all(p.leader_epoch == -2 for _, p in deletes), "queued topics carry leader epoch -2"

    await deletion.manager.complete_replica_deletion(every)
    assert context.all_topics == set() and context.assignments == {}
    assert context.topics_to_be_deleted == set() and context.topics_with_deletion_started == set()
    assert context.replica_states == {} and context.leadership == {}
    assert deletion.zk.topics == {} and deletion.zk.partition_states == {}


async def test_deletion_with_a_broker_offline_waits_for_it(deletion: Deletion) -> None:
    context = deletion.context
    deletion.take_down(2)
    await deletion.manager.enqueue_topics({"foo"})
    online = deletion.replicas_of("foo", on={0, 1})
    offline = deletion.replicas_of("foo", on={2})
    assert deletion.states(online) == {ReplicaState.DELETION_STARTED}
    assert deletion.states(offline) == {ReplicaState.DELETION_INELIGIBLE}
    assert context.topics_ineligible_for_deletion == {"foo"}
    assert context.replicas_ineligible_to_delete_count() == 3

    await deletion.manager.complete_replica_deletion(online)
    assert deletion.states(online) == {ReplicaState.DELETION_SUCCESSFUL}
    assert deletion.states(offline) == {ReplicaState.OFFLINE}, "retried: back to Offline"
    assert "foo" in context.all_topics

    deletion.bring_back(2)
    await deletion.manager.resume_deletion_for_topics({"foo"})
    assert deletion.states(offline) == {ReplicaState.DELETION_STARTED}
    await deletion.manager.complete_replica_deletion(offline)
    assert "foo" not in context.all_topics and "foo" not in deletion.zk.topics
    assert "bar" in context.all_topics, "the other topic is untouched"


async def test_broker_failure_after_deletion_started(deletion: Deletion) -> None:
    context = deletion.context
    await deletion.manager.enqueue_topics({"foo"})
    on_two = deletion.replicas_of("foo", on={2})
    others = deletion.replicas_of("foo", on={0, 1})
    await deletion.manager.fail_replica_deletion(on_two)
    assert deletion.states(on_two) == {ReplicaState.DELETION_INELIGIBLE}
    assert context.topics_ineligible_for_deletion == {"foo"}

    await deletion.manager.resume_deletion_for_topics({"foo"})
    assert context.topics_ineligible_for_deletion == set()
    assert deletion.states(on_two) == {ReplicaState.DELETION_INELIGIBLE}, "others are still in flight"

    await deletion.manager.complete_replica_deletion(others)
    assert deletion.states(others) == {ReplicaState.DELETION_SUCCESSFUL}
    assert deletion.states(on_two) == {ReplicaState.DELETION_STARTED}
    await deletion.manager.complete_replica_deletion(on_two)
    assert "foo" not in context.all_topics


async def test_a_failed_stop_replica_answer_makes_the_replica_ineligible(deletion: Deletion) -> None:
    await deletion.manager.enqueue_topics({"foo"})
    tp = TopicPartition("foo", 0)
    errors = {tp: int(ErrorCode.KAFKA_STORAGE_ERROR), TopicPartition("foo", 1): 0}
    await deletion.manager.on_stop_replica_response(0, 0, errors)
    assert deletion.context.replica_states[PartitionReplica(tp, 0)] == ReplicaState.DELETION_INELIGIBLE
    assert deletion.context.replica_states[PartitionReplica(TopicPartition("foo", 1), 0)] == (
        ReplicaState.DELETION_SUCCESSFUL
    )
    assert deletion.context.topics_ineligible_for_deletion == {"foo"}
    # A top-level error fails every partition of the answer.
    await deletion.manager.on_stop_replica_response(1, int(ErrorCode.STALE_CONTROLLER_EPOCH), {tp: 0})
    assert deletion.context.replica_states[PartitionReplica(tp, 1)] == ReplicaState.DELETION_INELIGIBLE


async def test_queued_topics_leave_the_gauges_and_elections(deletion: Deletion) -> None:
    context = deletion.context
    context.leadership[TopicPartition("foo", 0)] = LeadershipInfo(LeaderAndIsr(2, 1, (2,)), 1)
    assert context.preferred_replica_imbalance_count() == 1
    context.queue_topic_deletion({"foo"})
    context.queue_topic_deletion({"foo"})
    assert context.preferred_replica_imbalance_count() == 0
    assert context.leader_epoch(TopicPartition("foo", 0)) == -2
    assert context.leader_epoch(TopicPartition("bar", 0)) == 0
    assert context.topics_to_delete_count() == 1 and context.replicas_to_delete_count() == 9


# --- whole controllers on the in-memory store ---


class DeletingCluster(Cluster):
    delete_topic_enable = True

    async def start(self, broker_id: int, *, unclean: bool = False) -> KafkaController:
        store = FakeClusterStore(self.zk)
        channel = FakeBrokerChannel()
        epoch = await store.register_broker(info(broker_id))
        controller = KafkaController(
            info(broker_id),
            store,
            ManualClock(),
            channel,
            ControllerConfig(delete_topic_enable=self.delete_topic_enable),
        )
        controller.startup(epoch)
        self.controllers[broker_id], self.stores[broker_id], self.channels[broker_id] = (
            controller,
            store,
            channel,
        )
        return controller

    @property
    def store(self) -> FakeClusterStore:
        return self.stores[self.controller.broker_id]

    def gone(self, topic: str) -> bool:
        return (
            topic not in self.zk.topics
            and topic not in self.zk.deletion_markers
            and topic not in self.zk.topic_configs
            and all(tp.topic != topic for tp in self.zk.partition_states)
            and topic not in self.controller.context.all_topics
        )


@pytest.fixture
async def deleting() -> AsyncIterator[DeletingCluster]:
    cluster = DeletingCluster()
    yield cluster
    await cluster.stop()


async def created(cluster: DeletingCluster, topic: str, replicas: dict[int, tuple[int, ...]]) -> None:
    await cluster.create_topic(topic, replicas, retention_ms="1000")
    await eventually(
        settled(
            cluster, lambda: all(TopicPartition(topic, p) in cluster.zk.partition_states for p in replicas)
        ),
        timeout=2,
        message=f"{topic} not created",
    )


def deleted_on(channel: FakeBrokerChannel, broker: int, topic: str) -> set[int]:
    return {
        p.partition
        for r in channel.received(broker)
        if isinstance(r, StopReplicaRequest)
        for p in r.partitions
        if p.topic == topic and p.delete_partition
    }


async def test_a_marked_topic_is_deleted_everywhere(deleting: DeletingCluster) -> None:
    await started(deleting, 1, 2, 3)
    await created(deleting, "t", {0: (1, 2), 1: (2, 3), 2: (3, 1)})
    await created(deleting, "kept", {0: (1, 2, 3)})
    await topic_admin(deleting.store).mark_topic_for_deletion("t")
    await eventually(settled(deleting, lambda: deleting.gone("t")), timeout=2, message="t not deleted")
    channel = deleting.channel
    assert deleted_on(channel, 1, "t") == {0, 2}
    assert deleted_on(channel, 2, "t") == {0, 1}
    assert deleted_on(channel, 3, "t") == {1, 2}
    assert "kept" in deleting.zk.topics and "kept" in deleting.controller.context.all_topics
    assert deleting.controller.metrics.snapshot()["GlobalTopicCount"] == 1


async def test_deletion_disabled_removes_the_marker_and_keeps_the_topic(deleting: DeletingCluster) -> None:
    deleting.delete_topic_enable = False
    await started(deleting, 1)
    await created(deleting, "t", {0: (1,)})
    await topic_admin(deleting.store).mark_topic_for_deletion("t")
    await eventually(
        settled(deleting, lambda: not deleting.zk.deletion_markers), timeout=2, message="marker kept"
    )
    assert "t" in deleting.zk.topics and not deleted_on(deleting.channel, 1, "t")


async def test_a_marker_for_an_unknown_topic_is_removed(deleting: DeletingCluster) -> None:
    await started(deleting, 1)
    deleting.zk.deletion_markers.add("ghost")
    deleting.zk.fire_topic_deletions()
    await eventually(
        settled(deleting, lambda: not deleting.zk.deletion_markers), timeout=2, message="marker kept"
    )


async def test_deletion_waits_for_a_dead_broker_and_finishes_when_it_returns(
    deleting: DeletingCluster,
) -> None:
    await started(deleting, 1, 2, 3)
    victim = next(b for b in (1, 2, 3) if b != deleting.controller.broker_id)
    await created(deleting, "t", {0: (1, 2, 3), 1: (2, 3, 1)})
    await deleting.kill(victim)
    await eventually(settled(deleting, lambda: True), timeout=2, message="not settled")
    await topic_admin(deleting.store).mark_topic_for_deletion("t")
    await eventually(
        settled(deleting, lambda: "t" in deleting.controller.context.topics_ineligible_for_deletion),
        timeout=2,
        message="t not ineligible",
    )
    assert "t" in deleting.zk.topics, "a replica cannot be deleted while its broker is down"
    snapshot = deleting.controller.metrics.snapshot()
    assert snapshot["TopicsIneligibleToDeleteCount"] == 1
    # The live replicas are deleted; the dead broker's wait, Offline, for a retry.
    assert snapshot["TopicsToDeleteCount"] == 1 and snapshot["ReplicasToDeleteCount"] == 2
    await deleting.start(victim)
    await eventually(settled(deleting, lambda: deleting.gone("t")), timeout=2, message="t not deleted")
    assert deleted_on(deleting.channel, victim, "t") == {0, 1}


async def test_the_next_controller_finishes_a_deletion(deleting: DeletingCluster) -> None:
    await started(deleting, 1, 2, 3)
    first = deleting.controller.broker_id
    others = tuple(b for b in (1, 2, 3) if b != first)
    follower = others[0]
    await created(deleting, "t", {0: others, 1: others[::-1]})
    # The follower never answers the first controller's StopReplica.
    deleting.channel.down.add(follower)
    await topic_admin(deleting.store).mark_topic_for_deletion("t")
    await eventually(
        settled(deleting, lambda: "t" in deleting.controller.context.topics_with_deletion_started),
        timeout=2,
        message="deletion not started",
    )
    assert "t" in deleting.zk.topics
    await deleting.kill(first)
    await eventually(
        settled(deleting, lambda: any(c.is_active for c in deleting.controllers.values())),
        timeout=2,
        message="no new controller",
    )
    await eventually(settled(deleting, lambda: deleting.gone("t")), timeout=2, message="t not deleted")
    assert deleting.controller.context.epoch == 2


async def test_partitions_added_to_a_queued_topic_are_refused(deleting: DeletingCluster) -> None:
    await started(deleting, 1, 2)
    await created(deleting, "t", {0: (1, 2)})
    deleting.channel.down.add(2)  # deletion stays in flight
    await topic_admin(deleting.store).mark_topic_for_deletion("t")
    await eventually(
        settled(deleting, lambda: "t" in deleting.controller.context.topics_with_deletion_started),
        timeout=2,
        message="deletion not started",
    )
    grown = TopicAssignment("t", {0: ReplicaAssignment((1, 2)), 1: ReplicaAssignment((2, 1))}, "id-t")
    await topic_admin(deleting.store).add_partitions(grown)
    await eventually(
        settled(deleting, lambda: set(deleting.zk.topics["t"].partitions) == {0}),
        timeout=2,
        message="the added partition was not taken back",
    )
    assert deleting.zk.topics["t"].topic_id == "id-t"
    assert TopicPartition("t", 1) not in deleting.zk.partition_states


async def test_a_controller_moved_under_a_deletion_writes_nothing_and_resigns(
    deleting: DeletingCluster, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="actors")
    await started(deleting, 1, 2)
    old = deleting.controller
    await created(deleting, "t", {0: (1, 2)})
    before = dict(deleting.zk.partition_states)
    # Another broker is elected while this controller has not heard of it yet.
    deleting.zk.elected(9, (2, 2))
    await topic_admin(deleting.store).mark_topic_for_deletion("t")
    await eventually(settled(deleting, lambda: not old.is_active), timeout=2, message="did not resign")
    assert old.active_controller_id == 9
    assert "t" in deleting.zk.topics and deleting.zk.partition_states == before
    assert "controller moved to another broker while processing TopicDeletion" in caplog.text


async def test_a_topic_with_a_partition_being_reassigned_waits(deleting: DeletingCluster) -> None:
    await started(deleting, 1, 2)
    await created(deleting, "t", {0: (1, 2), 1: (2, 1)})
    deleting.controller.context.partitions_being_reassigned.add(TopicPartition("t", 1))
    await topic_admin(deleting.store).mark_topic_for_deletion("t")
    await eventually(
        settled(deleting, lambda: "t" in deleting.controller.context.topics_ineligible_for_deletion),
        timeout=2,
        message="t not held",
    )
    assert not deleted_on(deleting.channel, 1, "t") and "t" in deleting.zk.topics
    # The reassignment completes, and its workflow resumes the deletion (here, with the
    # controller idle, in its stead).
    deleting.controller.context.partitions_being_reassigned.clear()
    await deleting.controller.topic_deletion.resume_deletion_for_topics({"t"})
    await eventually(settled(deleting, lambda: deleting.gone("t")), timeout=2, message="t not deleted")


async def test_a_deletion_waits_for_every_partition_of_its_topic_to_finish_reassigning(
    deleting: DeletingCluster,
) -> None:
    """Found by the simulation (seed 6): the reassignment of t-1 completed and resumed the
    deletion of t while t-0 was still being reassigned; the deletion took t-0's replicas
    offline under its reassignment, which could then never complete, nor the deletion."""
    await started(deleting, 1, 2)
    await created(deleting, "t", {0: (1, 2), 1: (2, 1)})
    reassigning = deleting.controller.context.partitions_being_reassigned
    reassigning.update({TopicPartition("t", 0), TopicPartition("t", 1)})
    await topic_admin(deleting.store).mark_topic_for_deletion("t")
    await eventually(
        settled(deleting, lambda: "t" in deleting.controller.context.topics_ineligible_for_deletion),
        timeout=2,
        message="t not held",
    )
    reassigning.discard(TopicPartition("t", 1))
    await deleting.controller.topic_deletion.resume_deletion_for_topics({"t"})
    assert "t" in deleting.controller.context.topics_ineligible_for_deletion
    assert not deleted_on(deleting.channel, 1, "t") and "t" in deleting.zk.topics
    reassigning.clear()
    await deleting.controller.topic_deletion.resume_deletion_for_topics({"t"})
    await eventually(settled(deleting, lambda: deleting.gone("t")), timeout=2, message="t not deleted")


async def test_a_topic_whose_deletion_waits_still_gets_a_leader_elected(deleting: DeletingCluster) -> None:
    """Found by the simulation (seed 49): a topic marked for deletion while a partition was
    being reassigned lost that partition's leader; no leader was elected for a topic queued
    for deletion, so the reassignment never completed, nor the deletion waiting for it."""
    await started(deleting, 1, 2)
    c = deleting.controller.broker_id
    o = 3 - c
    await created(deleting, "t", {0: (o, c)})
    deleting.controller.context.partitions_being_reassigned.add(TopicPartition("t", 0))
    await topic_admin(deleting.store).mark_topic_for_deletion("t")
    await eventually(
        settled(deleting, lambda: "t" in deleting.controller.context.topics_ineligible_for_deletion),
        timeout=2,
        message="t not held",
    )
    await deleting.kill(o)
    await eventually(
        settled(deleting, lambda: deleting.state("t", 0).leader == c),
        timeout=2,
        message="no leader elected for t-0 while its deletion waits",
    )
    assert "t" in deleting.zk.topics


# --- the request batch while topics are deleted (spec §12.6) ---


class Recorded:
    def __init__(self) -> None:
        self.calls: list[tuple[int, tuple[TopicPartition, ...]]] = []

    def __call__(
        self, broker: int, broker_epoch: int, response: object, partitions: tuple[TopicPartition, ...]
    ) -> None:
        self.calls.append((broker, partitions))


async def sent_batch(deletion: Deletion, recorded: Recorded, *, delete: bool) -> list[object]:
    batch = RequestBatch(deletion.context, deletion.channel, 0, on_deletion_response=recorded)
    for topic in ("foo", "bar"):
        for tp in deletion.context.partitions_for_topic(topic):
            batch.add_stop_replica([1], tp, delete=delete)
    batch.add_update_metadata([1], deletion.context.all_partitions())
    await batch.send()
    await asyncio.sleep(0)  # one loop turn: the fake channel answers with call_soon
    return [r for _, r in deletion.channel.take()]


async def test_update_metadata_gives_queued_topics_leader_minus_2(deletion: Deletion) -> None:
    deletion.context.queue_topic_deletion({"foo"})
    requests = await sent_batch(deletion, Recorded(), delete=False)
    (update,) = [r for r in requests if isinstance(r, UpdateMetadataRequest)]
    foo = [s for s in update.partition_states if s.topic == "foo"]
    bar = [s for s in update.partition_states if s.topic == "bar"]
    assert {(s.leader, s.leader_epoch, s.partition_epoch) for s in foo} == {(-2, 0, 0)}
    assert {s.leader for s in bar} == {0, 1, 2}
    assert all(
        s.isr == list(deletion.context.leadership[TopicPartition(s.topic, s.partition)].leader_and_isr.isr)
        for s in update.partition_states
    )


async def test_stop_replica_answers_are_reported_only_for_started_deletions(deletion: Deletion) -> None:
    deletion.context.queue_topic_deletion({"foo"})
    queued_only = Recorded()
    requests = await sent_batch(deletion, queued_only, delete=True)
    (stop,) = [r for r in requests if isinstance(r, StopReplicaRequest)]
    assert {p.leader_epoch for p in stop.partitions if p.topic == "foo"} == {-2}
    assert {p.leader_epoch for p in stop.partitions if p.topic == "bar"} == {0}
    assert queued_only.calls == [], "queued but not started: no event"

    deletion.context.topics_with_deletion_started.add("foo")
    started_ = Recorded()
    await sent_batch(deletion, started_, delete=True)
    assert started_.calls == [(1, tuple(TopicPartition("foo", p) for p in range(3)))]
    without_delete = Recorded()
    await sent_batch(deletion, without_delete, delete=False)
    assert without_delete.calls == [], "StopReplica without delete: no event"


def test_only_a_partition_a_stop_replica_answer_names_without_error_counts_as_deleted() -> None:
    a, b, c = TopicPartition("d", 0), TopicPartition("d", 1), TopicPartition("d", 2)
    answer = StopReplicaResponse(
        partition_errors=[
            PartitionError(topic="d", partition=0, error_code=0),
            PartitionError(topic="d", partition=1, error_code=ErrorCode.KAFKA_STORAGE_ERROR),
        ]
    )
    assert dict(deletion_errors(answer, [a, b, c])) == {
        a: ErrorCode.NONE,
        b: ErrorCode.KAFKA_STORAGE_ERROR,
        c: ErrorCode.UNKNOWN_SERVER_ERROR,
    }, "a partition missing from the answer failed"
    top = StopReplicaResponse(
        error_code=ErrorCode.STALE_BROKER_EPOCH, partition_errors=answer.partition_errors
    )
    assert {e for _, e in deletion_errors(top, [a, b])} == {ErrorCode.STALE_BROKER_EPOCH}
    assert dict(deletion_errors(LeaderAndIsrResponse(), [a])) == {a: ErrorCode.UNKNOWN_SERVER_ERROR}
