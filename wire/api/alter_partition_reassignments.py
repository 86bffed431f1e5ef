"""AlterPartitionReassignments (45): start, supersede or cancel partition reassignments
(KIP-455). Only the active controller acts on it; any other broker answers NOT_CONTROLLER,
and the client looks for the controller and asks it.

A partition's `replicas` is its target replica list; `None` cancels the reassignment in
progress, which restores the original replicas.

Top level: NOT_CONTROLLER (41) when the controller is not active or moved while the request
was queued or processed; REQUEST_TIMED_OUT (7) when not answered within `timeout_ms`;
UNKNOWN_SERVER_ERROR (-1) when processing failed otherwise. Per partition:
INVALID_REPLICA_ASSIGNMENT (39) for an empty list, a duplicate or negative broker id, or a
new replica whose broker is not live (or is in controlled shutdown); UNKNOWN_TOPIC_OR_PARTITION (3)
for an unknown partition or a topic queued for deletion; NO_REASSIGNMENT_IN_PROGRESS (85) for
a cancellation of a partition that is not being reassigned. A success means the reassignment
was started (or cancelled); it completes later, once the target replicas are in the ISR.
"""

from __future__ import annotations

import dataclasses

from wire.api.base import Request, Response
from wire.api.keys import ApiKey
from wire.schema import Struct


@dataclasses.dataclass(frozen=True, kw_only=True)
class ReassignablePartition(Struct):
    partition_index: int
    # The target replicas, the first being the preferred leader; None cancels.
    replicas: list[int] | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class ReassignableTopic(Struct):
    name: str
    partitions: list[ReassignablePartition] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, kw_only=True)
class AlterPartitionReassignmentsRequest(Request):
    API_KEY = ApiKey.ALTER_PARTITION_REASSIGNMENTS

    timeout_ms: int = 60000
    topics: list[ReassignableTopic] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ReassignablePartitionResponse(Struct):
    partition_index: int
    error_code: int = 0
    error_message: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class ReassignableTopicResponse(Struct):
    name: str
    partitions: list[ReassignablePartitionResponse] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, kw_only=True)
class AlterPartitionReassignmentsResponse(Response):
    responses: list[ReassignableTopicResponse] = dataclasses.field(default_factory=list)
