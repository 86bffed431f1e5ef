"""The mark of what every live broker acknowledged, and a new controller that resends only
what changed after it (actors/controller/acknowledged.py, docs/STANDBY.md)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from actors.base.ports import (
    AcknowledgedChanges,
    BrokerInfo,
    RegisteredBroker,
    ReplicaAssignment,
    TopicPartition,
)
from actors.controller.acknowledged import MARK_DELAY_S, AcknowledgedMarker, resend_after
from actors.controller.context import ControllerContext
from actors.controller.standby import Changed
from tests.controllers import ControllerCluster, leader_and_isr_to, settled, started
from tests.fakes import FakeBrokerChannel, FakeClusterStore, FakeZooKeeper
from tests.support import ManualClock, eventually
from wire.api import LeaderAndIsrRequest, UpdateMetadataRequest

STANDBY = {"standby_enable": True}


def context_of(assignments: dict[TopicPartition, tuple[int, ...]], live: dict[int, int]) -> ControllerContext:
    context = ControllerContext()
    for tp, replicas in assignments.items():
        context.set_assignment(tp, ReplicaAssignment(replicas))
    context.live_brokers = {b: RegisteredBroker(BrokerInfo(b, ()), e) for b, e in live.items()}
    return context


def test_the_resend_is_what_changed_and_what_a_broker_change_touched() -> None:
    t = [TopicPartition("t", p) for p in range(4)]
    u = [TopicPartition("u", p) for p in range(2)]
    context = context_of(
        {t[0]: (1, 2), t[1]: (2, 1), t[2]: (1, 3), t[3]: (1, 2), u[0]: (1, 2), u[1]: (2, 1)},
        {1: 10, 2: 20, 3: 31},
    )
    mark = AcknowledgedChanges(4, 7, 100, {1: 10, 2: 20, 3: 30})

    async def check() -> None:
        resend = await resend_after(context, mark, Changed({t[1], TopicPartition("gone", 0)}, {"u"}))
        # Broker 3 bounced since the mark: it hears everything, the others its partitions.
        assert resend.brokers == {3}
        assert resend.partitions == {t[1], t[2], *u}, "a partition no longer known is not resent"
        quiet = await resend_after(context_of({t[0]: (1, 2)}, {1: 10, 2: 20}), mark, Changed(set(), set()))
        assert quiet.partitions == set() and quiet.brokers == set(), "broker 3 went: it hosted nothing"

    asyncio.run(check())


async def test_the_mark_waits_for_every_answer_and_is_cleared_by_a_failed_log_directory() -> None:
    zk = FakeZooKeeper()
    store = FakeClusterStore(zk)
    store.change_records = True
    fence = await store.register_controller_and_increment_epoch(1)
    await store.start_change_records(fence.epoch, fence.zk_version)
    context = context_of({TopicPartition("t", 0): (1, 2)}, {1: 10, 2: 20})
    context.epoch, context.epoch_zk_version = fence.epoch, fence.zk_version
    channel, clock, due = FakeBrokerChannel(), ManualClock(), []
    channel.brokers = {1, 2}
    queued = [0]
    marker = AcknowledgedMarker(
        context, store, channel, clock, due=lambda: due.append(1), queued_events=lambda: queued[0]
    )

    channel.down.add(2)
    channel.send(2, UpdateMetadataRequest(controller_id=1, controller_epoch=1, broker_epoch=20))
    marker.poke()
    clock.advance(MARK_DELAY_S)
    assert due == [1]
    await marker.mark()
    assert zk.acknowledged is None, "broker 2 has not answered"
    assert clock.pending() == [MARK_DELAY_S], "it looks again later"

    channel.bring_up(2)
    queued[0] = 1  # its answer, handed over as an event still queued
    await marker.mark()
    assert zk.acknowledged is None, "an answer not yet handled"
    queued[0] = 0
    await marker.mark()
    newest = max(zk.change_records)
    assert zk.acknowledged == AcknowledgedChanges(1, 1, newest, {1: 10, 2: 20})
    clock.advance(MARK_DELAY_S)
    marker.poke()
    assert clock.pending() == [], "nothing moved since the mark"

    context.replicas_on_offline_dirs[2] = {TopicPartition("t", 0)}
    channel.down.add(2)
    channel.send(2, UpdateMetadataRequest(controller_id=1, controller_epoch=1, broker_epoch=20))
    await marker.mark()
    assert zk.acknowledged is None, "a failed directory is learnt only from a full LeaderAndIsr"
    assert clock.pending() == [], "cleared at once, whatever is unanswered"
    context.replicas_on_offline_dirs.clear()
    channel.bring_up(2)
    await marker.mark()
    assert zk.acknowledged is not None
    await marker.clear()
    assert zk.acknowledged is None


def created(cluster: ControllerCluster, states: int) -> Callable[[], Awaitable[bool]]:
    return settled(cluster, lambda: len(cluster.zk.partition_states) == states)


async def brokers_caught_up(cluster: ControllerCluster) -> bool:
    """Every standby view loaded and current, and a mark written after the newest record."""
    newest = max(cluster.zk.change_records)
    views = [c.standby.view for c in cluster.controllers.values() if c.standby is not None]
    mark = cluster.zk.acknowledged
    return (
        await cluster.idle()
        and all(v.loaded and v.applied == newest for v in views)
        and mark is not None
        and mark.sequence == newest
    )


async def mark_written(cluster: ControllerCluster) -> None:
    async def probe() -> bool:
        for clock in cluster.clocks.values():
            clock.advance(MARK_DELAY_S)
        return await brokers_caught_up(cluster)

    await eventually(probe, timeout=3, message="no mark of what every broker acknowledged")


async def topic_t_acknowledged(cluster: ControllerCluster) -> None:
    """Brokers 1-3 with the standby, topic t's 6 partitions on all three, and a mark of it."""
    await started(cluster, 1, 2, 3, **STANDBY)
    await cluster.create_topic("t", {p: (1, 2, 3) for p in range(6)})
    await eventually(created(cluster, 6), timeout=2, message="t not created")
    await mark_written(cluster)


async def controller_at(cluster: ControllerCluster, epoch: int) -> None:
    await eventually(
        settled(cluster, lambda: bool(cluster.active()) and cluster.controller.context.epoch == epoch),
        timeout=2,
        message=f"no controller at epoch {epoch}",
    )


def told_to(channel: FakeBrokerChannel, broker: int) -> set[TopicPartition]:
    """The partitions of every LeaderAndIsr sent to `broker`."""
    return {
        TopicPartition(s.topic, s.partition)
        for request in leader_and_isr_to(channel, broker)
        for s in request.partition_states
    }


async def test_a_new_controller_resends_only_what_changed_after_the_mark() -> None:
    cluster = ControllerCluster()
    try:
        await topic_t_acknowledged(cluster)

        # A topic created while broker 3 does not answer: its states are not acknowledged.
        first = cluster.controller.broker_id
        cluster.channel.down.add(3 if first != 3 else 2)
        await cluster.create_topic("u", {p: (1, 2, 3) for p in range(2)})
        await eventually(created(cluster, 8), timeout=2, message="u not created")
        mark = cluster.zk.acknowledged
        for clock in cluster.clocks.values():
            clock.advance(MARK_DELAY_S)
        await eventually(settled(cluster, lambda: True), timeout=2, message="not idle")
        assert cluster.zk.acknowledged == mark, "the mark stays where every broker answered"
        await eventually(
            settled(
                cluster,
                lambda: all(
                    c.standby is not None and c.standby.view.applied == max(cluster.zk.change_records)
                    for c in cluster.controllers.values()
                ),
            ),
            timeout=2,
            message="the standby views did not catch up",
        )

        for channel in cluster.channels.values():
            channel.bring_up(3 if first != 3 else 2)  # answered now, with no clock to mark it
            channel.take()
        await cluster.stores[first].force_delete_controller()
        await controller_at(cluster, 2)
        second = cluster.controller
        assert second.workflows._taken_over, "the states came from the standby view"
        for broker in (1, 2, 3):
            told = told_to(cluster.channels[second.broker_id], broker)
            assert told == {TopicPartition("u", 0), TopicPartition("u", 1)}, (broker, told)

        # Nothing changes before the next failover: nothing is resent at all.
        await mark_written(cluster)
        for channel in cluster.channels.values():
            channel.take()
        await cluster.stores[second.broker_id].force_delete_controller()
        await controller_at(cluster, 3)
        third = cluster.controllers[cluster.controller.broker_id]
        channel = cluster.channels[third.broker_id]
        assert not [r for _, r in channel.sent if isinstance(r, LeaderAndIsrRequest)]
        metadata = [r for _, r in channel.sent if isinstance(r, UpdateMetadataRequest)]
        assert metadata and all(not r.partition_states for r in metadata), "the new epoch, no partitions"
    finally:
        await cluster.stop()


async def test_a_failed_log_directory_clears_the_mark_and_the_next_controller_resends_everything() -> None:
    """Which replicas a failed directory holds, a new controller learns only from the answers
    to a full LeaderAndIsr: the notification clears the mark before it is deleted."""
    cluster = ControllerCluster()
    try:
        await topic_t_acknowledged(cluster)
        first = cluster.controller.broker_id
        await cluster.stores[first].propagate_log_dir_event(2)
        await eventually(
            settled(cluster, lambda: cluster.zk.acknowledged is None and not cluster.zk.log_dir_events),
            timeout=2,
            message="the notification did not clear the mark",
        )
        for channel in cluster.channels.values():
            channel.take()
        await cluster.stores[first].force_delete_controller()
        await controller_at(cluster, 2)
        second = cluster.controller
        told = told_to(cluster.channels[second.broker_id], 2)
        assert told == {TopicPartition("t", p) for p in range(6)}, "broker 2 heard every partition again"
    finally:
        await cluster.stop()
