"""The leader's AlterPartition sender: an unexpected error (not a WireError: a bug, a ZooKeeper
client error on the way to the controller's address) is logged and the batch retried, rather
than ending the task and with it every later ISR change of the broker; a change answered
NOT_CONTROLLER by a replaced controller is sent again, to the one that replaced it."""

from __future__ import annotations

import asyncio

from actors.base.ports import TopicPartition
from actors.replica.alter_partition_manager import PARTITIONS_PER_REQUEST, AlterPartitionManager
from actors.replica.partition import PendingIsr
from tests.support import eventually
from wire.api import (
    AlterPartitionRequest,
    AlterPartitionResponse,
    AlterPartitionResult,
    AlterPartitionTopicResult,
)
from wire.errors import ErrorCode

TP = TopicPartition("t", 0)
PROPOSAL = PendingIsr(new_isr=(1, 2), leader_epoch=3, partition_epoch=4)


class _Controller:
    """Answers each AlterPartition with the ISR asked for; fails the first `failures` with
    an error that is no WireError."""

    def __init__(self, failures: int, replaced: int = 0) -> None:
        self.failures = failures
        # The first `replaced` requests reach a controller that has been replaced: its state of
        # each partition is older than the leader's, so it answers each NOT_CONTROLLER.
        self.replaced = replaced
        self.requests: list[AlterPartitionRequest] = []

    async def alter_partition(self, request: AlterPartitionRequest) -> AlterPartitionResponse:
        self.requests.append(request)
        if len(self.requests) <= self.failures:
            raise RuntimeError("the controller's registration could not be read")
        stale = len(self.requests) <= self.failures + self.replaced
        return AlterPartitionResponse(
            topics=[
                AlterPartitionTopicResult(
                    topic_name=t.topic_name,
                    partitions=[
                        AlterPartitionResult(
                            partition_index=p.partition_index, error_code=ErrorCode.NOT_CONTROLLER
                        )
                        if stale
                        else AlterPartitionResult(
                            partition_index=p.partition_index,
                            leader_id=1,
                            leader_epoch=p.leader_epoch,
                            isr=p.new_isr,
                            partition_epoch=p.partition_epoch + 1,
                        )
                        for p in t.partitions
                    ],
                )
                for t in request.topics
            ]
        )


async def test_an_unexpected_error_is_retried_and_the_sender_goes_on() -> None:
    controller = _Controller(failures=2)
    answers: list[tuple[TopicPartition, AlterPartitionResult]] = []

    async def answer(tp: TopicPartition, proposal: PendingIsr, result: AlterPartitionResult) -> None:
        answers.append((tp, result))

    manager = AlterPartitionManager(1, lambda: 7, controller, answer, retry_backoff_s=0.01)  # type: ignore[arg-type]
    manager.start()
    try:
        manager.submit(TP, PROPOSAL)
        await eventually(
            lambda: asyncio.sleep(0, answers), timeout=5, message="the ISR change never answered"
        )
        assert len(controller.requests) == 3 and answers[0][1].isr == [1, 2]
        # The task is still there for the next change.
        manager.submit(TopicPartition("t", 1), PROPOSAL)
        await eventually(lambda: asyncio.sleep(0, len(answers) == 2), timeout=5, message="no second answer")
    finally:
        await manager.stop()


async def test_many_changes_go_in_requests_of_bounded_size_until_every_one_is_answered() -> None:
    controller = _Controller(failures=0)
    answered: set[TopicPartition] = set()

    async def answer(tp: TopicPartition, proposal: PendingIsr, result: AlterPartitionResult) -> None:
        answered.add(tp)

    count = 2 * PARTITIONS_PER_REQUEST + 500
    manager = AlterPartitionManager(1, lambda: 7, controller, answer, retry_backoff_s=0.01)  # type: ignore[arg-type]
    manager.start()
    try:
        for p in range(count):
            manager.submit(TopicPartition("t", p), PROPOSAL)
        await eventually(
            lambda: asyncio.sleep(0, len(answered) == count), timeout=10, message="not every change answered"
        )
        sizes = [sum(len(t.partitions) for t in r.topics) for r in controller.requests]
        assert sizes == [PARTITIONS_PER_REQUEST, PARTITIONS_PER_REQUEST, 500]
    finally:
        await manager.stop()


async def test_a_change_a_replaced_controller_answered_not_controller_is_sent_again() -> None:
    """Seed 67981 of the simulation: leader 5, cut off from ZooKeeper, still sent its ISR
    expansion to controller 4, which had been replaced and answered NOT_CONTROLLER for the
    partition (the leader's partition epoch was newer than its own, spec §7.10 4.2). The change
    stayed pending for a LeaderAndIsr that never came (the new controller had sent its own
    before), and with a change pending the leader proposed no other: the ISR stayed (5,) for
    good. Kafka's Partition resubmits a change failed with NOT_CONTROLLER (§9.5, "any other
    error: retry"), and its next request goes to the controller the broker knows by then."""
    controller = _Controller(failures=0, replaced=2)
    answers: list[AlterPartitionResult] = []

    async def answer(tp: TopicPartition, proposal: PendingIsr, result: AlterPartitionResult) -> None:
        answers.append(result)

    manager = AlterPartitionManager(1, lambda: 7, controller, answer, retry_backoff_s=0.01)  # type: ignore[arg-type]
    manager.start()
    try:
        manager.submit(TP, PROPOSAL)
        await eventually(
            lambda: asyncio.sleep(0, answers), timeout=5, message="the ISR change never answered"
        )
        assert len(controller.requests) == 3
        assert [(a.error_code, a.isr, a.partition_epoch) for a in answers] == [(ErrorCode.NONE, [1, 2], 5)]
    finally:
        await manager.stop()
