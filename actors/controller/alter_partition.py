"""AlterPartition on the controller (spec §7.10): a leader's ISR change, checked against the
cached state in Kafka's order, written fenced by the controller epoch and conditional on the
partition epoch the leader saw, then announced with UpdateMetadata to every broker."""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Mapping

from actors.base.loop_slices import SLICE, turn_if_held
from actors.base.ports import ClusterStore, LeaderAndIsr, LeadershipInfo, TopicPartition
from actors.controller.context import ControllerContext
from actors.controller.partition_state_machine import write_states
from actors.controller.request_batch import RequestBatch
from wire.api import (
    AlterPartitionItem,
    AlterPartitionRequest,
    AlterPartitionResponse,
    AlterPartitionResult,
    AlterPartitionTopicResult,
)
from wire.errors import ErrorCode

log = logging.getLogger(__name__)


def check(
    context: ControllerContext, broker_id: int, tp: TopicPartition, item: AlterPartitionItem
) -> ErrorCode | LeaderAndIsr | None:
    """An error, or the state to write, or None when the request only echoes the current
    state (idempotent success)."""
    info = context.leadership.get(tp)
    if info is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    current = info.leader_and_isr
    if item.partition_epoch > current.partition_epoch or item.leader_epoch > current.leader_epoch:
        return ErrorCode.NOT_CONTROLLER
    if item.leader_epoch < current.leader_epoch:
        return ErrorCode.FENCED_LEADER_EPOCH
    if current.leader != broker_id:
        # As KRaft's controller: only the partition's leader changes its ISR. ZooKeeper-mode
        # Kafka writes the sender in as leader, so any broker at the current leader epoch
        # could make itself leader of a partition without an election.
        return ErrorCode.INVALID_REQUEST
    proposed = LeaderAndIsr(broker_id, item.leader_epoch, tuple(item.new_isr), item.partition_epoch)
    if (
        current.leader == broker_id
        and tuple(current.isr) == proposed.isr
        and item.partition_epoch <= current.partition_epoch
    ):
        return None
    if item.partition_epoch < current.partition_epoch:
        return ErrorCode.INVALID_UPDATE_VERSION
    if not eligible(context, current.isr, item):
        return ErrorCode.INELIGIBLE_REPLICA
    return proposed


def eligible(context: ControllerContext, current_isr: tuple[int, ...], item: AlterPartitionItem) -> bool:
    """Every proposed member is live, not shutting down, and named with the broker epoch it
    is registered with (KIP-903). A member the ISR already holds may come without an epoch
    (its leader has not seen it fetch yet); one joining must come with its own: a replica
    that restarted, having lost the unflushed tail of its log, is not let back in on what
    its previous incarnation had fetched."""
    for member in item.new_isr_with_epochs:
        registered = context.live_brokers.get(member.broker_id)
        if registered is None or member.broker_id in context.shutting_down:
            return False
        if member.broker_epoch == -1:
            if member.broker_id not in current_isr:
                return False
        elif member.broker_epoch != registered.broker_epoch:
            return False
    return True


async def alter_partition(
    context: ControllerContext,
    store: ClusterStore,
    new_batch: Callable[[], RequestBatch],
    request: AlterPartitionRequest,
) -> AlterPartitionResponse:
    registered = context.live_brokers.get(request.broker_id)
    if registered is None or registered.broker_epoch != request.broker_epoch:
        return AlterPartitionResponse(
            error_code=ErrorCode.STALE_BROKER_EPOCH,
            error_message=f"broker {request.broker_id} at epoch {request.broker_epoch} is not registered so",
        )
    outcomes: dict[TopicPartition, ErrorCode | LeaderAndIsr] = {}
    writes: dict[TopicPartition, LeaderAndIsr] = {}
    # After a broker fails, each leader shrinks the ISR of every partition the broker
    # followed: at 200k partitions one request names 100k, and each pass over it is cut into
    # slices between which the loop turns (actors/base/loop_slices.py).
    count = 0
    for topic in request.topics:
        for item in topic.partitions:
            count += 1
            if count % SLICE == 0:
                await turn_if_held()
            tp = TopicPartition(topic.topic_name, item.partition_index)
            checked = check(context, request.broker_id, tp, item)
            if checked is None:
                outcomes[tp] = context.leadership[tp].leader_and_isr
            elif isinstance(checked, LeaderAndIsr):
                writes[tp] = checked
            else:
                outcomes[tp] = checked
    written = await write_states(context, store, writes)
    for tp in written.conflicts:
        outcomes[tp] = ErrorCode.INVALID_UPDATE_VERSION
    for tp, error in written.failed.items():
        log.warning("AlterPartition for %s failed: %s", tp, error)
        outcomes[tp] = ErrorCode.UNKNOWN_SERVER_ERROR
    for tp, info in written.written.items():
        outcomes[tp] = info.leader_and_isr
    log_changes(request.broker_id, written.written)
    batch = new_batch()
    batch.add_update_metadata(context.live_or_shutting_down_ids(), list(outcomes))
    await batch.send()
    by_topic: dict[str, list[AlterPartitionResult]] = {}
    for count, (tp, outcome) in enumerate(outcomes.items(), 1):
        if count % SLICE == 0:
            await turn_if_held()
        if isinstance(outcome, LeaderAndIsr):
            result = AlterPartitionResult(
                partition_index=tp.partition,
                leader_id=outcome.leader,
                leader_epoch=outcome.leader_epoch,
                isr=list(outcome.isr),
                partition_epoch=outcome.partition_epoch,
            )
        else:
            result = AlterPartitionResult(partition_index=tp.partition, error_code=outcome)
        by_topic.setdefault(tp.topic, []).append(result)
    return AlterPartitionResponse(
        topics=[AlterPartitionTopicResult(topic_name=t, partitions=r) for t, r in by_topic.items()]
    )


# Partitions named in the one line that reports a request's ISR changes.
LOGGED_PARTITIONS = 10


def log_changes(leader: int, written: Mapping[TopicPartition, LeadershipInfo]) -> None:
    """One line per request, naming its first partitions and how many more, rather than one
    line per partition: a line costs tens of microseconds, and a request after a broker
    failure changes 100k ISRs. Each partition's change is logged at DEBUG."""
    if not written:
        return
    if log.isEnabledFor(logging.DEBUG):
        for tp, info in written.items():
            log.debug("ISR of %s changed to %s by its leader %d", tp, list(info.leader_and_isr.isr), leader)
    named = ", ".join(
        f"{tp} {list(info.leader_and_isr.isr)}"
        for tp, info in itertools.islice(written.items(), LOGGED_PARTITIONS)
    )
    more = len(written) - LOGGED_PARTITIONS
    log.info(
        "ISR of %d partition(s) changed by their leader %d: %s%s",
        len(written),
        leader,
        named,
        f" and {more} more" if more > 0 else "",
    )
