"""ElectLeaders on a broker (node/broker/leader_election.py): the election type checked, the
answer held until the broker's own metadata shows each new leader, or timed out."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, cast

from actors.base.ports import TopicPartition
from actors.controller.leader_election import ElectionOutcome
from node.broker.leader_election import elect_leaders
from wire.api import (
    ElectionType,
    ElectLeadersRequest,
    ElectLeadersTopicPartitions,
    MetadataPartition,
    MetadataRequest,
    MetadataResponse,
    MetadataTopic,
)
from wire.errors import ErrorCode

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


class Controller:
    def __init__(self, outcomes: dict[TopicPartition, ElectionOutcome]) -> None:
        self.outcomes = outcomes
        self.asked: list[tuple[ElectionType, frozenset[TopicPartition] | None]] = []

    async def elect_leaders(
        self,
        election_type: ElectionType,
        partitions: frozenset[TopicPartition] | None,
        timeout_s: float | None = None,
    ) -> dict[TopicPartition, ElectionOutcome]:
        self.asked.append((election_type, partitions))
        return dict(self.outcomes)


class ReplicaManager:
    """Its metadata shows `leaders`; each read counts."""

    def __init__(self, leaders: dict[TopicPartition, int]) -> None:
        self.leaders = leaders
        self.reads = 0

    async def metadata(self, request: MetadataRequest) -> MetadataResponse:
        self.reads += 1
        partitions = [
            MetadataPartition(
                error_code=0,
                partition=tp.partition,
                leader=leader,
                leader_epoch=1,
                replicas=[],
                isr=[],
                offline_replicas=[],
            )
            for tp, leader in sorted(self.leaders.items())
        ]
        return MetadataResponse(topics=[MetadataTopic(error_code=0, name="t", partitions=partitions)])

    async def wait_for_metadata(self, ready: Callable[[], Awaitable[bool]], timeout_s: float) -> bool:
        """Its metadata never changes: asked once."""
        return await ready()


def request(election_type: int, timeout_ms: int = 1000) -> ElectLeadersRequest:
    return ElectLeadersRequest(
        election_type=election_type,
        topic_partitions=[ElectLeadersTopicPartitions(topic="t", partitions=[0, 1])],
        timeout_ms=timeout_ms,
    )


def codes(response: Any) -> dict[tuple[str, int], int]:
    return {
        (t.topic, r.partition_id): r.error_code
        for t in response.replica_election_results
        for r in t.partition_result
    }


async def test_an_unknown_election_type_is_refused_and_nothing_is_elected() -> None:
    controller = Controller({})
    response = await elect_leaders(cast(Any, controller), cast(Any, ReplicaManager({})), request(7))
    assert response.error_code == ErrorCode.INVALID_REQUEST
    assert controller.asked == []


async def test_the_answer_waits_for_the_new_leader_in_this_brokers_metadata() -> None:
    controller = Controller(
        {T0: ElectionOutcome(leader=2), T1: ElectionOutcome(error=ErrorCode.ELECTION_NOT_NEEDED)}
    )
    replica_manager = ReplicaManager({T0: 2, T1: 1})
    response = await elect_leaders(cast(Any, controller), cast(Any, replica_manager), request(1))
    assert controller.asked == [(ElectionType.UNCLEAN, frozenset({T0, T1}))]
    assert codes(response) == {("t", 0): ErrorCode.NONE, ("t", 1): ErrorCode.ELECTION_NOT_NEEDED}
    assert replica_manager.reads == 1


async def test_a_leader_not_shown_in_time_answers_request_timed_out() -> None:
    controller = Controller({T0: ElectionOutcome(leader=2)})
    replica_manager = ReplicaManager({T0: 1})
    response = await elect_leaders(
        cast(Any, controller), cast(Any, replica_manager), request(0, timeout_ms=0)
    )
    assert codes(response) == {("t", 0): ErrorCode.REQUEST_TIMED_OUT}
