"""DescribeLogDirs (35): the size of each partition replica a broker holds, per log dir.
On the leader of a partition being reassigned it also reports the bytes the adding replicas
still lack, which `keel reassign` shows as the bytes still to copy.

`topics` None describes every partition on the broker. `offset_lag` is Kafka's field for
moves between log dirs, always 0 here. Top-level errors: none; a log dir in error would carry
KAFKA_STORAGE_ERROR (56), which Keel does not detect yet.
"""

from __future__ import annotations

import dataclasses

from wire.api.base import Request, Response
from wire.api.keys import ApiKey
from wire.schema import Struct


@dataclasses.dataclass(frozen=True, kw_only=True)
class DescribableLogDirTopic(Struct):
    topic: str
    partitions: list[int] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, kw_only=True)
class DescribeLogDirsRequest(Request):
    API_KEY = ApiKey.DESCRIBE_LOG_DIRS

    topics: list[DescribableLogDirTopic] | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class DescribeLogDirsPartition(Struct):
    partition_index: int
    partition_size: int
    offset_lag: int = 0
    is_future_key: bool = False
    # Keel's additions: the log end offset; and on the leader of a partition with replicas
    # being added (a reassignment), the bytes those replicas still lack (-1 otherwise).
    log_end_offset: int = -1
    reassignment_bytes_to_copy: int = -1


@dataclasses.dataclass(frozen=True, kw_only=True)
class DescribeLogDirsTopic(Struct):
    name: str
    partitions: list[DescribeLogDirsPartition] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, kw_only=True)
class DescribeLogDirsResult(Struct):
    error_code: int = 0
    log_dir: str
    topics: list[DescribeLogDirsTopic] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, kw_only=True)
class DescribeLogDirsResponse(Response):
    results: list[DescribeLogDirsResult] = dataclasses.field(default_factory=list)
