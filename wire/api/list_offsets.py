"""ListOffsets (2): an offset by time. `timestamp` -2 asks for the earliest offset, -1 for
the latest (the high watermark for consumers, the log end for replicas), otherwise the first
offset whose batch timestamp is at or after it (-1 offset when there is none)."""

from __future__ import annotations

import dataclasses

from wire.api.base import Request, Response
from wire.api.keys import ApiKey
from wire.schema import Struct

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
# KIP-734 (ListOffsets v7): the record with the largest timestamp.
MAX_TIMESTAMP = -3


@dataclasses.dataclass(frozen=True, kw_only=True)
class ListOffsetsPartition(Struct):
    partition_index: int
    current_leader_epoch: int = -1
    timestamp: int = LATEST_TIMESTAMP


@dataclasses.dataclass(frozen=True, kw_only=True)
class ListOffsetsTopic(Struct):
    name: str
    partitions: list[ListOffsetsPartition] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ListOffsetsRequest(Request):
    API_KEY = ApiKey.LIST_OFFSETS

    replica_id: int = -1
    topics: list[ListOffsetsTopic] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ListOffsetsPartitionResponse(Struct):
    partition_index: int
    error_code: int = 0
    timestamp: int = -1
    offset: int = -1
    leader_epoch: int = -1


@dataclasses.dataclass(frozen=True, kw_only=True)
class ListOffsetsTopicResponse(Struct):
    name: str
    partitions: list[ListOffsetsPartitionResponse] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ListOffsetsResponse(Response):
    topics: list[ListOffsetsTopicResponse] = dataclasses.field(default_factory=list)
