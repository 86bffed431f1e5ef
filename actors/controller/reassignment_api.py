"""AlterPartitionReassignments (45) and ListPartitionReassignments (46) on the controller:
requests turned into what the reassignment code takes, its results into responses."""

from __future__ import annotations

from actors.base.ports import ReplicaAssignment, TopicPartition
from actors.controller.reassignment import Outcome
from wire.api import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    OngoingPartitionReassignment,
    OngoingTopicReassignment,
    ReassignablePartitionResponse,
    ReassignableTopicResponse,
)
from wire.errors import ErrorCode


def reassignments_requested(
    request: AlterPartitionReassignmentsRequest,
) -> dict[TopicPartition, tuple[int, ...] | None]:
    """Per partition the target replicas, None to cancel (a repeated partition: the last)."""
    return {
        TopicPartition(topic.name, p.partition_index): None if p.replicas is None else tuple(p.replicas)
        for topic in request.topics
        for p in topic.partitions
    }


def requested_partitions(request: ListPartitionReassignmentsRequest) -> list[TopicPartition] | None:
    if request.topics is None:
        return None
    return [TopicPartition(t.name, p) for t in request.topics for p in t.partition_indexes]


def alter_reassignments_response(
    outcomes: dict[TopicPartition, Outcome],
) -> AlterPartitionReassignmentsResponse:
    by_topic: dict[str, list[ReassignablePartitionResponse]] = {}
    for tp, (code, message) in sorted(outcomes.items()):
        by_topic.setdefault(tp.topic, []).append(
            ReassignablePartitionResponse(
                partition_index=tp.partition, error_code=code, error_message=message
            )
        )
    return AlterPartitionReassignmentsResponse(
        responses=[ReassignableTopicResponse(name=t, partitions=p) for t, p in by_topic.items()]
    )


def list_reassignments_response(
    ongoing: dict[TopicPartition, ReplicaAssignment],
) -> ListPartitionReassignmentsResponse:
    by_topic: dict[str, list[OngoingPartitionReassignment]] = {}
    for tp, assignment in sorted(ongoing.items()):
        by_topic.setdefault(tp.topic, []).append(
            OngoingPartitionReassignment(
                partition_index=tp.partition,
                replicas=list(assignment.replicas),
                adding_replicas=list(assignment.adding),
                removing_replicas=list(assignment.removing),
            )
        )
    return ListPartitionReassignmentsResponse(
        topics=[OngoingTopicReassignment(name=t, partitions=p) for t, p in by_topic.items()]
    )


def not_controller_alter(message: str) -> AlterPartitionReassignmentsResponse:
    return AlterPartitionReassignmentsResponse(error_code=ErrorCode.NOT_CONTROLLER, error_message=message)


def not_controller_list(message: str) -> ListPartitionReassignmentsResponse:
    return ListPartitionReassignmentsResponse(error_code=ErrorCode.NOT_CONTROLLER, error_message=message)
