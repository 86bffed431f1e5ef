"""The leader's ISR changes on their way to the controller (Kafka's AlterPartitionManager):
pending changes are batched into one AlterPartition (of at most PARTITIONS_PER_REQUEST
partitions), one request in flight, retried after a top-level error or a lost answer. Each
partition's answer goes back to the replica manager, but for NOT_CONTROLLER: the controller
asked has been replaced (its state is older than the one this leader was told, spec §7.10
4.2), and the change is sent again after the backoff, to the controller this broker knows by
then, as Kafka's Partition resubmits a change failed with any error it does not name (§9.5).
Left to wait for a LeaderAndIsr, it would wait for good: none comes while the partition keeps
its leader and leader epoch (the new controller's failover sent its own, often before the change
was proposed), and a leader with a change pending proposes no other.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable

from actors.base.clock import Clock
from actors.base.ports import ReplicaLink, TopicPartition
from actors.base.retry import Retry
from actors.base.service import Service
from actors.replica.partition import PendingIsr
from wire.api import (
    AlterPartitionItem,
    AlterPartitionRequest,
    AlterPartitionResult,
    AlterPartitionTopic,
    BrokerState,
)
from wire.errors import ErrorCode, WireError
from wire.retry import Backoff

log = logging.getLogger(__name__)

# After a broker fails, a leader shrinks the ISR of every partition it followed: 70k at 200k
# partitions. One request naming them all held the controller's loop for half a second to
# decode and as long to answer; in requests of a thousand, each is a few milliseconds.
PARTITIONS_PER_REQUEST = 1000

Answer = Callable[[TopicPartition, PendingIsr, AlterPartitionResult], Awaitable[None]]


class AlterPartitionManager(Service):
    def __init__(
        self,
        broker_id: int,
        broker_epoch: Callable[[], int],
        link: ReplicaLink,
        answer: Answer,
        *,
        clock: Clock | None = None,
        retry_backoff_s: float = 0.1,
    ) -> None:
        super().__init__(f"alter-partition-{broker_id}")
        self._broker_id = broker_id
        self._broker_epoch = broker_epoch
        self._link = link
        self._answer = answer
        # Until the controller answers: no deadline (a new controller answers in the end).
        self._retry = Retry(clock, Backoff(retry_backoff_s, max(retry_backoff_s, 1.0)))
        self._pending: dict[TopicPartition, PendingIsr] = {}
        self._wake = asyncio.Event()

    def submit(self, tp: TopicPartition, proposal: PendingIsr) -> None:
        self._pending[tp] = proposal
        self._wake.set()

    async def run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            batch = dict(itertools.islice(self._pending.items(), PARTITIONS_PER_REQUEST))
            if not batch:
                continue
            for tp in batch:
                del self._pending[tp]
            answered: set[TopicPartition] = set()
            try:
                await self._send(batch, answered)
            except WireError as e:
                log.warning("AlterPartition for %d partition(s) failed, retrying: %s", len(batch), e.message)
            except Exception:
                # Kafka's sender threads log and go on: ended by one unexpected error, this task
                # would never propose an ISR change of this broker's partitions again.
                log.exception("AlterPartition for %d partition(s) failed unexpectedly, retrying", len(batch))
            unanswered = set(batch) - answered
            for tp in unanswered:
                self._pending.setdefault(tp, batch[tp])
            if unanswered:
                await self._retry.pause()
            else:
                self._retry.succeeded()
            if self._pending:
                self._wake.set()

    def _with_epochs(self, proposal: PendingIsr) -> list[BrokerState]:
        """Each member with the broker epoch its fetches carried (KIP-903); this broker, the
        leader, with its own."""
        epochs = proposal.broker_epochs or (-1,) * len(proposal.new_isr)
        return [
            BrokerState(
                broker_id=member, broker_epoch=self._broker_epoch() if member == self._broker_id else epoch
            )
            for member, epoch in zip(proposal.new_isr, epochs, strict=True)
        ]

    async def _send(self, batch: dict[TopicPartition, PendingIsr], answered: set[TopicPartition]) -> None:
        """One AlterPartition for the batch; each partition answered goes into `answered`
        (one answered NOT_CONTROLLER does not: it was asked of a replaced controller)."""
        by_topic: dict[str, list[AlterPartitionItem]] = {}
        for tp, proposal in sorted(batch.items()):
            by_topic.setdefault(tp.topic, []).append(
                AlterPartitionItem(
                    partition_index=tp.partition,
                    leader_epoch=proposal.leader_epoch,
                    new_isr_with_epochs=self._with_epochs(proposal),
                    partition_epoch=proposal.partition_epoch,
                )
            )
        request = AlterPartitionRequest(
            broker_id=self._broker_id,
            broker_epoch=self._broker_epoch(),
            topics=[AlterPartitionTopic(topic_name=t, partitions=items) for t, items in by_topic.items()],
        )
        response = await self._link.alter_partition(request)
        if response.error_code != ErrorCode.NONE:
            raise WireError(f"{ErrorCode(response.error_code).name}: {response.error_message}")
        for topic in response.topics:
            for result in topic.partitions:
                tp = TopicPartition(topic.topic_name, result.partition_index)
                if result.error_code == ErrorCode.NOT_CONTROLLER:
                    continue  # unanswered: sent again, to the controller known then
                if tp in batch and tp not in answered:
                    answered.add(tp)
                    await self._answer(tp, batch[tp], result)
