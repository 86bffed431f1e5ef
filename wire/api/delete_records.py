"""DeleteRecords (21): move partitions' log start offsets forward, as Kafka's
`kafka-delete-records` does; the records below are gone for readers, and the segments wholly
below deleted. At each partition's leader; `offset` -1 is the high watermark.

Per partition: NOT_LEADER_OR_FOLLOWER off the leader; OFFSET_OUT_OF_RANGE for an offset
beyond the high watermark (or below -1); TOPIC_AUTHORIZATION_FAILED without Delete on the
topic. `low_watermark` is the leader's new log start offset (Kafka waits until every replica
has moved its own; Keel answers with the leader's, and the followers follow on their next
fetch).
"""

from __future__ import annotations

import dataclasses

from wire.api.base import Request, Response
from wire.api.keys import ApiKey
from wire.schema import Struct

HIGH_WATERMARK = -1


@dataclasses.dataclass(frozen=True, kw_only=True)
class DeleteRecordsPartition(Struct):
    partition_index: int
    offset: int


@dataclasses.dataclass(frozen=True, kw_only=True)
class DeleteRecordsTopic(Struct):
    name: str
    partitions: list[DeleteRecordsPartition] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, kw_only=True)
class DeleteRecordsRequest(Request):
    API_KEY = ApiKey.DELETE_RECORDS

    topics: list[DeleteRecordsTopic] = dataclasses.field(default_factory=list)
    timeout_ms: int = 30000


@dataclasses.dataclass(frozen=True, kw_only=True)
class DeleteRecordsPartitionResult(Struct):
    partition_index: int
    low_watermark: int = -1
    error_code: int = 0


@dataclasses.dataclass(frozen=True, kw_only=True)
class DeleteRecordsTopicResult(Struct):
    name: str
    partitions: list[DeleteRecordsPartitionResult] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, kw_only=True)
class DeleteRecordsResponse(Response):
    topics: list[DeleteRecordsTopicResult] = dataclasses.field(default_factory=list)
