"""Controlled shutdown on the controller (spec §7.3): a broker about to stop asks the active
controller to move its leaders away first, so that its partitions stay available.

The broker joins the shutting-down set: from then on it is not live, so no election picks it
and AlterPartition refuses to add it to an ISR. Its led partitions (replication factor > 1)
are moved by the controlled-shutdown election in one state change (one fenced multi-op per
500 partitions, one LeaderAndIsr per broker); then its other replicas go Offline in one
more: StopReplica without delete to it, and it leaves their ISRs. The answer lists what it
still leads. It leaves the set when it deregisters (BrokerChange), and a new registration
(a new broker epoch) makes it eligible again.

Kafka splits the partitions into led and followed before the election, so the partitions it
just gave up are only stopped on the broker's next request. Keel splits after the election:
every replica the broker no longer leads is stopped in the same event, and the broker's
fetchers for them stop at once.
"""

from __future__ import annotations

import logging

from actors.base.clock import Clock
from actors.base.ports import TopicPartition
from actors.controller.context import ControllerContext, PartitionReplica, PartitionState, ReplicaState
from actors.controller.partition_state_machine import PartitionStateMachine, Strategy
from actors.controller.replica_state_machine import ReplicaStateMachine
from wire.api import ControlledShutdownResponse, RemainingPartition
from wire.errors import ErrorCode

log = logging.getLogger(__name__)


def check(context: ControllerContext, broker_id: int, broker_epoch: int) -> ControlledShutdownResponse | None:
    """The refusal for a request the controller must not act on, or None."""
    registered = context.live_brokers.get(broker_id)
    if registered is not None and broker_epoch != -1 and broker_epoch < registered.broker_epoch:
        log.info(
            "controlled shutdown of broker %d refused: broker epoch %d is older than %d",
            broker_id,
            broker_epoch,
            registered.broker_epoch,
        )
        return ControlledShutdownResponse(
            error_code=ErrorCode.STALE_BROKER_EPOCH,
            error_message=f"broker epoch {broker_epoch} of broker {broker_id} is stale",
        )
    if registered is None:
        log.info("controlled shutdown of broker %d refused: it is not registered", broker_id)
        return ControlledShutdownResponse(
            error_code=ErrorCode.BROKER_NOT_AVAILABLE,
            error_message=f"broker {broker_id} is not registered",
        )
    return None


def partitions_to_act_on(context: ControllerContext, broker_id: int) -> list[TopicPartition]:
    """The partitions hosted by the broker with a replication factor above 1, a state, and a
    topic not queued for deletion (deletion stops those replicas itself)."""
    deleting = context.topics_to_be_deleted
    return [
        tp
        for tp in context.leadership
        if broker_id in (replicas := context.replicas(tp)) and len(replicas) > 1 and tp.topic not in deleting
    ]


def partition_leaders_on_broker(context: ControllerContext, broker_id: int) -> list[TopicPartition]:
    return [
        tp
        for tp in partitions_to_act_on(context, broker_id)
        if context.leadership[tp].leader_and_isr.leader == broker_id
    ]


async def controlled_shutdown(
    context: ControllerContext,
    partitions: PartitionStateMachine,
    replicas: ReplicaStateMachine,
    broker_id: int,
    broker_epoch: int,
    *,
    clock: Clock,
) -> ControlledShutdownResponse:
    refusal = check(context, broker_id, broker_epoch)
    if refusal is not None:
        return refusal
    started = clock.monotonic()
    context.shutting_down.add(broker_id)
    hosted = partitions_to_act_on(context, broker_id)
    led = [tp for tp in hosted if context.leadership[tp].leader_and_isr.leader == broker_id]
    log.info(
        "controlled shutdown of broker %d: moving %d leaders, stopping %d followers",
        broker_id,
        len(led),
        len(hosted) - len(led),
    )
    # Only Online and Offline partitions can elect; a New one has no leader to move.
    electable = [tp for tp in led if partitions.state(tp) in (PartitionState.ONLINE, PartitionState.OFFLINE)]
    if electable:
        await partitions.handle_state_changes(electable, PartitionState.ONLINE, Strategy.CONTROLLED_SHUTDOWN)
    remaining = partition_leaders_on_broker(context, broker_id)
    moved = clock.monotonic()
    still_led = set(remaining)
    followed = [PartitionReplica(tp, broker_id) for tp in hosted if tp not in still_led]
    if followed:
        await replicas.handle_state_changes(followed, ReplicaState.OFFLINE)
    log.info(
        "controlled shutdown of broker %d: leaders moved in %.0f ms, followers stopped in %.0f ms",
        broker_id,
        (moved - started) * 1000,
        (clock.monotonic() - moved) * 1000,
    )
    if remaining:
        log.info(
            "controlled shutdown of broker %d: it still leads %d partitions, e.g. %s",
            broker_id,
            len(remaining),
            remaining[0],
        )
    return ControlledShutdownResponse(
        remaining_partitions=[
            RemainingPartition(topic_name=tp.topic, partition_index=tp.partition) for tp in sorted(remaining)
        ]
    )
