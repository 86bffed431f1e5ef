"""Produce (0): a producer appends record batches to partition leaders.

`acks`: 0 (no answer is awaited by the client, the broker still answers), 1 (the leader has
appended), -1 (every in-sync replica has). `records` is one or more record batches
(`wire.records`), passed to the log without re-encoding. Per partition errors:
NOT_LEADER_OR_FOLLOWER (6), UNKNOWN_TOPIC_OR_PARTITION (3), CORRUPT_MESSAGE (2),
MESSAGE_TOO_LARGE (10), NOT_ENOUGH_REPLICAS (19) before the append,
NOT_ENOUGH_REPLICAS_AFTER_APPEND (20) and REQUEST_TIMED_OUT (7) after it (acks=-1);
INVALID_RECORD (87) and UNSUPPORTED_COMPRESSION_TYPE (76) for a batch the leader refuses
(node/broker/log/validator.py); INVALID_REQUIRED_ACKS (21) on every partition, nothing
appended, for acks other than -1, 0 or 1.
"""

from __future__ import annotations

import dataclasses

from wire.api.base import Request, Response
from wire.api.keys import ApiKey
from wire.schema import Struct


@dataclasses.dataclass(frozen=True, kw_only=True)
class ProducePartitionData(Struct):
    index: int
    records: bytes


@dataclasses.dataclass(frozen=True, kw_only=True)
class ProduceTopicData(Struct):
    name: str
    partition_data: list[ProducePartitionData] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ProduceRequest(Request):
    API_KEY = ApiKey.PRODUCE

    acks: int = -1
    timeout_ms: int = 30000
    topic_data: list[ProduceTopicData] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ProducePartitionResponse(Struct):
    index: int
    error_code: int = 0
    error_message: str | None = None
    base_offset: int = -1
    log_start_offset: int = -1


@dataclasses.dataclass(frozen=True, kw_only=True)
class ProduceTopicResponse(Struct):
    name: str
    partition_responses: list[ProducePartitionResponse] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ProduceResponse(Response):
    responses: list[ProduceTopicResponse] = dataclasses.field(default_factory=list)
