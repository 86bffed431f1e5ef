"""Fetch (1): consumers and follower replicas read record batches from partition leaders.

`replica_id` -1 is a consumer: it reads up to the high watermark. A broker id is a follower:
it reads up to the log end, and its `fetch_offset` tells the leader how far its log reaches.
The answer waits up to `max_wait_ms` for `min_bytes`. `current_leader_epoch` (-1: not
checked) fences a follower of an older leader (FENCED_LEADER_EPOCH, 74) or one that knows a
newer leader than this broker (UNKNOWN_LEADER_EPOCH, 75). Other per partition errors:
NOT_LEADER_OR_FOLLOWER (6), UNKNOWN_TOPIC_OR_PARTITION (3), OFFSET_OUT_OF_RANGE (1).
"""

from __future__ import annotations

import dataclasses

from wire.api.base import Request, Response
from wire.api.keys import ApiKey
from wire.schema import Struct


@dataclasses.dataclass(frozen=True, kw_only=True)
class FetchPartition(Struct):
    partition: int
    fetch_offset: int
    current_leader_epoch: int = -1
    partition_max_bytes: int = 1048576


@dataclasses.dataclass(frozen=True, kw_only=True)
class FetchTopic(Struct):
    topic: str
    partitions: list[FetchPartition] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ForgottenTopic(Struct):
    topic: str
    partitions: list[int] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, kw_only=True)
class FetchRequest(Request):
    API_KEY = ApiKey.FETCH

    replica_id: int = -1
    # The follower's broker epoch (Kafka's ReplicaState.ReplicaEpoch); -1 for consumers.
    replica_epoch: int = -1
    max_wait_ms: int = 500
    min_bytes: int = 1
    max_bytes: int = 52428800
    # Incremental fetch sessions (KIP-227): epoch -1 fetches without one; session 0 with
    # epoch 0 opens one; then the session's id with epochs 1, 2, ...
    session_id: int = 0
    session_epoch: int = -1
    topics: list[FetchTopic] = dataclasses.field(default_factory=list)
    forgotten_topics_data: list[ForgottenTopic] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, kw_only=True)
class FetchPartitionData(Struct):
    partition_index: int
    error_code: int = 0
    high_watermark: int = -1
    log_start_offset: int = -1
    records: bytes = b""


@dataclasses.dataclass(frozen=True, kw_only=True)
class FetchableTopicResponse(Struct):
    topic: str
    partitions: list[FetchPartitionData] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, kw_only=True)
class FetchResponse(Response):
    session_id: int = 0
    responses: list[FetchableTopicResponse] = dataclasses.field(default_factory=list)
