"""DescribeLogDirs (35): the size of every partition replica on this broker, per log dir.

It reads the LogManager in place. That is safe without asking the replica manager: the logs
change only on the event loop's thread, and this runs between two of its steps, so a size and
a log end offset are each whole (though a partition's two may straddle an append)."""

from __future__ import annotations

from pathlib import Path

from actors.base.ports import TopicPartition
from node.broker.log.manager import LogManager
from wire.api import (
    DescribeLogDirsPartition,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    DescribeLogDirsResult,
    DescribeLogDirsTopic,
)
from wire.errors import ErrorCode


def describe_log_dirs(
    logs: LogManager, request: DescribeLogDirsRequest, bytes_to_copy: dict[TopicPartition, int]
) -> DescribeLogDirsResponse:
    """`bytes_to_copy`: the replica manager's figure for partitions it leads with replicas
    being added."""
    wanted: set[TopicPartition] | None = None
    if request.topics is not None:
        wanted = {TopicPartition(t.topic, p) for t in request.topics for p in t.partitions}
    by_dir: dict[Path, dict[str, list[DescribeLogDirsPartition]]] = {d: {} for d in logs.log_dirs}
    for tp, partition_log in sorted(logs.logs.items()):
        if wanted is not None and tp not in wanted:
            continue
        directory = partition_log.directory.parent
        by_dir.setdefault(directory, {}).setdefault(tp.topic, []).append(
            DescribeLogDirsPartition(
                partition_index=tp.partition,
                partition_size=partition_log.size,
                log_end_offset=partition_log.log_end_offset,
                reassignment_bytes_to_copy=bytes_to_copy.get(tp, -1),
            )
        )
    return DescribeLogDirsResponse(
        results=[
            DescribeLogDirsResult(
                # An offline directory is listed with KAFKA_STORAGE_ERROR, as Kafka's is.
                error_code=ErrorCode.KAFKA_STORAGE_ERROR if logs.failures.is_offline(directory) else 0,
                log_dir=str(directory),
                topics=[DescribeLogDirsTopic(name=t, partitions=ps) for t, ps in sorted(topics.items())],
            )
            for directory, topics in by_dir.items()
        ]
    )
