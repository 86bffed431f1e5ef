"""ListPartitionReassignments (46): the partitions being reassigned, with their full replica
lists (KIP-455). Only the active controller answers; any other broker forwards the request.

`topics` None lists every reassignment in progress; otherwise only the named partitions, and
those that are not being reassigned (or do not exist) are left out of the answer.

Top level: NOT_CONTROLLER (41) when the controller is not active or moved while the request
was queued.
"""

from __future__ import annotations

import dataclasses

from wire.api.base import Request, Response
from wire.api.keys import ApiKey
from wire.schema import Struct


@dataclasses.dataclass(frozen=True, kw_only=True)
class ListPartitionReassignmentsTopics(Struct):
    name: str
    partition_indexes: list[int] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ListPartitionReassignmentsRequest(Request):
    API_KEY = ApiKey.LIST_PARTITION_REASSIGNMENTS

    timeout_ms: int = 60000
    topics: list[ListPartitionReassignmentsTopics] | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class OngoingPartitionReassignment(Struct):
    partition_index: int
    # The full replica list (target replicas first, then the origin replicas not in it).
    replicas: list[int]
    adding_replicas: list[int] = dataclasses.field(default_factory=list)
    removing_replicas: list[int] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, kw_only=True)
class OngoingTopicReassignment(Struct):
    name: str
    partitions: list[OngoingPartitionReassignment] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ListPartitionReassignmentsResponse(Response):
    topics: list[OngoingTopicReassignment] = dataclasses.field(default_factory=list)
