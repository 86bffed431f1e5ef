"""The broker side of the controller's orders (spec §9): every check, and that a refused
order changes nothing."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from actors.replica.handle import ReplicaManagerHandle
from actors.replica.partition import Role, TopicPartition
from actors.replica.replica_manager import ReplicaManager
from actors.replica.replication import NoReplication
from node.broker.log.config import LogConfig
from node.broker.log.manager import LogManager
from wire.api import (
    Endpoint,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LiveBroker,
    LiveLeader,
    MetadataRequest,
    StopReplicaPartition,
    StopReplicaRequest,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
)
from wire.errors import ErrorCode

ME = 1
MY_EPOCH = 500  # this broker's broker epoch (czxid)


def state(
    partition: int = 0, *, leader: int = ME, leader_epoch: int = 0, **kw: object
) -> LeaderAndIsrPartitionState:
    fields: dict[str, object] = {
        "topic": "t",
        "partition": partition,
        "controller_epoch": 1,
        "leader": leader,
        "leader_epoch": leader_epoch,
        "isr": [1, 2],
        "partition_epoch": 0,
        "replicas": [1, 2],
    }
    fields.update(kw)
    return LeaderAndIsrPartitionState(**fields)  # type: ignore[arg-type]


def leader_and_isr(
    *states: LeaderAndIsrPartitionState,
    epoch: int = 1,
    broker_epoch: int = MY_EPOCH,
    live_leaders: tuple[int, ...] = (),
) -> LeaderAndIsrRequest:
    return LeaderAndIsrRequest(
        controller_id=9,
        controller_epoch=epoch,
        broker_epoch=broker_epoch,
        partition_states=list(states),
        live_leaders=[LiveLeader(broker_id=b, host="127.0.0.1", port=9000 + b) for b in live_leaders],
    )


def codes(response: object) -> list[int]:
    return [e.error_code for e in response.partition_errors]  # type: ignore[attr-defined]


@pytest.fixture
def manager(tmp_path: Path) -> ReplicaManager:
    return ReplicaManager(ME, LogManager([tmp_path], LogConfig()))


def test_becomes_leader_or_follower_by_the_leader_field(manager: ReplicaManager) -> None:
    response = manager.become_leader_or_follower(leader_and_isr(state(0), state(1, leader=2)), MY_EPOCH)
    assert (response.error_code, codes(response)) == (0, [0, 0])
    lead, follow = (
        manager.state.partitions[TopicPartition("t", 0)],
        manager.state.partitions[TopicPartition("t", 1)],
    )
    assert (lead.role, lead.leader, lead.leader_epoch, lead.isr) == (Role.LEADER, 1, 0, (1, 2))
    assert (follow.role, follow.leader) == (Role.FOLLOWER, 2)
    assert manager.state.controller_epoch == 1


def test_a_stale_controller_epoch_fails_the_whole_request_and_changes_nothing(
    manager: ReplicaManager,
) -> None:
    manager.become_leader_or_follower(leader_and_isr(state(0), epoch=5), MY_EPOCH)
    before = manager.state.snapshot()
    response = manager.become_leader_or_follower(
        leader_and_isr(state(0, leader_epoch=7), state(3), epoch=4), MY_EPOCH
    )
    assert response.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
    assert codes(response) == [ErrorCode.STALE_CONTROLLER_EPOCH] * 2
    assert manager.state.snapshot() == before


def test_an_equal_controller_epoch_is_accepted(manager: ReplicaManager) -> None:
    manager.become_leader_or_follower(leader_and_isr(state(0), epoch=5), MY_EPOCH)
    response = manager.become_leader_or_follower(leader_and_isr(state(0, leader_epoch=1), epoch=5), MY_EPOCH)
    assert codes(response) == [0]


@pytest.mark.parametrize(
    ("request_epoch", "accepted"), [(MY_EPOCH - 1, False), (-1, True), (MY_EPOCH, True), (MY_EPOCH + 3, True)]
)
def test_broker_epoch_check(manager: ReplicaManager, request_epoch: int, accepted: bool) -> None:
    response = manager.become_leader_or_follower(
        leader_and_isr(state(0), broker_epoch=request_epoch), MY_EPOCH
    )
    if accepted:
        assert response.error_code == 0 and TopicPartition("t", 0) in manager.state.partitions
    else:
        assert response.error_code == ErrorCode.STALE_BROKER_EPOCH
        assert manager.state.partitions == {} and manager.state.controller_epoch == 0


def test_a_leader_epoch_not_newer_is_fenced_per_partition(manager: ReplicaManager) -> None:
    manager.become_leader_or_follower(
        leader_and_isr(state(0, leader_epoch=3), state(1, leader_epoch=3)), MY_EPOCH
    )
    response = manager.become_leader_or_follower(
        leader_and_isr(state(0, leader_epoch=3, leader=2), state(1, leader_epoch=2, leader=2), state(2)),
        MY_EPOCH,
    )
    assert response.error_code == 0
    assert codes(response) == [ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.FENCED_LEADER_EPOCH, 0]
    assert manager.state.partitions[TopicPartition("t", 0)].leader == ME, "a fenced order changes nothing"
    assert manager.state.partitions[TopicPartition("t", 1)].leader_epoch == 3


class FetcherRecorder(NoReplication):
    """The replica manager's effects in a test: the leaders it starts fetchers for."""

    def __init__(self) -> None:
        self.sources: list[int] = []

    def start_fetcher(self, source: int) -> None:
        self.sources.append(source)


def test_a_follower_whose_leader_was_not_live_follows_it_when_its_leader_epoch_comes_again(
    tmp_path: Path,
) -> None:
    """Seed 33572: a controller that had loaded its context before the leader registered
    again sent broker 3 "follow 5 at leader epoch 8" without 5 among the live leaders, so no
    fetcher could start; the next controller's LeaderAndIsr at that same epoch, naming 5 live,
    was fenced as not newer, and broker 3 never fetched again. Kafka's makeFollowers leaves
    such a partition untouched, so the same leader epoch is taken when it comes again."""
    effects = FetcherRecorder()
    manager = ReplicaManager(ME, LogManager([tmp_path], LogConfig()), effects=effects)
    tp = TopicPartition("t", 0)
    first = manager.become_leader_or_follower(
        leader_and_isr(state(0, leader=2, leader_epoch=8), live_leaders=()), MY_EPOCH
    )
    assert codes(first) == [0]
    assert effects.sources == [] and manager.state.fetch_targets.get(2) is None
    # The same order with the leader still not live, or naming another leader at that epoch
    # (which ZooKeeper cannot hold), is not taken again.
    for leader, live in ((2, ()), (4, (4,))):
        refused = manager.become_leader_or_follower(
            leader_and_isr(state(0, leader=leader, leader_epoch=8), epoch=2, live_leaders=live), MY_EPOCH
        )
        assert codes(refused) == [ErrorCode.FENCED_LEADER_EPOCH], (leader, live)
    assert effects.sources == []

    again = manager.become_leader_or_follower(
        leader_and_isr(state(0, leader=2, leader_epoch=8), epoch=2, live_leaders=(2,)), MY_EPOCH
    )
    assert codes(again) == [0]
    assert effects.sources == [2]
    source = manager.state.fetch_targets.get(2)
    assert source is not None and tp in source.followed
    partition = manager.state.partitions[tp]
    assert (partition.role, partition.leader, partition.leader_epoch) == (Role.FOLLOWER, 2, 8)

    # Once it follows, the same leader epoch is fenced again, as for any order not newer.
    once_more = manager.become_leader_or_follower(
        leader_and_isr(state(0, leader=2, leader_epoch=8), epoch=2, live_leaders=(2,)), MY_EPOCH
    )
    assert codes(once_more) == [ErrorCode.FENCED_LEADER_EPOCH]
    assert effects.sources == [2]


def test_a_partition_not_assigned_to_this_broker_is_unknown(manager: ReplicaManager) -> None:
    response = manager.become_leader_or_follower(
        leader_and_isr(state(0, leader=2, replicas=[2, 3], isr=[2, 3])), MY_EPOCH
    )
    assert codes(response) == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    assert manager.state.partitions == {}


def test_an_older_partition_epoch_is_skipped_quietly(manager: ReplicaManager) -> None:
    manager.become_leader_or_follower(leader_and_isr(state(0, partition_epoch=4)), MY_EPOCH)
    response = manager.become_leader_or_follower(
        leader_and_isr(state(0, leader_epoch=1, partition_epoch=3, leader=2)), MY_EPOCH
    )
    assert codes(response) == [0]
    assert manager.state.partitions[TopicPartition("t", 0)].leader == ME


def stop(*items: StopReplicaPartition, epoch: int = 1) -> StopReplicaRequest:
    return StopReplicaRequest(
        controller_id=9, controller_epoch=epoch, broker_epoch=MY_EPOCH, partitions=list(items)
    )


def test_stop_replica_epochs_and_deletion(manager: ReplicaManager) -> None:
    manager.become_leader_or_follower(
        leader_and_isr(state(0, leader_epoch=5), state(1, leader_epoch=5)), MY_EPOCH
    )
    response = manager.stop_replicas(
        stop(
            StopReplicaPartition(topic="t", partition=0, leader_epoch=4, delete_partition=True),
            StopReplicaPartition(topic="t", partition=1, leader_epoch=-2, delete_partition=True),
            StopReplicaPartition(topic="t", partition=9, leader_epoch=1, delete_partition=True),
        ),
        MY_EPOCH,
    )
    assert codes(response) == [ErrorCode.FENCED_LEADER_EPOCH, 0, 0]
    assert set(manager.state.partitions) == {TopicPartition("t", 0)}


def test_stop_replica_without_delete_keeps_the_partition(manager: ReplicaManager) -> None:
    manager.become_leader_or_follower(leader_and_isr(state(0)), MY_EPOCH)
    response = manager.stop_replicas(
        stop(StopReplicaPartition(topic="t", partition=0, leader_epoch=0)), MY_EPOCH
    )
    assert codes(response) == [0] and TopicPartition("t", 0) in manager.state.partitions


def test_stale_stop_replica_is_refused_without_a_partition_list(manager: ReplicaManager) -> None:
    manager.become_leader_or_follower(leader_and_isr(state(0), epoch=3), MY_EPOCH)
    response = manager.stop_replicas(
        stop(StopReplicaPartition(topic="t", partition=0, delete_partition=True), epoch=2), MY_EPOCH
    )
    assert (response.error_code, response.partition_errors) == (ErrorCode.STALE_CONTROLLER_EPOCH, [])
    assert TopicPartition("t", 0) in manager.state.partitions


def update(
    *states: UpdateMetadataPartitionState, epoch: int = 1, brokers: tuple[int, ...] = (1, 2)
) -> UpdateMetadataRequest:
    return UpdateMetadataRequest(
        controller_id=9,
        controller_epoch=epoch,
        broker_epoch=MY_EPOCH,
        partition_states=list(states),
        live_brokers=[
            LiveBroker(
                broker_id=b,
                endpoints=[
                    Endpoint(listener="PLAINTEXT", security_protocol="PLAINTEXT", host="h", port=9000 + b)
                ],
            )
            for b in brokers
        ],
    )


def um_state(partition: int, leader: int, **kw: object) -> UpdateMetadataPartitionState:
    fields: dict[str, object] = {
        "topic": "t",
        "partition": partition,
        "controller_epoch": 1,
        "leader": leader,
        "leader_epoch": 2,
        "isr": [1, 2],
        "partition_epoch": 3,
        "replicas": [1, 2, 3],
    }
    fields.update(kw)
    return UpdateMetadataPartitionState(**fields)  # type: ignore[arg-type]


def test_update_metadata_merges_and_metadata_answers_from_it(manager: ReplicaManager) -> None:
    assert (
        manager.update_metadata(
            update(um_state(0, 1), um_state(1, 3, offline_replicas=[3])), MY_EPOCH
        ).error_code
        == 0
    )
    manager.update_metadata(update(um_state(0, 2)), MY_EPOCH)  # partial: partition 1 stays
    answer = manager.state.metadata.describe(None)
    assert answer.controller_id == 9
    assert [(b.broker_id, b.port) for b in answer.brokers] == [(1, 9001), (2, 9002)]
    (topic,) = answer.topics
    assert [(p.partition, p.leader, p.error_code, p.offline_replicas) for p in topic.partitions] == [
        (0, 2, 0, []),
        (1, 3, ErrorCode.LEADER_NOT_AVAILABLE, [3]),
    ]
    assert (
        manager.state.metadata.describe(["nope"]).topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    )


def test_leader_minus_2_removes_the_partition(manager: ReplicaManager) -> None:
    manager.update_metadata(update(um_state(0, 1), um_state(1, 1)), MY_EPOCH)
    manager.update_metadata(update(um_state(0, -2)), MY_EPOCH)
    assert [p.partition for p in manager.state.metadata.describe(["t"]).topics[0].partitions] == [1]


def test_stale_update_metadata_changes_nothing(manager: ReplicaManager) -> None:
    manager.update_metadata(update(um_state(0, 1), epoch=4), MY_EPOCH)
    before = manager.state.snapshot()
    response = manager.update_metadata(update(um_state(0, 2), epoch=3, brokers=(7,)), MY_EPOCH)
    assert response.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
    assert manager.state.snapshot() == before


async def test_the_handle_applies_requests_on_the_actor(tmp_path: Path) -> None:
    handle = ReplicaManagerHandle(ME, LogManager([tmp_path], LogConfig()))
    handle.start()
    response = await handle.leader_and_isr(leader_and_isr(state(0)), MY_EPOCH)
    assert codes(response) == [0]
    await handle.update_metadata(update(um_state(0, 1)), MY_EPOCH)
    assert (await handle.metadata(MetadataRequest(topics=["t"]))).topics[0].partitions[0].leader == 1
    snapshot = await handle.snapshot()
    assert snapshot.partitions[TopicPartition("t", 0)].role is Role.LEADER
    await handle.stop()


async def test_a_metadata_waiter_wakes_when_update_metadata_is_applied(tmp_path: Path) -> None:
    handle = ReplicaManagerHandle(ME, LogManager([tmp_path], LogConfig()))
    handle.start()
    asked = 0

    async def led_by_2() -> bool:
        nonlocal asked
        asked += 1
        topics = (await handle.metadata(MetadataRequest(topics=["t"]))).topics
        return bool(topics[0].partitions) and topics[0].partitions[0].leader == 2

    waiter = asyncio.create_task(handle.wait_for_metadata(led_by_2, 30.0))
    await handle.update_metadata(update(um_state(0, 1)), MY_EPOCH)
    await handle.update_metadata(update(um_state(0, 2)), MY_EPOCH)
    assert await asyncio.wait_for(waiter, 5.0), "woken by the change, long before its timeout"
    assert asked <= 3, "asked once at first and once per change, not polled"
    assert not await handle.wait_for_metadata(lambda: asyncio.sleep(0, result=False), 0.0)
    await handle.stop()


def test_a_topic_whose_partitions_are_all_removed_is_gone(manager: ReplicaManager) -> None:
    manager.update_metadata(update(um_state(0, 1)), MY_EPOCH)
    manager.update_metadata(update(um_state(0, -2)), MY_EPOCH)
    assert manager.state.metadata.describe(None).topics == []
    assert manager.state.metadata.describe(["t"]).topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_stop_replica_with_delete_removes_the_log_from_disk(manager: ReplicaManager, tmp_path: Path) -> None:
    manager.become_leader_or_follower(leader_and_isr(state(0), state(1)), MY_EPOCH)
    for partition in (0, 1):
        manager.state.logs.get_or_create(TopicPartition("t", partition), {})
    assert (tmp_path / "t-0").is_dir() and (tmp_path / "t-1").is_dir()
    response = manager.stop_replicas(
        stop(StopReplicaPartition(topic="t", partition=0, leader_epoch=-2, delete_partition=True)), MY_EPOCH
    )
    assert codes(response) == [0]
    assert not (tmp_path / "t-0").exists() and (tmp_path / "t-1").is_dir()
    assert manager.state.logs.get(TopicPartition("t", 0)) is None


def test_a_log_that_cannot_be_deleted_fails_only_its_replica(
    manager: ReplicaManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    manager.become_leader_or_follower(leader_and_isr(state(0), state(1)), MY_EPOCH)
    real_delete = manager.state.logs.delete

    def failing(tp: TopicPartition) -> None:
        if tp.partition == 0:
            raise PermissionError("read-only file system")
        real_delete(tp)

    monkeypatch.setattr(manager.state.logs, "delete", failing)
    response = manager.stop_replicas(
        stop(
            StopReplicaPartition(topic="t", partition=0, leader_epoch=-2, delete_partition=True),
            StopReplicaPartition(topic="t", partition=1, leader_epoch=-2, delete_partition=True),
        ),
        MY_EPOCH,
    )
    assert codes(response) == [ErrorCode.KAFKA_STORAGE_ERROR, 0]
