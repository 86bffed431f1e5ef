"""The controller's change records (docs/STANDBY.md) against a real ZooKeeper: with records on,
each fenced write of partition states creates one record in the same multi-op, a write that
fails leaves none, records applied to a standby view give ZooKeeper's states, and the oldest
are trimmed beyond what is kept. With records off (the default), nothing is written."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from actors.base.clock import SystemClock
from actors.base.ports import (
    LeaderAndIsr,
    PartitionStateConflict,
    ReplicaAssignment,
    TopicAssignment,
    TopicPartition,
)
from actors.controller.standby import StandbyView
from node.zk import paths
from node.zk import store as store_module
from node.zk.client import ZooKeeperClient
from node.zk.store import ZkClusterStore
from tests.support import topic_admin


@pytest.fixture
async def store(zk_connect: str) -> AsyncIterator[ZkClusterStore]:
    client = ZooKeeperClient(zk_connect, session_timeout_s=6, connection_timeout_s=10)
    await client.start()
    zk_store = ZkClusterStore(client, SystemClock())
    await zk_store.ensure_persistent_paths()
    yield zk_store
    await client.close()


async def _controller(store: ZkClusterStore, topic: str, partitions: int) -> int:
    epoch = await store.register_controller_and_increment_epoch(1)
    assignment = TopicAssignment(topic, {p: ReplicaAssignment((1, 2)) for p in range(partitions)})
    await topic_admin(store).create_topic(assignment, {})
    return epoch.zk_version


async def _view_of_records(store: ZkClusterStore) -> StandbyView:
    view = StandbyView()
    view.load({}, applied=-1)
    for name in await store.change_record_names():
        record = await store.change_record(name)
        assert record is not None
        sequence = paths.change_sequence(name)
        assert sequence is not None
        view.apply(sequence, record)
    return view


async def test_with_records_off_nothing_is_recorded(store: ZkClusterStore) -> None:
    fence = await _controller(store, "quiet", 2)
    states = {TopicPartition("quiet", p): LeaderAndIsr(1, 0, (1, 2)) for p in range(2)}
    await store.create_partition_states(states, 1, fence)
    assert await store.change_record_names() == []


async def test_each_write_is_recorded_and_the_records_give_zookeepers_states(store: ZkClusterStore) -> None:
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


async def test_the_oldest_records_are_trimmed_beyond_what_is_kept(
    store: ZkClusterStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_module, "RECORDS_KEPT", 4)
    monkeypatch.setattr(store_module, "_RECORDS_TRIMMED_AT_ONCE", 2)
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


async def test_a_write_after_the_records_parent_was_deleted_makes_it_again(store: ZkClusterStore) -> None:
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
