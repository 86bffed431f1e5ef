"""OffsetsForLeaderEpoch (23): where does `leader_epoch` end in the leader's log? A follower
truncates its own log there (or at its own end of that epoch, if earlier) before fetching.
Answers the largest epoch ≤ the one asked that the leader knows, and the start offset of the
next one (the log end offset for the latest epoch); -1, -1 when it knows none."""

from __future__ import annotations

import dataclasses

from wire.api.base import Request, Response
from wire.api.keys import ApiKey
from wire.schema import Struct


@dataclasses.dataclass(frozen=True, kw_only=True)
class OffsetForLeaderPartition(Struct):
    partition: int
    current_leader_epoch: int = -1
    leader_epoch: int


@dataclasses.dataclass(frozen=True, kw_only=True)
class OffsetForLeaderTopic(Struct):
    topic: str
    partitions: list[OffsetForLeaderPartition] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, kw_only=True)
class OffsetsForLeaderEpochRequest(Request):
    API_KEY = ApiKey.OFFSET_FOR_LEADER_EPOCH

    replica_id: int = -1
    topics: list[OffsetForLeaderTopic] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, kw_only=True)
class EpochEndOffset(Struct):
    partition: int
    error_code: int = 0
    leader_epoch: int = -1
    end_offset: int = -1


@dataclasses.dataclass(frozen=True, kw_only=True)
class OffsetForLeaderTopicResult(Struct):
    topic: str
    partitions: list[EpochEndOffset] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, kw_only=True)
class OffsetsForLeaderEpochResponse(Response):
    topics: list[OffsetForLeaderTopicResult] = dataclasses.field(default_factory=list)
