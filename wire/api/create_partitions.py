"""CreatePartitions (37): raise topics' partition counts. The new partitions are placed as
Kafka places them (continuing the existing layout), or as given in `assignments`, one entry
per new partition; the topic znode is rewritten with the old partitions plus the new.

Per-topic errors: UNKNOWN_TOPIC_OR_PARTITION (3), INVALID_TOPIC_EXCEPTION (17) for a topic
queued for deletion, INVALID_PARTITIONS (37) when `count` is not above the current count,
INVALID_REPLICATION_FACTOR (38) when there are fewer brokers than replicas,
INVALID_REPLICA_ASSIGNMENT (39) for a wrong number of assignments, duplicate or unknown
brokers or another replica count, REASSIGNMENT_IN_PROGRESS (60), REQUEST_TIMED_OUT (7) when
the new partitions are not served within `timeout_ms`, INVALID_REQUEST (42) when a name
repeats in the request, POLICY_VIOLATION (44) past max.partitions, max.broker.partitions or the
assignment znode's zookeeper.jute.maxbuffer.
"""

from __future__ import annotations

import dataclasses

from wire.api.base import Request, Response
from wire.api.keys import ApiKey
from wire.schema import Struct


@dataclasses.dataclass(frozen=True, kw_only=True)
class CreatePartitionsAssignment(Struct):
    broker_ids: list[int]


@dataclasses.dataclass(frozen=True, kw_only=True)
class CreatePartitionsTopic(Struct):
    name: str
    # The new total number of partitions.
    count: int
    # One per new partition, in partition order; nil: Keel places them.
    assignments: list[CreatePartitionsAssignment] | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class CreatePartitionsRequest(Request):
    API_KEY = ApiKey.CREATE_PARTITIONS

    topics: list[CreatePartitionsTopic]
    timeout_ms: int = 30000
    validate_only: bool = False


@dataclasses.dataclass(frozen=True, kw_only=True)
class CreatePartitionsTopicResult(Struct):
    name: str
    error_code: int
    error_message: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class CreatePartitionsResponse(Response):
    results: list[CreatePartitionsTopicResult] = dataclasses.field(default_factory=list)
