"""`__consumer_offsets` as the group coordinator's store (actors/group/coordinator.py's
`OffsetsLog`): appends go through the replica manager as a produce with acks=all, so they are
replicated, fenced and answered as any other; loads read this broker's replica of a
partition from its start to its end (a new leader's whole log, as Kafka's coordinator loads
it, not only up to a high watermark that may lag behind).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from actors.base.clock import Clock
from actors.base.ports import LogStore, TopicPartition
from actors.group.coordinator import OFFSETS_TOPIC
from actors.replica.handle import ReplicaManagerHandle
from wire import records
from wire.api import ProducePartitionData, ProduceRequest, ProduceTopicData
from wire.errors import ErrorCode

_READ_CHUNK = 1024 * 1024

# The topic's own configs, as Kafka creates it: compacted, segments of 100 MiB.
OFFSETS_TOPIC_CONFIGS = {"cleanup.policy": "compact", "segment.bytes": str(100 * 1024 * 1024)}


class OffsetsTopicLog:
    def __init__(
        self, replica_manager: ReplicaManagerHandle, logs: LogStore, clock: Clock, timeout_ms: int
    ) -> None:
        self._replica_manager = replica_manager
        self._logs = logs
        self._clock = clock
        self._timeout_ms = timeout_ms

    async def append(self, partition: int, entries: Sequence[tuple[bytes, bytes | None]]) -> ErrorCode:
        batch = records.build_batch(entries, timestamp=self._clock.wall_ms())
        answer = await self._replica_manager.produce(
            ProduceRequest(
                acks=-1,
                timeout_ms=self._timeout_ms,
                topic_data=[
                    ProduceTopicData(
                        name=OFFSETS_TOPIC,
                        partition_data=[ProducePartitionData(index=partition, records=batch)],
                    )
                ],
            )
        )
        if answer.error_code:
            return ErrorCode(answer.error_code)
        return ErrorCode(answer.responses[0].partition_responses[0].error_code)

    async def read(self, partition: int) -> list[tuple[bytes | None, bytes | None]]:
        log = self._logs.get(TopicPartition(OFFSETS_TOPIC, partition))
        if log is None:
            return []
        entries: list[tuple[bytes | None, bytes | None]] = []
        offset, end = log.log_start_offset, log.log_end_offset
        while offset < end:
            data = log.read(offset, _READ_CHUNK)
            if not data:
                break
            last = None
            for _, header in records.batches(data):
                last = header
            if last is None:
                break
            entries.extend((r.key, r.value) for r in records.records(data))
            offset = last.next_offset
            await asyncio.sleep(0)  # a large partition loads between other work
        return entries
