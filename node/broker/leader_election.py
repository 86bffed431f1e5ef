"""ElectLeaders (43) on a broker: the request goes to this broker's controller module, which
answers NOT_CONTROLLER per partition unless it is the active controller (asked for every
partition: NOT_CONTROLLER for the whole request). As Kafka's broker
does (DelayedElectLeader), the answer waits, up to `timeout_ms`, until this broker's metadata
shows each newly elected leader, so a client that reads metadata next sees the change; a
partition not shown in time answers REQUEST_TIMED_OUT.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from actors.base.ports import TopicPartition
from actors.controller.leader_election import ElectionOutcome, election_response
from wire.api import ElectionType, ElectLeadersRequest, ElectLeadersResponse, MetadataRequest
from wire.errors import ErrorCode, WireError

if TYPE_CHECKING:
    from actors.controller import KafkaController
    from actors.replica.handle import ReplicaManagerHandle

log = logging.getLogger(__name__)


async def elect_leaders(
    controller: KafkaController, replica_manager: ReplicaManagerHandle, request: ElectLeadersRequest
) -> ElectLeadersResponse:
    try:
        election_type = ElectionType(request.election_type)
    except ValueError:
        log.warning("ElectLeaders with unknown election type %d refused", request.election_type)
        return ElectLeadersResponse(
            error_code=ErrorCode.INVALID_REQUEST,
            error_message=f"unknown election type {request.election_type}: 0 (PREFERRED) or 1 (UNCLEAN)",
        )
    asked = (
        None
        if request.topic_partitions is None
        else frozenset(TopicPartition(t.topic, p) for t in request.topic_partitions for p in t.partitions)
    )
    # On the loop's clock, which a simulation drives.
    clock = asyncio.get_running_loop()
    deadline = clock.time() + max(request.timeout_ms, 0) / 1000
    try:
        outcomes = await controller.elect_leaders(election_type, asked, max(request.timeout_ms, 0) / 1000)
    except WireError as e:
        # Asked for every partition, there is no partition to carry the error: this broker is
        # not the controller (the client looks for it again), or the election did not finish.
        return ElectLeadersResponse(error_code=e.error_code, error_message=e.message)
    await _await_leaders(replica_manager, outcomes, deadline - clock.time())
    return election_response(outcomes, every_partition=asked is None)


async def _await_leaders(
    replica_manager: ReplicaManagerHandle, outcomes: dict[TopicPartition, ElectionOutcome], timeout_s: float
) -> None:
    """Until this broker's metadata names each elected leader; the rest time out, in place."""
    waiting = {tp: o.leader for tp, o in outcomes.items() if o.error == ErrorCode.NONE}
    if not waiting:
        return
    request = MetadataRequest(topics=sorted({tp.topic for tp in waiting}))

    async def all_shown() -> bool:
        nonlocal waiting
        metadata = await replica_manager.metadata(request)
        shown = {
            TopicPartition(topic.name, p.partition): p.leader
            for topic in metadata.topics
            for p in topic.partitions
        }
        waiting = {tp: leader for tp, leader in waiting.items() if shown.get(tp) != leader}
        return not waiting

    await replica_manager.wait_for_metadata(all_shown, timeout_s)
    for tp in waiting:
        outcomes[tp] = ElectionOutcome(
            error=ErrorCode.REQUEST_TIMED_OUT, message=f"the new leader of {tp} was not propagated in time"
        )
