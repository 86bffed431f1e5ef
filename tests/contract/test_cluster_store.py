"""The ClusterStore contract, run against the in-memory fake and the real ZooKeeper store.

The fake is what the controller's unit tests stand on; running the same checks against
ZooKeeper keeps it honest.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Protocol

import pytest
from kazoo.client import KazooClient

from actors.base.clock import SystemClock
from actors.base.ports import (
    AcknowledgedChanges,
    BrokerIdTakenError,
    BrokerInfo,
    ControllerEpoch,
    ControllerMovedError,
    ControllerView,
    LeaderAndIsr,
    LeadershipInfo,
    PartitionStateConflict,
    ReplicaAssignment,
    TopicAlreadyMarkedForDeletionError,
    TopicAssignment,
    TopicExistsError,
    TopicPartition,
    TopicVersionConflict,
    UnknownTopicError,
)
from actors.controller.standby import StandbyFollower, StandbyView
from node.zk import data, paths
from node.zk import store as zk_store
from node.zk.client import ZooKeeperClient, split_connect
from node.zk.store import ZkClusterStore
from tests.fakes import FakeClusterStore, FakeZooKeeper
from tests.support import eventually, topic_admin
from wire.endpoint import Endpoint

SESSION_TIMEOUT_S = 2.0


class Ensemble(Protocol):
    async def store(self) -> FakeClusterStore | ZkClusterStore: ...

    async def expire(self, store: FakeClusterStore | ZkClusterStore) -> None: ...

    async def rewrite_registration(self, store: FakeClusterStore | ZkClusterStore, info: BrokerInfo) -> None:
        """What an operator's `set /brokers/ids/<id>` does (Kafka's updateBrokerInfo)."""


class FakeEnsemble:
    def __init__(self) -> None:
        self.zk = FakeZooKeeper()

    async def store(self) -> FakeClusterStore:
        return FakeClusterStore(self.zk, stale_session_wait=0.2)

    async def expire(self, store: FakeClusterStore | ZkClusterStore) -> None:
        assert isinstance(store, FakeClusterStore)
        await store.expire_session()

    async def rewrite_registration(self, store: FakeClusterStore | ZkClusterStore, info: BrokerInfo) -> None:
        self.zk.update_broker_registration(info)


class RealEnsemble:
    def __init__(self, connect: str) -> None:
        self.connect = connect
        self.clients: list[ZooKeeperClient] = []

    async def store(self) -> ZkClusterStore:
        client = ZooKeeperClient(self.connect, session_timeout_s=SESSION_TIMEOUT_S, connection_timeout_s=10)
        await client.start()
        self.clients.append(client)
        store = ZkClusterStore(client, SystemClock())
        await store.ensure_persistent_paths()
        return store

    async def expire(self, store: FakeClusterStore | ZkClusterStore) -> None:
        """Expire the session from outside: another client takes it over and closes it."""
        assert isinstance(store, ZkClusterStore)
        servers, _ = split_connect(self.connect)
        session_id, password = store.zk.session_id, store.zk.session_password

        def take_over_and_close() -> None:
            kazoo = KazooClient(hosts=servers, client_id=(session_id, password))
            kazoo.start(timeout=10)
            kazoo.stop()
            kazoo.close()

        await asyncio.to_thread(take_over_and_close)

    async def rewrite_registration(self, store: FakeClusterStore | ZkClusterStore, info: BrokerInfo) -> None:
        assert isinstance(store, ZkClusterStore)
        await store.zk.set(paths.broker_id(info.broker_id), data.encode_broker(info, 0))

    async def close(self) -> None:
        for client in self.clients:
            await client.close()


@pytest.fixture(params=["fake", "zookeeper"])
async def ensemble(request: pytest.FixtureRequest) -> AsyncIterator[Ensemble]:
    if request.param == "fake":
        yield FakeEnsemble()
        return
    real = RealEnsemble(request.getfixturevalue("zk_connect"))
    yield real
    await real.close()


def info(broker_id: int, port: int = 9092) -> BrokerInfo:
    return BrokerInfo(broker_id, (Endpoint("PLAINTEXT", "PLAINTEXT", "127.0.0.1", port),), rack="r1")


class Recorder:
    """A ControllerWatcher and SessionWatcher that writes down what it is told."""

    def __init__(self) -> None:
        self.events: list[str] = []

    def controller_changed(self) -> None:
        self.events.append("changed")

    def controller_deleted(self) -> None:
        self.events.append("deleted")

    async def before_new_session(self) -> None:
        self.events.append("before_new_session")

    def after_new_session(self) -> None:
        self.events.append("after_new_session")


def recorded(recorder: Recorder, *expected: str) -> Callable[[], Awaitable[bool]]:
    async def probe() -> bool:
        return recorder.events[: len(expected)] == list(expected)

    return probe


async def test_nobody_is_controller_at_first(ensemble: Ensemble) -> None:
    store = await ensemble.store()
    assert await store.controller_id() is None
    assert await store.controller_epoch() is None


async def test_first_controller_gets_epoch_1_at_version_1(ensemble: Ensemble) -> None:
    store = await ensemble.store()
    assert await store.read_controller() == ControllerView(None, None)
    won = await store.register_controller_and_increment_epoch(1)
    assert (won.epoch, won.zk_version) == (1, 1)
    assert await store.controller_id() == 1
    assert await store.read_controller() == ControllerView(1, won)
    epoch = await store.controller_epoch()
    assert epoch is not None and (epoch.epoch, epoch.zk_version) == (1, 1)


async def test_a_second_candidate_loses_and_changes_nothing(ensemble: Ensemble) -> None:
    first, second = await ensemble.store(), await ensemble.store()
    await first.register_controller_and_increment_epoch(1)
    with pytest.raises(ControllerMovedError):
        await second.register_controller_and_increment_epoch(2)
    assert await second.controller_id() == 1
    epoch = await second.controller_epoch()
    assert epoch is not None and epoch.epoch == 1


async def test_a_candidate_with_a_stale_epoch_read_loses(ensemble: Ensemble) -> None:
    first, second = await ensemble.store(), await ensemble.store()
    won = await first.register_controller_and_increment_epoch(1)
    await first.delete_controller(won.zk_version)
    stale = ControllerEpoch(0, 0)
    with pytest.raises(ControllerMovedError):
        await second.register_controller_and_increment_epoch(2, stale)
    assert await second.controller_id() is None, "a losing multi-op creates nothing"
    fresh = await second.controller_epoch()
    again = await second.register_controller_and_increment_epoch(2, fresh)
    assert (again.epoch, again.zk_version) == (2, 2)


async def test_read_controller_never_pairs_a_controller_with_an_older_epoch(ensemble: Ensemble) -> None:
    writer, reader = await ensemble.store(), await ensemble.store()
    # Each controller's broker id is the epoch it won, so a consistent read has epoch >= id.
    stop = asyncio.Event()

    async def elect_again_and_again() -> None:
        epoch = 0
        while not stop.is_set():
            won = await writer.register_controller_and_increment_epoch(epoch + 1)
            epoch = won.epoch
            await writer.delete_controller(won.zk_version)

    async def read_again_and_again() -> list[tuple[int, int]]:
        torn = []
        for _ in range(300):
            view = await reader.read_controller()
            holder, epoch = view.controller_id, view.epoch
            if holder is not None and epoch is not None and epoch.epoch < holder:
                torn.append((holder, epoch.epoch))
        return torn

    elections = asyncio.create_task(elect_again_and_again())
    torn = await read_again_and_again()
    stop.set()
    await elections
    assert torn == [], "read_controller returned an epoch older than the controller it named"


async def test_delete_controller_is_fenced_by_the_epoch_version(ensemble: Ensemble) -> None:
    store = await ensemble.store()
    won = await store.register_controller_and_increment_epoch(1)
    with pytest.raises(ControllerMovedError):
        await store.delete_controller(won.zk_version - 1)
    assert await store.controller_id() == 1
    await store.delete_controller(won.zk_version)
    assert await store.controller_id() is None


async def test_each_new_controller_raises_the_epoch_by_one(ensemble: Ensemble) -> None:
    first, second = await ensemble.store(), await ensemble.store()
    one = await first.register_controller_and_increment_epoch(1)
    await first.delete_controller(one.zk_version)
    two = await second.register_controller_and_increment_epoch(2)
    assert (two.epoch, two.zk_version) == (2, 2)
    # The deposed controller's fenced writes now fail.
    with pytest.raises(ControllerMovedError):
        await first.delete_controller(one.zk_version)
    assert await first.controller_id() == 2


async def test_controller_watch_reports_creation_and_deletion(ensemble: Ensemble) -> None:
    watching, acting = await ensemble.store(), await ensemble.store()
    recorder = Recorder()
    watching.watch_controller(recorder)
    assert await watching.controller_id() is None  # arms the watch
    won = await acting.register_controller_and_increment_epoch(7)
    await eventually(recorded(recorder, "changed"), timeout=5, message="creation was not reported")
    assert await watching.controller_id() == 7  # re-arms it
    await acting.delete_controller(won.zk_version)
    await eventually(recorded(recorder, "changed", "deleted"), timeout=5, message="deletion was not reported")


# The broker registry (BrokerRegistry), on its own: each store is one session, whose
# registry shares it.


async def test_broker_registration_is_idempotent_within_a_session(ensemble: Ensemble) -> None:
    registry = (await ensemble.store()).registry
    epoch = await registry.register_broker(info(3))
    assert epoch > 0
    assert await registry.register_broker(info(3)) == epoch
    brokers = await registry.registered_brokers()
    assert [(b.info, b.broker_epoch) for b in brokers] == [(info(3), epoch)]


async def test_registered_brokers_are_listed_with_their_epochs(ensemble: Ensemble) -> None:
    one, two = (await ensemble.store()).registry, (await ensemble.store()).registry
    epoch_2 = await two.register_broker(info(2, 9093))
    epoch_1 = await one.register_broker(info(1, 9092))
    assert epoch_1 > epoch_2, "the broker epoch is the czxid, so a later registration is larger"
    listed = await one.registered_brokers()
    assert [(b.info.broker_id, b.broker_epoch) for b in listed] == [(1, epoch_1), (2, epoch_2)]
    assert listed[1].info == info(2, 9093)


async def test_an_id_held_by_another_live_session_is_refused(ensemble: Ensemble) -> None:
    holder, intruder = (await ensemble.store()).registry, (await ensemble.store()).registry
    epoch = await holder.register_broker(info(5))
    with pytest.raises(BrokerIdTakenError, match=r"broker\.id 5 is already registered"):
        await intruder.register_broker(info(5, 9999))
    assert [(b.info, b.broker_epoch) for b in await holder.registered_brokers()] == [(info(5), epoch)]


async def test_session_expiry_drops_ephemerals_and_tells_the_session_watcher(ensemble: Ensemble) -> None:
    store, observer = await ensemble.store(), await ensemble.store()
    recorder = Recorder()
    store.watch_session(recorder)
    old_epoch = await store.register_broker(info(4))
    await store.register_controller_and_increment_epoch(4)
    await ensemble.expire(store)
    await eventually(
        recorded(recorder, "before_new_session", "after_new_session"),
        timeout=10,
        message="the session watcher was not told of the new session",
    )
    assert await observer.controller_id() is None
    assert await observer.registered_brokers() == []
    new_epoch = await store.register_broker(info(4))
    assert new_epoch > old_epoch


def assignment(topic: str, partitions: int = 2) -> TopicAssignment:
    return TopicAssignment(topic, {p: ReplicaAssignment((1, 2, 3)) for p in range(partitions)})


class ClusterRecorder(Recorder):
    def brokers_changed(self) -> None:
        self.events.append("brokers")

    def broker_modified(self, broker_id: int) -> None:
        self.events.append(f"broker {broker_id}")

    def topics_changed(self) -> None:
        self.events.append("topics")

    def topic_modified(self, topic: str) -> None:
        self.events.append(f"topic {topic}")


async def test_topics_assignments_and_configs(ensemble: Ensemble) -> None:
    store = await ensemble.store()
    await topic_admin(store).create_topic(assignment("orders"), {"unclean.leader.election.enable": "true"})
    await topic_admin(store).create_topic(assignment("audit", 1), {})
    assert await store.topics() >= {"orders", "audit"}
    found = await store.topic_assignments({"orders", "audit", "missing"})
    assert found == {"orders": assignment("orders"), "audit": assignment("audit", 1)}
    assert (await store.topic_configs({"orders", "audit"})) == {
        "orders": {"unclean.leader.election.enable": "true"},
        "audit": {},
    }
    with pytest.raises(TopicExistsError):
        await topic_admin(store).create_topic(assignment("orders"), {})


async def test_partition_states_are_created_fenced_and_per_partition(ensemble: Ensemble) -> None:
    store = await ensemble.store()
    await topic_admin(store).create_topic(assignment("t", 3), {})
    fence = await store.register_controller_and_increment_epoch(1)
    first = {TopicPartition("t", 0): LeaderAndIsr(1, 0, (1, 2))}
    assert await store.create_partition_states(first, fence.epoch, fence.zk_version) == first
    both = {**first, TopicPartition("t", 1): LeaderAndIsr(2, 0, (2, 1))}
    results = await store.create_partition_states(both, fence.epoch, fence.zk_version)
    assert isinstance(results[TopicPartition("t", 0)], Exception), "an existing state is not overwritten"
    assert results[TopicPartition("t", 1)] == LeaderAndIsr(2, 0, (2, 1), partition_epoch=0)
    read = await store.partition_states(
        [TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("t", 2)]
    )
    assert read == {
        TopicPartition("t", 0): LeadershipInfo(LeaderAndIsr(1, 0, (1, 2), 0), fence.epoch),
        TopicPartition("t", 1): LeadershipInfo(LeaderAndIsr(2, 0, (2, 1), 0), fence.epoch),
    }


async def test_partition_state_updates_are_conditional_on_the_partition_epoch(ensemble: Ensemble) -> None:
    store = await ensemble.store()
    await topic_admin(store).create_topic(assignment("t", 3), {})
    fence = await store.register_controller_and_increment_epoch(1)
    tps = [TopicPartition("t", p) for p in range(3)]
    await store.create_partition_states(
        {tp: LeaderAndIsr(1, 0, (1, 2)) for tp in tps}, fence.epoch, fence.zk_version
    )
    updates = {
        tps[0]: LeaderAndIsr(2, 1, (2,), partition_epoch=0),
        tps[1]: LeaderAndIsr(2, 1, (2,), partition_epoch=7),  # stale expectation
        tps[2]: LeaderAndIsr(2, 1, (2,), partition_epoch=0),
    }
    results = await store.update_partition_states(updates, fence.epoch, fence.zk_version)
    assert results[tps[0]] == LeaderAndIsr(2, 1, (2,), partition_epoch=1)
    assert isinstance(results[tps[1]], PartitionStateConflict)
    assert results[tps[2]] == LeaderAndIsr(2, 1, (2,), partition_epoch=1)
    read = await store.partition_states(tps)
    assert read[tps[1]].leader_and_isr == LeaderAndIsr(1, 0, (1, 2), 0), "a conflicting write changes nothing"


async def test_a_deposed_controller_writes_no_partition_state(ensemble: Ensemble) -> None:
    old, new = await ensemble.store(), await ensemble.store()
    await topic_admin(old).create_topic(assignment("t", 2), {})
    fence = await old.register_controller_and_increment_epoch(1)
    tp = TopicPartition("t", 0)
    await old.create_partition_states({tp: LeaderAndIsr(1, 0, (1,))}, fence.epoch, fence.zk_version)
    await old.delete_controller(fence.zk_version)
    await new.register_controller_and_increment_epoch(2)
    with pytest.raises(ControllerMovedError):
        await old.update_partition_states({tp: LeaderAndIsr(3, 1, (3,), 0)}, fence.epoch, fence.zk_version)
    with pytest.raises(ControllerMovedError):
        await old.create_partition_states(
            {TopicPartition("t", 1): LeaderAndIsr(1, 0, (1,))}, fence.epoch, fence.zk_version
        )
    assert (await new.partition_states([tp, TopicPartition("t", 1)])) == {
        tp: LeadershipInfo(LeaderAndIsr(1, 0, (1,), 0), fence.epoch)
    }


async def test_a_controller_whose_session_expired_writes_nothing_though_none_was_elected_since(
    ensemble: Ensemble,
) -> None:
    """A controller's events may still be queued when it reaches ZooKeeper on a new session:
    its epoch's version is still current (nobody has run since), but its `/controller` went
    with the old session, and so does its right to write."""
    controller, observer = await ensemble.store(), await ensemble.store()
    await topic_admin(controller).create_topic(assignment("t", 2), {})
    fence = await controller.register_controller_and_increment_epoch(1)
    tp = TopicPartition("t", 0)
    await controller.create_partition_states({tp: LeaderAndIsr(1, 0, (1, 2))}, fence.epoch, fence.zk_version)
    recorder = Recorder()
    controller.watch_session(recorder)
    await ensemble.expire(controller)
    await eventually(
        recorded(recorder, "before_new_session", "after_new_session"), timeout=10, message="no new session"
    )
    assert await observer.controller_epoch() == fence, "nobody has been elected since"
    with pytest.raises(ControllerMovedError):
        await controller.update_partition_states(
            {tp: LeaderAndIsr(1, 0, (1, 2, 5), 0)}, fence.epoch, fence.zk_version
        )
    with pytest.raises(ControllerMovedError):
        await controller.create_partition_states(
            {TopicPartition("t", 1): LeaderAndIsr(1, 0, (1,))}, fence.epoch, fence.zk_version
        )
    with pytest.raises(ControllerMovedError):
        await controller.delete_preferred_replica_election(fence.zk_version)
    assert (await observer.partition_states([tp, TopicPartition("t", 1)])) == {
        tp: LeadershipInfo(LeaderAndIsr(1, 0, (1, 2), 0), fence.epoch)
    }


async def test_a_controller_whose_znode_an_operator_deleted_writes_nothing(ensemble: Ensemble) -> None:
    """`rmr /controller` ends the reign at once: the controller hears of it later, through
    its watch, and what it writes meanwhile is refused."""
    controller, operator = await ensemble.store(), await ensemble.store()
    await topic_admin(controller).create_topic(assignment("t", 1), {})
    fence = await controller.register_controller_and_increment_epoch(1)
    tp = TopicPartition("t", 0)
    await controller.create_partition_states({tp: LeaderAndIsr(1, 0, (1, 2))}, fence.epoch, fence.zk_version)
    assert await operator.force_delete_controller() == 1
    with pytest.raises(ControllerMovedError):
        await controller.update_partition_states(
            {tp: LeaderAndIsr(2, 1, (2,), 0)}, fence.epoch, fence.zk_version
        )
    assert (await operator.partition_states([tp]))[tp].leader_and_isr == LeaderAndIsr(1, 0, (1, 2), 0)
    again = await controller.register_controller_and_increment_epoch(1)
    written = await controller.update_partition_states(
        {tp: LeaderAndIsr(2, 1, (2,), 0)}, again.epoch, again.zk_version
    )
    assert written[tp] == LeaderAndIsr(2, 1, (2,), partition_epoch=1), "the next reign writes"


async def test_cluster_watches_report_broker_and_topic_changes(ensemble: Ensemble) -> None:
    controller, other = await ensemble.store(), await ensemble.store()
    recorder = ClusterRecorder()
    controller.watch_cluster(recorder)
    await controller.registered_brokers(watch=True)
    await other.register_broker(info(8))
    await eventually(recorded(recorder, "brokers"), timeout=5, message="broker registration not reported")
    await controller.topics(watch=True)
    await topic_admin(other).create_topic(assignment("fresh"), {})
    await eventually(
        recorded(recorder, "brokers", "topics"), timeout=5, message="topic creation not reported"
    )
    assert recorder.events.count("topics") == 1, "a watch fires once per arming"


class PreferredElectionRecorder(Recorder):
    def preferred_replica_election_created(self) -> None:
        self.events.append("created")


async def test_preferred_replica_election_node_is_read_watched_and_deleted_fenced(ensemble: Ensemble) -> None:
    controller, admin = await ensemble.store(), await ensemble.store()
    recorder = PreferredElectionRecorder()
    controller.watch_preferred_replica_election(recorder)
    assert await controller.preferred_replica_election() is None  # arms the watch
    wanted = [TopicPartition("t", 1), TopicPartition("u", 0)]
    await admin.create_preferred_replica_election(wanted)
    await eventually(recorded(recorder, "created"), timeout=5, message="creation was not reported")
    assert await controller.preferred_replica_election() == wanted
    fence = await controller.register_controller_and_increment_epoch(1)
    await controller.delete_preferred_replica_election(fence.zk_version)
    await controller.delete_preferred_replica_election(fence.zk_version)  # gone already: fine
    assert await controller.preferred_replica_election() is None  # re-arms it
    await admin.create_preferred_replica_election(wanted[:1])
    await eventually(
        recorded(recorder, "created", "created"), timeout=5, message="the second creation was not reported"
    )


async def test_a_deposed_controller_cannot_delete_the_preferred_election_node(ensemble: Ensemble) -> None:
    old, new = await ensemble.store(), await ensemble.store()
    fence = await old.register_controller_and_increment_epoch(1)
    await old.delete_controller(fence.zk_version)
    await new.register_controller_and_increment_epoch(2)
    await new.create_preferred_replica_election([TopicPartition("t", 0)])
    with pytest.raises(ControllerMovedError):
        await old.delete_preferred_replica_election(fence.zk_version)
    assert await new.preferred_replica_election() == [TopicPartition("t", 0)]


# --- topic deletion and partition expansion (spec §1, §7.5, §7.6) ---


class DeletionRecorder(Recorder):
    def topic_deletions_changed(self) -> None:
        self.events.append("deletions")


async def test_marking_a_topic_for_deletion_is_watched_and_checked(ensemble: Ensemble) -> None:
    controller, admin = await ensemble.store(), await ensemble.store()
    recorder = DeletionRecorder()
    controller.watch_topic_deletions(recorder)
    assert await controller.topics_to_delete(watch=True) == set()
    with pytest.raises(UnknownTopicError):
        await topic_admin(admin).mark_topic_for_deletion("absent")
    await topic_admin(admin).create_topic(assignment("doomed"), {})
    await topic_admin(admin).mark_topic_for_deletion("doomed")
    await eventually(recorded(recorder, "deletions"), timeout=5, message="marker not reported")
    with pytest.raises(TopicAlreadyMarkedForDeletionError):
        await topic_admin(admin).mark_topic_for_deletion("doomed")
    assert await controller.topics_to_delete(watch=True) == {"doomed"}
    fence = await controller.register_controller_and_increment_epoch(1)
    await controller.delete_topic_deletions({"doomed", "never-marked"}, fence.zk_version)
    assert await controller.topics_to_delete() == set()
    await eventually(recorded(recorder, "deletions", "deletions"), timeout=5, message="removal not reported")


async def test_deleting_a_topic_removes_its_znodes_config_and_marker_fenced(ensemble: Ensemble) -> None:
    store, other = await ensemble.store(), await ensemble.store()
    await topic_admin(store).create_topic(assignment("doomed", 3), {"retention.ms": "1000"})
    await topic_admin(store).create_topic(assignment("kept", 1), {"retention.ms": "2000"})
    fence = await store.register_controller_and_increment_epoch(1)
    tps = [TopicPartition("doomed", p) for p in range(3)] + [TopicPartition("kept", 0)]
    await store.create_partition_states(
        {tp: LeaderAndIsr(1, 0, (1,)) for tp in tps}, fence.epoch, fence.zk_version
    )
    await topic_admin(store).mark_topic_for_deletion("doomed")
    assert await store.topic_partition_ids("doomed") == {0, 1, 2}
    await store.delete_controller(fence.zk_version)
    await other.register_controller_and_increment_epoch(2)
    with pytest.raises(ControllerMovedError):
        await store.delete_topic("doomed", fence.zk_version)
    assert "doomed" in await store.topics(), "a deposed controller deletes nothing"
    new_fence = await other.controller_epoch()
    assert new_fence is not None
    await other.delete_topic("doomed", new_fence.zk_version)
    assert await other.topics() >= {"kept"} and "doomed" not in await other.topics()
    assert await other.topic_partition_ids("doomed") == set()
    assert await other.topics_to_delete() == set()
    assert await other.topic_configs({"doomed", "kept"}) == {"doomed": {}, "kept": {"retention.ms": "2000"}}
    assert set(await other.partition_states(tps)) == {TopicPartition("kept", 0)}
    await other.delete_topic("doomed", new_fence.zk_version)  # again: nothing left, no error


async def test_adding_partitions_is_conditional_on_the_version_read(ensemble: Ensemble) -> None:
    store = await ensemble.store()
    original = TopicAssignment("t", {0: ReplicaAssignment((1, 2))}, topic_id="AAAAAAAAAAAAAAAAAAAAAA")
    await topic_admin(store).create_topic(original, {})
    assert await topic_admin(store).topic_assignment_and_version("absent") is None
    found = await topic_admin(store).topic_assignment_and_version("t")
    assert found is not None and found[0] == original
    _, version = found
    # A reassignment is written meanwhile: the add read the topic before it.
    reassigned = TopicAssignment("t", {0: ReplicaAssignment((3, 1, 2), (3,), (1, 2))}, original.topic_id)
    fence = await store.register_controller_and_increment_epoch(1)
    await store.set_topic_assignment(reassigned, fence.zk_version)
    grown = TopicAssignment("t", {**original.partitions, 1: ReplicaAssignment((2, 1))}, original.topic_id)
    with pytest.raises(TopicVersionConflict):
        await topic_admin(store).add_partitions(grown, version)
    assert (await store.topic_assignments({"t"}))["t"] == reassigned, "the stale write changed nothing"
    again = await topic_admin(store).topic_assignment_and_version("t")
    assert again is not None and again[1] != version
    regrown = TopicAssignment("t", {**reassigned.partitions, 1: ReplicaAssignment((2, 1))}, original.topic_id)
    await topic_admin(store).add_partitions(regrown, again[1])
    assert (await store.topic_assignments({"t"}))["t"] == regrown


async def test_partitions_are_added_and_an_assignment_restored_fenced(ensemble: Ensemble) -> None:
    store = await ensemble.store()
    recorder = ClusterRecorder()
    store.watch_cluster(recorder)
    original = TopicAssignment("t", {0: ReplicaAssignment((1, 2))}, topic_id="AAAAAAAAAAAAAAAAAAAAAA")
    await topic_admin(store).create_topic(original, {})
    await store.topic_assignments({"t"}, watch=True)
    grown = TopicAssignment("t", {**original.partitions, 1: ReplicaAssignment((2, 1))}, original.topic_id)
    await topic_admin(store).add_partitions(grown)
    await eventually(recorded(recorder, "topic t"), timeout=5, message="added partitions not reported")
    assert (await store.topic_assignments({"t"}))["t"] == grown
    with pytest.raises(UnknownTopicError):
        await topic_admin(store).add_partitions(TopicAssignment("absent", {0: ReplicaAssignment((1,))}))
    fence = await store.register_controller_and_increment_epoch(1)
    await store.set_topic_assignment(original, fence.zk_version)
    assert (await store.topic_assignments({"t"}))["t"] == original
    with pytest.raises(ControllerMovedError):
        await store.set_topic_assignment(grown, fence.zk_version - 1)


class ReassignmentRecorder:
    def __init__(self) -> None:
        self.created = 0

    def partition_reassignment_created(self) -> None:
        self.created += 1


async def test_the_reassignment_request_is_read_rewritten_and_deleted_fenced(ensemble: Ensemble) -> None:
    controller, admin = await ensemble.store(), await ensemble.store()
    recorder = ReassignmentRecorder()
    controller.watch_reassignments(recorder)
    assert await controller.partition_reassignments(watch=True) is None
    one, two = TopicPartition("t", 0), TopicPartition("t", 1)
    await admin.create_partition_reassignments({one: (4, 5), two: (6,)})

    async def created() -> bool:
        return recorder.created == 1

    await eventually(created, timeout=5, message="the creation was not reported")
    with pytest.raises(FileExistsError):
        await admin.create_partition_reassignments({one: (1,)})
    fence = await controller.register_controller_and_increment_epoch(1)
    assert await controller.partition_reassignments() == {one: (4, 5), two: (6,)}
    await controller.set_partition_reassignments({two: (6,)}, fence.zk_version)
    assert await controller.partition_reassignments() == {two: (6,)}
    with pytest.raises(ControllerMovedError):
        await controller.set_partition_reassignments({}, fence.zk_version - 1)
    await controller.set_partition_reassignments({}, fence.zk_version)
    assert await controller.partition_reassignments(watch=True) is None
    await controller.set_partition_reassignments({}, fence.zk_version)  # already gone: fine


async def test_partition_assignments_are_replaced_keeping_the_others_and_the_topic_id(
    ensemble: Ensemble,
) -> None:
    store = await ensemble.store()
    topic = TopicAssignment(
        "t", {0: ReplicaAssignment((1,)), 1: ReplicaAssignment((2,))}, "AAAAAAAAAAAAAAAAAAAAAA"
    )
    await topic_admin(store).create_topic(topic, {})
    fence = await store.register_controller_and_increment_epoch(1)
    moving = ReplicaAssignment((3, 1), (3,), (1,))
    await store.set_partition_assignments("t", {0: moving}, fence.zk_version)
    assert (await store.topic_assignments({"t"}))["t"] == TopicAssignment(
        "t", {0: moving, 1: ReplicaAssignment((2,))}, "AAAAAAAAAAAAAAAAAAAAAA"
    )
    with pytest.raises(ControllerMovedError):
        await store.set_partition_assignments("t", {0: ReplicaAssignment((3,))}, fence.zk_version - 1)
    assert (await store.topic_assignments({"t"}))["t"].partitions[0] == moving


# --- log-dir event notifications (spec §7.11) ---


class LogDirEventRecorder(Recorder):
    def log_dir_events_changed(self) -> None:
        self.events.append("log dir events")


async def test_log_dir_events_name_their_broker_are_watched_and_deleted_fenced(ensemble: Ensemble) -> None:
    controller, broker = await ensemble.store(), await ensemble.store()
    recorder = LogDirEventRecorder()
    controller.watch_log_dir_events(recorder)
    assert await controller.log_dir_events(watch=True) == {}
    await broker.propagate_log_dir_event(2)
    await broker.propagate_log_dir_event(3)
    await eventually(recorded(recorder, "log dir events"), timeout=5, message="notification not reported")
    events = await controller.log_dir_events(watch=True)
    assert sorted(events.values()) == [2, 3]
    assert all(name.startswith("log_dir_event_") for name in events)
    fence = await controller.register_controller_and_increment_epoch(1)
    await controller.delete_controller(fence.zk_version)
    await broker.register_controller_and_increment_epoch(2)
    with pytest.raises(ControllerMovedError):
        await controller.delete_log_dir_events(list(events), fence.zk_version)
    new_fence = await broker.controller_epoch()
    assert new_fence is not None
    await broker.delete_log_dir_events([*events, "log_dir_event_9999999999"], new_fence.zk_version)
    assert await broker.log_dir_events() == {}
    await eventually(
        recorded(recorder, "log dir events", "log dir events"), timeout=5, message="removal not reported"
    )


# --- watch semantics the fake shares with ZooKeeper ---
#
# A watch is one-shot and armed by the read that answers; ZooKeeper tells a session of a change
# it watches before any later answer on that session, so a read by the watching store that
# already shows a change proves that no notification of it is still on its way.


async def test_a_watch_fires_once_per_arming(ensemble: Ensemble) -> None:
    controller, broker = await ensemble.store(), await ensemble.store()
    recorder = ClusterRecorder()
    controller.watch_cluster(recorder)
    await controller.registered_brokers(watch=True)
    await broker.register_broker(info(1))
    await eventually(recorded(recorder, "brokers"), timeout=5, message="registration not reported")
    await broker.register_broker(info(2, 9093))
    assert [b.info.broker_id for b in await controller.registered_brokers()] == [1, 2]
    assert recorder.events == ["brokers"], "a second change without a re-read was reported"
    await controller.registered_brokers(watch=True)
    await broker.register_broker(info(3, 9094))
    await eventually(
        recorded(recorder, "brokers", "brokers"), timeout=5, message="the re-armed watch did not fire"
    )
    await topic_admin(controller).create_topic(assignment("t", 1), {})
    await controller.topic_assignments({"t"}, watch=True)
    for partitions in (2, 3):
        await topic_admin(broker).add_partitions(assignment("t", partitions))
    assert (await controller.topic_assignments({"t"}))["t"] == assignment("t", 3)
    assert recorder.events == ["brokers", "brokers", "topic t"], "a topic's data watch fires once"


async def test_reading_a_missing_controller_arms_a_watch_for_its_creation(ensemble: Ensemble) -> None:
    watching, acting = await ensemble.store(), await ensemble.store()
    recorder = Recorder()
    watching.watch_controller(recorder)
    assert await watching.read_controller() == ControllerView(None, None)  # exists: arms it anyway
    won = await acting.register_controller_and_increment_epoch(3)
    await eventually(recorded(recorder, "changed"), timeout=5, message="creation was not reported")
    # That notification used the watch up: a deletion and a new controller go unheard.
    await acting.delete_controller(won.zk_version)
    again = await acting.register_controller_and_increment_epoch(4)
    assert (await watching.controller_epoch()) == again
    assert recorder.events == ["changed"], "a used-up watch reported again"
    assert await watching.controller_id() == 4  # re-arms it
    await acting.delete_controller(again.zk_version)
    await eventually(recorded(recorder, "changed", "deleted"), timeout=5, message="deletion not reported")


async def test_a_read_that_finds_no_registration_arms_no_watch(ensemble: Ensemble) -> None:
    controller, broker, successor = await ensemble.store(), await ensemble.store(), await ensemble.store()
    recorder = ClusterRecorder()
    controller.watch_cluster(recorder)

    async def registration_of_5() -> BrokerInfo | None:
        found = await controller.registered_broker(5)
        return None if found is None else found.info

    # getData on a missing znode fails and arms nothing: the registration and its later
    # changes are not reported here (the /brokers/ids children watch reports registrations).
    assert await controller.registered_broker(5, watch=True) is None
    await broker.register_broker(info(5))
    await ensemble.rewrite_registration(broker, info(5, 9999))
    assert await registration_of_5() == info(5, 9999)
    assert recorder.events == [], "a read that found nothing armed a watch"
    # Read while registered, it is armed: one report per arming.
    await controller.registered_broker(5, watch=True)
    await ensemble.rewrite_registration(broker, info(5, 9998))
    await eventually(
        recorded(recorder, "broker 5"), timeout=5, message="a registration's change not reported"
    )
    await ensemble.rewrite_registration(broker, info(5, 9997))
    assert await registration_of_5() == info(5, 9997)
    assert recorder.events == ["broker 5"]
    # The registration's deletion uses the watch up, unreported: a new one's changes go unheard.
    await controller.registered_broker(5, watch=True)
    renewed = Recorder()
    broker.watch_session(renewed)
    await ensemble.expire(broker)
    await eventually(lambda: _none(registration_of_5), timeout=10, message="the expired registration stayed")
    await eventually(
        recorded(renewed, "before_new_session", "after_new_session"), timeout=10, message="no new session"
    )
    await successor.register_broker(info(5, 9996))
    await ensemble.rewrite_registration(successor, info(5, 9995))
    assert await registration_of_5() == info(5, 9995)
    assert recorder.events == ["broker 5"], "a deleted registration's watch reported its successor"


async def _none(probe: Callable[[], Awaitable[object]]) -> bool:
    return await probe() is None


async def test_a_read_that_finds_no_topic_arms_no_watch_and_a_deletion_uses_one_up(
    ensemble: Ensemble,
) -> None:
    controller, admin = await ensemble.store(), await ensemble.store()
    recorder = ClusterRecorder()
    controller.watch_cluster(recorder)
    assert await controller.topic_assignments({"late"}, watch=True) == {}
    await topic_admin(admin).create_topic(assignment("late", 1), {})
    await topic_admin(admin).add_partitions(assignment("late", 2))
    assert (await controller.topic_assignments({"late"}))["late"] == assignment("late", 2)
    assert recorder.events == [], "a read that found no topic armed a watch"
    await controller.topic_assignments({"late"}, watch=True)
    fence = await admin.register_controller_and_increment_epoch(1)
    await admin.delete_topic("late", fence.zk_version)
    await topic_admin(admin).create_topic(assignment("late", 1), {})
    await topic_admin(admin).add_partitions(assignment("late", 3))
    assert (await controller.topic_assignments({"late"}))["late"] == assignment("late", 3)
    assert recorder.events == [], "a deleted topic's watch reported the next topic of that name"


async def test_a_sessions_own_write_is_reported_to_it_before_the_write_returns(ensemble: Ensemble) -> None:
    store = await ensemble.store()
    recorder = ClusterRecorder()
    store.watch_controller(recorder)
    store.watch_cluster(recorder)
    await store.read_controller()
    await store.register_controller_and_increment_epoch(1)
    assert recorder.events == ["changed"]
    await store.registered_brokers(watch=True)
    await store.register_broker(info(1))
    assert recorder.events == ["changed", "brokers"]
    await store.topics(watch=True)
    await topic_admin(store).create_topic(assignment("own", 1), {})
    assert recorder.events == ["changed", "brokers", "topics"]
    await store.topic_assignments({"own"}, watch=True)
    await topic_admin(store).add_partitions(assignment("own", 2))
    assert recorder.events == ["changed", "brokers", "topics", "topic own"]


async def test_the_reassignment_creation_watch_outlives_the_nodes_changes_and_deletion(
    ensemble: Ensemble,
) -> None:
    controller, admin = await ensemble.store(), await ensemble.store()
    recorder = ReassignmentRecorder()
    controller.watch_reassignments(recorder)
    one, two = TopicPartition("t", 0), TopicPartition("t", 1)
    await admin.create_partition_reassignments({one: (1,), two: (2,)})
    fence = await controller.register_controller_and_increment_epoch(1)
    assert await controller.partition_reassignments(watch=True) == {one: (1,), two: (2,)}
    # The controller rewrites the node as reassignments end, then deletes it: the next
    # request written there is still heard, with no read in between.
    await controller.set_partition_reassignments({two: (2,)}, fence.zk_version)
    await controller.set_partition_reassignments({}, fence.zk_version)
    await admin.create_partition_reassignments({one: (3,)})

    async def created() -> bool:
        return recorder.created == 1

    await eventually(created, timeout=5, message="a request after the node was rewritten and deleted")
    # Reported, the creation has used the watch up.
    await controller.set_partition_reassignments({}, fence.zk_version)
    await admin.create_partition_reassignments({two: (4,)})
    assert await controller.partition_reassignments() == {two: (4,)}
    assert recorder.created == 1


async def test_the_preferred_election_creation_watch_outlives_the_nodes_deletion(ensemble: Ensemble) -> None:
    controller, admin = await ensemble.store(), await ensemble.store()
    recorder = PreferredElectionRecorder()
    controller.watch_preferred_replica_election(recorder)
    await admin.create_preferred_replica_election([TopicPartition("t", 0)])
    assert await controller.preferred_replica_election() == [TopicPartition("t", 0)]
    fence = await controller.register_controller_and_increment_epoch(1)
    await controller.delete_preferred_replica_election(fence.zk_version)
    await admin.create_preferred_replica_election([TopicPartition("t", 1)])
    await eventually(recorded(recorder, "created"), timeout=5, message="a request after the deletion")
    await controller.delete_preferred_replica_election(fence.zk_version)
    await admin.create_preferred_replica_election([TopicPartition("t", 2)])
    assert await controller.preferred_replica_election() == [TopicPartition("t", 2)]
    assert recorder.events == ["created"], "a used-up watch reported again"


# --- change records (docs/STANDBY.md): with records on, each write of partition states is
# recorded with it, in the order ZooKeeper applied them, and the oldest trimmed ---


async def _controller(store: FakeClusterStore | ZkClusterStore, topic: str, partitions: int) -> int:
    epoch = await store.register_controller_and_increment_epoch(1)
    assignment = TopicAssignment(topic, {p: ReplicaAssignment((1, 2)) for p in range(partitions)})
    await topic_admin(store).create_topic(assignment, {})
    return epoch.zk_version


def by_topic(partitions: list[TopicPartition]) -> dict[str, set[int]]:
    ids: dict[str, set[int]] = {}
    for tp in partitions:
        ids.setdefault(tp.topic, set()).add(tp.partition)
    return ids


async def _view_of_records(store: FakeClusterStore | ZkClusterStore) -> StandbyView:
    view = StandbyView()
    view.load({}, applied=-1)
    names = await store.change_record_names()
    for name, record in zip(names, await store.change_records_named(names), strict=True):
        assert record is not None
        sequence = paths.change_sequence(name)
        assert sequence is not None
        view.apply(sequence, record)
    return view


async def test_with_records_off_nothing_is_recorded(ensemble: Ensemble) -> None:
    store = await ensemble.store()
    fence = await _controller(store, "quiet", 2)
    states = {TopicPartition("quiet", p): LeaderAndIsr(1, 0, (1, 2)) for p in range(2)}
    await store.create_partition_states(states, 1, fence)
    assert await store.change_record_names() == []


async def test_each_write_is_recorded_and_the_records_give_zookeepers_states(ensemble: Ensemble) -> None:
    store = await ensemble.store()
    store.change_records = True
    fence = await _controller(store, "t", 3)
    created = await store.create_partition_states(
        {TopicPartition("t", p): LeaderAndIsr(1, 0, (1, 2)) for p in range(3)}, 1, fence
    )
    assert len(await store.change_record_names()) == 1
    t0 = TopicPartition("t", 0)
    current = created[t0]
    assert isinstance(current, LeaderAndIsr)
    moved = await store.update_partition_states(
        {t0: LeaderAndIsr(2, 1, (2,), current.partition_epoch)}, 1, fence
    )
    assert isinstance(moved[t0], LeaderAndIsr)
    # A write refused (an older partition epoch) records nothing.
    refused = await store.update_partition_states(
        {t0: LeaderAndIsr(1, 2, (1,), current.partition_epoch)}, 1, fence
    )
    assert isinstance(refused[t0], PartitionStateConflict)
    assert len(await store.change_record_names()) == 2

    view = await _view_of_records(store)
    assert view.chain_breaks == 0
    assert view.leadership == await store.partition_states([TopicPartition("t", p) for p in range(3)])

    await store.delete_topic("t", fence)
    view = await _view_of_records(store)
    assert view.leadership == {} and view.chain_breaks == 0


async def test_a_controllers_assignment_writes_are_recorded_by_topic(ensemble: Ensemble) -> None:
    store = await ensemble.store()
    store.change_records = True
    fence = await _controller(store, "t", 2)
    await store.start_change_records(1, fence)
    moving = ReplicaAssignment((2, 1), (2,), (1,))
    await store.set_partition_assignments("t", {0: moving}, fence)
    topic = (await store.topic_assignments({"t"}))["t"]
    await store.set_topic_assignment(topic, fence)
    names = await store.change_record_names()
    records = await store.change_records_named(names)
    assert [r.topics if r else None for r in records] == [(), ("t",), ("t",)]
    assert store.records_written == 3


async def test_the_mark_of_acknowledged_changes_is_written_read_cleared_and_fenced(
    ensemble: Ensemble,
) -> None:
    store = await ensemble.store()
    assert await store.acknowledged_changes() is None
    fence = await store.register_controller_and_increment_epoch(1)
    mark = AcknowledgedChanges(1, 77, 12, {1: 100, 2: 200})
    await store.mark_acknowledged(mark, fence.zk_version)
    assert await store.acknowledged_changes() == mark
    with pytest.raises(ControllerMovedError):
        await store.mark_acknowledged(None, fence.zk_version - 1)
    assert await store.acknowledged_changes() == mark, "a deposed controller changes nothing"
    await store.mark_acknowledged(None, fence.zk_version)
    assert await store.acknowledged_changes() is None


async def test_the_oldest_records_are_trimmed_beyond_what_is_kept(
    ensemble: Ensemble, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = await ensemble.store()
    monkeypatch.setattr(zk_store, "RECORDS_KEPT", 4)
    monkeypatch.setattr(zk_store, "_RECORDS_TRIMMED_AT_ONCE", 2)
    store.change_records = True
    fence = await _controller(store, "busy", 1)
    tp = TopicPartition("busy", 0)
    created = await store.create_partition_states({tp: LeaderAndIsr(1, 0, (1, 2))}, 1, fence)
    state = created[tp]
    written = [await store.change_record_names()]
    for epoch in range(1, 8):
        assert isinstance(state, LeaderAndIsr)
        state = (await store.update_partition_states({tp: state._replace(leader_epoch=epoch)}, 1, fence))[tp]
        written.append(await store.change_record_names())
    assert [len(names) for names in written] == [1, 2, 3, 4, 5, 4, 5, 4]
    # What is kept is the newest, in order, and still gives ZooKeeper's state.
    assert written[-1] == sorted(written[-1], key=lambda name: paths.change_sequence(name) or -1)
    view = await _view_of_records(store)
    assert view.leadership[tp] == (await store.partition_states([tp]))[tp]


async def test_a_topics_assignment_is_decoded_again_only_once_its_znode_changed(zk_connect: str) -> None:
    """ZooKeeper's own (the fake decodes nothing): what was decoded is kept by the zxids of
    the topic znode's creation and last change, and forgotten once the topic is gone."""
    real = RealEnsemble(zk_connect)
    store = await real.store()
    original = TopicAssignment("cached", {0: ReplicaAssignment((1, 2))}, "AAAAAAAAAAAAAAAAAAAAAA")
    await topic_admin(store).create_topic(original, {})
    first = (await store.topic_assignments({"cached"}))["cached"]
    assert (await store.topic_assignments({"cached"}, watch=True))["cached"] is first, "unchanged: kept"
    fence = await store.register_controller_and_increment_epoch(1)
    moved = TopicAssignment("cached", {0: ReplicaAssignment((2, 1))}, original.topic_id)
    await store.set_topic_assignment(moved, fence.zk_version)
    assert (await store.topic_assignments({"cached"}))["cached"] == moved, "changed: decoded again"
    await store.zk.delete(paths.topic("cached"))
    assert "cached" not in await store.topics()
    await topic_admin(store).create_topic(original, {})
    assert (await store.topic_assignments({"cached"}))["cached"] == original, "made again: decoded again"
    await real.close()


async def test_a_write_after_the_records_parent_was_deleted_makes_it_again(zk_connect: str) -> None:
    """ZooKeeper's own: the fake has no parent to delete."""
    real = RealEnsemble(zk_connect)
    store = await real.store()
    store.change_records = True
    fence = await _controller(store, "again", 2)
    first = await store.create_partition_states(
        {TopicPartition("again", 0): LeaderAndIsr(1, 0, (1, 2))}, 1, fence
    )
    assert isinstance(first[TopicPartition("again", 0)], LeaderAndIsr)
    for name in await store.change_record_names():
        await store.zk.delete(f"{paths.CONTROLLER_CHANGES}/{name}")
    await store.zk.delete(paths.CONTROLLER_CHANGES)
    second = await store.create_partition_states(
        {TopicPartition("again", 1): LeaderAndIsr(2, 0, (2, 1))}, 1, fence
    )
    assert isinstance(second[TopicPartition("again", 1)], LeaderAndIsr)
    assert len(await store.change_record_names()) == 1
    await real.close()


async def test_a_view_of_a_records_parent_made_again_or_of_an_unreadable_record_is_not_taken_over(
    zk_connect: str,
) -> None:
    """ZooKeeper's own: a parent made again numbers its records from 0, and a record may be
    unreadable (another version's); either way the takeover reads every state instead."""
    real = RealEnsemble(zk_connect)
    controller, broker = await real.store(), await real.store()
    controller.change_records = True
    fence = await _controller(controller, "p", 2)
    await controller.start_change_records(1, fence)
    partitions = [TopicPartition("p", p) for p in range(2)]
    await controller.create_partition_states({tp: LeaderAndIsr(1, 0, (1, 2)) for tp in partitions}, 1, fence)
    follower = StandbyFollower(broker, retry_s=0.1)
    follower.start()
    await eventually(lambda: _loaded(follower), timeout=10, message="the first load")
    await follower.stop()
    assert await follower.takeover(2, by_topic(partitions)) is not None

    for name in await controller.change_record_names():
        await controller.zk.delete(f"{paths.CONTROLLER_CHANGES}/{name}")
    await controller.zk.delete(paths.CONTROLLER_CHANGES)
    state = (await controller.partition_states([partitions[0]]))[partitions[0]].leader_and_isr
    await controller.update_partition_states({partitions[0]: state._replace(leader_epoch=4)}, 1, fence)
    assert await follower.takeover(2, by_topic(partitions)) is None, "a parent made again"

    again = StandbyFollower(broker, retry_s=0.1)
    again.start()
    await eventually(lambda: _loaded(again), timeout=10, message="the load on the new parent")
    await again.stop()
    await controller.zk.create(f"{paths.CONTROLLER_CHANGES}/{paths.CHANGE_PREFIX}9999999999", b"\x93\x02")
    assert await again.takeover(2, by_topic(partitions)) is None, "an unreadable record"
    await real.close()


async def test_a_standby_follower_keeps_its_view_current_and_loads_again_once_it_fell_behind(
    ensemble: Ensemble, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(zk_store, "RECORDS_KEPT", 3)
    monkeypatch.setattr(zk_store, "_RECORDS_TRIMMED_AT_ONCE", 2)
    controller, broker = await ensemble.store(), await ensemble.store()
    controller.change_records = True
    fence = await _controller(controller, "f", 4)
    partitions = [TopicPartition("f", p) for p in range(4)]
    states = await controller.create_partition_states(
        {tp: LeaderAndIsr(1, 0, (1, 2)) for tp in partitions[:2]}, 1, fence
    )
    follower = StandbyFollower(broker, retry_s=0.1)
    follower.start()

    async def current() -> bool:
        return follower.view.leadership == await controller.partition_states(partitions)

    await eventually(current, timeout=10, message="the first load")
    assert follower.loads == 1
    more = await controller.create_partition_states(
        {tp: LeaderAndIsr(2, 0, (2, 1)) for tp in partitions[2:]}, 1, fence
    )
    moved = {**states, **more}
    state = moved[partitions[0]]
    assert isinstance(state, LeaderAndIsr)
    await controller.update_partition_states(
        {partitions[0]: state._replace(leader=2, leader_epoch=1)}, 1, fence
    )
    await eventually(current, timeout=10, message="records applied as they come")
    assert follower.loads == 1 and follower.view.chain_breaks == 0

    await follower.stop()  # it falls behind while records are trimmed
    for epoch in range(2, 9):
        found = (await controller.partition_states([partitions[1]]))[partitions[1]].leader_and_isr
        await controller.update_partition_states(
            {partitions[1]: found._replace(leader_epoch=epoch)}, 1, fence
        )
    behind = StandbyFollower(broker, retry_s=0.1)
    behind.view = follower.view
    behind.start()
    await eventually(
        lambda: _loaded_again(behind, current), timeout=10, message="a load once records went unread"
    )
    await controller.delete_topic("f", fence)
    await eventually(lambda: _empty(behind), timeout=10, message="the deletion applied")
    await behind.stop()


async def _loaded_again(follower: StandbyFollower, current: Callable[[], Awaitable[bool]]) -> bool:
    return follower.loads == 1 and await current()


async def _empty(follower: StandbyFollower) -> bool:
    return follower.view.leadership == {}


async def test_a_takeover_from_the_standby_view_gives_zookeepers_states_only_if_every_controller_recorded(
    ensemble: Ensemble,
) -> None:
    first, standby = await ensemble.store(), await ensemble.store()
    first.change_records = True
    fence = await _controller(first, "s", 3)
    await first.start_change_records(1, fence)
    partitions = [TopicPartition("s", p) for p in range(3)]
    await first.create_partition_states({tp: LeaderAndIsr(1, 0, (1, 2)) for tp in partitions}, 1, fence)
    follower = StandbyFollower(standby, retry_s=0.1)
    assert await follower.takeover(2, by_topic(partitions)) is None, "a view never loaded"
    follower.start()
    await eventually(lambda: _loaded(follower), timeout=10, message="the first load")

    # The first controller moves a leader, then goes; the standby's broker wins.
    state = (await first.partition_states([partitions[0]]))[partitions[0]].leader_and_isr
    await first.update_partition_states({partitions[0]: state._replace(leader=2, leader_epoch=1)}, 1, fence)
    await first.delete_controller(fence)
    won = await standby.register_controller_and_increment_epoch(2)
    await standby.start_change_records(won.epoch, won.zk_version)
    taken = await follower.takeover(won.epoch, by_topic(partitions))
    assert taken == await standby.partition_states(partitions)
    assert taken is not None and taken[partitions[0]].leader_and_isr.leader == 2

    # A controller that does not record (records off) in between: the view is not trusted.
    await standby.delete_controller(won.zk_version)
    quiet = await ensemble.store()
    silent = await quiet.register_controller_and_increment_epoch(3)
    state = (await quiet.partition_states([partitions[1]]))[partitions[1]].leader_and_isr
    await quiet.update_partition_states({partitions[1]: state._replace(leader_epoch=5)}, 3, silent.zk_version)
    await quiet.delete_controller(silent.zk_version)
    again = await standby.register_controller_and_increment_epoch(2)
    assert await follower.takeover(again.epoch, by_topic(partitions)) is None
    await follower.stop()


async def _loaded(follower: StandbyFollower) -> bool:
    return follower.view.loaded


async def test_a_standby_follower_catches_up_after_its_session_expired(ensemble: Ensemble) -> None:
    """Records written across an expiry of the follower's session still reach its view."""
    controller, broker = await ensemble.store(), await ensemble.store()
    controller.change_records = True
    fence = await _controller(controller, "e", 2)
    partitions = [TopicPartition("e", p) for p in range(2)]
    await controller.create_partition_states({partitions[0]: LeaderAndIsr(1, 0, (1, 2))}, 1, fence)
    follower = StandbyFollower(broker, retry_s=0.1)
    follower.start()

    async def current() -> bool:
        return follower.view.leadership == await controller.partition_states(partitions)

    await eventually(current, timeout=10, message="the first load")
    await ensemble.expire(broker)
    await controller.create_partition_states({partitions[1]: LeaderAndIsr(2, 0, (2, 1))}, 1, fence)
    await eventually(current, timeout=15, message="the record written across the expiry")
    await follower.stop()
