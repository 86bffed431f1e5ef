"""ElectLeaders (43): ask the controller to elect leaders for some partitions, or all.

`election_type` 0 (PREFERRED) moves leadership back to each partition's first assigned
replica when it is live and in the ISR; 1 (UNCLEAN) elects a leader for partitions that have
no live leader, out of the ISR if need be. `topic_partitions` nil means every partition; the
answer then leaves out the partitions that needed no election, as Kafka's does.

Top level, only when `topic_partitions` is nil (otherwise each partition carries the error):
NOT_CONTROLLER (41) from a broker that is not the active controller, REQUEST_TIMED_OUT (7),
UNKNOWN_SERVER_ERROR (-1). Per partition: NONE, UNKNOWN_TOPIC_OR_PARTITION (3),
INVALID_TOPIC_EXCEPTION (17) for a topic queued for deletion, ELECTION_NOT_NEEDED (84),
PREFERRED_LEADER_NOT_AVAILABLE (80) when a preferred election fails,
ELIGIBLE_LEADERS_NOT_AVAILABLE (83) when an unclean one does, NOT_CONTROLLER (41),
REQUEST_TIMED_OUT (7), UNKNOWN_SERVER_ERROR (-1).
"""

from __future__ import annotations

import dataclasses
from enum import IntEnum

from wire.api.base import Request, Response
from wire.api.keys import ApiKey
from wire.schema import Struct


class ElectionType(IntEnum):
    PREFERRED = 0
    UNCLEAN = 1


@dataclasses.dataclass(frozen=True, kw_only=True)
class ElectLeadersTopicPartitions(Struct):
    topic: str
    partitions: list[int] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ElectLeadersRequest(Request):
    API_KEY = ApiKey.ELECT_LEADERS

    election_type: int = 0  # ElectionType
    topic_partitions: list[ElectLeadersTopicPartitions] | None = None
    timeout_ms: int = 60000


@dataclasses.dataclass(frozen=True, kw_only=True)
class PartitionElectionResult(Struct):
    partition_id: int
    error_code: int = 0
    error_message: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class ReplicaElectionResult(Struct):
    topic: str
    partition_result: list[PartitionElectionResult] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ElectLeadersResponse(Response):
    replica_election_results: list[ReplicaElectionResult] = dataclasses.field(default_factory=list)
