"""CreateTopics (19): create topics with a partition count and replication factor (placed as
Kafka places them, rack-aware when every broker has a rack) or an explicit assignment.

Per-topic errors: TOPIC_ALREADY_EXISTS (36), INVALID_TOPIC_EXCEPTION (17),
INVALID_PARTITIONS (37), INVALID_REPLICATION_FACTOR (38), INVALID_REPLICA_ASSIGNMENT (39),
INVALID_CONFIG (40), INVALID_REQUEST (42) when both a count and an assignment are given or a
name repeats in the request, POLICY_VIOLATION (44) past max.partitions, max.broker.partitions or
the assignment znode's zookeeper.jute.maxbuffer; REQUEST_TIMED_OUT (7) for a topic created
whose partitions have no leader known to the receiving broker within the request's timeout.
"""

from __future__ import annotations

import dataclasses

from wire.api.base import Request, Response
from wire.api.keys import ApiKey
from wire.schema import Struct


@dataclasses.dataclass(frozen=True, kw_only=True)
class CreatableReplicaAssignment(Struct):
    partition: int
    broker_ids: list[int]


@dataclasses.dataclass(frozen=True, kw_only=True)
class CreatableTopic(Struct):
    name: str
    # -1: the broker's num.partitions / default.replication.factor.
    num_partitions: int = -1
    replication_factor: int = -1
    assignments: list[CreatableReplicaAssignment] = dataclasses.field(default_factory=list)
    configs: dict[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True, kw_only=True)
class CreateTopicsRequest(Request):
    API_KEY = ApiKey.CREATE_TOPICS

    topics: list[CreatableTopic]
    validate_only: bool = False
    # Kafka's clients send one: the answer waits until the receiving broker knows a leader of
    # every partition created (Kafka's DelayedCreatePartitions), so that its Metadata shows the
    # topic; 0 or less answers at once, REQUEST_TIMED_OUT for each topic created, as Kafka does.
    # None (Keel's own callers, topics auto-created): answered once the topic is written.
    timeout_ms: int | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class CreatableTopicResult(Struct):
    name: str
    error_code: int
    error_message: str | None = None
    num_partitions: int = -1
    replication_factor: int = -1


@dataclasses.dataclass(frozen=True, kw_only=True)
class CreateTopicsResponse(Response):
    topics: list[CreatableTopicResult] = dataclasses.field(default_factory=list)
