"""KeelConsumer: reads partitions from their leaders, up to the high watermark, as Kafka's
consumer does with manual assignment (no groups, no committed offsets).

Starting offsets come from ListOffsets (earliest with `from_beginning`, else latest). A
moved leader or a lost connection refreshes metadata and the fetch goes on; an offset out
of range restarts from the earliest offset still held. A topic or partition the metadata
says does not exist is raised from the first poll (UnknownTopicError, UnknownPartitionError).

    async with KeelConsumer("127.0.0.1:9092", "orders", from_beginning=True) as consumer:
        for record in await consumer.poll():
            ...
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging

from actors.base.retry import Retry
from node.clients.closing import AsyncClosing
from node.clients.metadata import ClusterClient
from wire import records
from wire.api import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    FetchTopic,
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopic,
)
from wire.errors import BrokerUnreachable, ErrorCode, WireError
from wire.retry import Backoff
from wire.security import PLAINTEXT_CLIENT, ClientSecurity

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class ConsumedRecord:
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None


class KeelConsumer(AsyncClosing):
    def __init__(
        self,
        bootstrap: str,
        topic: str,
        *,
        partitions: list[int] | None = None,
        from_beginning: bool = False,
        max_wait_ms: int = 500,
        timeout: float = 30.0,
        client_id: str = "keel-consumer",
        security: ClientSecurity = PLAINTEXT_CLIENT,
    ) -> None:
        self.topic = topic
        self._wanted = partitions
        self._from_beginning = from_beginning
        self._max_wait_ms = max_wait_ms
        self._cluster = ClusterClient(bootstrap, timeout=timeout, client_id=client_id, security=security)
        # Polls go on until the caller stops them: no deadline here.
        self._retry = Retry(backoff=Backoff(0.1, 1.0))
        # Next offset to read per partition; None until positioned.
        self.positions: dict[int, int | None] = {}
        self.high_watermarks: dict[int, int] = {}
        self._in_flight: dict[int, asyncio.Task[list[ConsumedRecord]]] = {}

    async def close(self) -> None:
        for task in self._in_flight.values():
            task.cancel()
        await asyncio.gather(*self._in_flight.values(), return_exceptions=True)
        self._in_flight.clear()
        await self._cluster.close()

    async def _assign(self) -> None:
        """Every partition of the topic, or the ones asked for; a topic or partition that does
        not exist is an UnknownTopicError or UnknownPartitionError, not a poll that returns
        nothing for ever."""
        count = await self._cluster.check_partitions(self.topic, self._wanted or [])
        for p in self._wanted if self._wanted is not None else range(count):
            self.positions.setdefault(p, None)

    async def _position(self, reset_to: int) -> None:
        unpositioned = [p for p, offset in self.positions.items() if offset is None]
        for p in unpositioned:
            leader = self._cluster.leaders.get((self.topic, p), (-1, -1))[0]
            request = ListOffsetsRequest(
                topics=[
                    ListOffsetsTopic(
                        name=self.topic,
                        partitions=[ListOffsetsPartition(partition_index=p, timestamp=reset_to)],
                    )
                ]
            )
            response = await self._cluster.send_to(leader, request)
            assert isinstance(response, ListOffsetsResponse)
            answer = response.topics[0].partitions[0]
            if answer.error_code:
                raise WireError(f"ListOffsets for {self.topic}-{p}: {ErrorCode(answer.error_code).name}")
            self.positions[p] = answer.offset

    async def poll(self) -> list[ConsumedRecord]:
        """The next records of every assigned partition (waiting up to max_wait_ms)."""
        try:
            if not self.positions:
                await self._assign()
            await self._position(EARLIEST_TIMESTAMP if self._from_beginning else LATEST_TIMESTAMP)
            fetched = await self._fetch_round()
            self._retry.succeeded()
            return fetched
        except WireError as e:
            if isinstance(e, BrokerUnreachable) and not self.positions:
                raise  # never reached a broker: nothing to wait for
            log.debug("poll failed, refreshing metadata: %s", e.message)
            await self._retry.pause()
            with contextlib.suppress(WireError):
                await self._cluster.refresh([self.topic])
            return []

    async def _fetch_round(self) -> list[ConsumedRecord]:
        """One fetch in flight per leader, each on its own schedule (as Kafka's consumer):
        return what the first answers bring instead of waiting for every leader's long poll."""
        by_leader: dict[int, list[int]] = {}
        for p in self.positions:
            leader = self._cluster.leaders.get((self.topic, p), (-1, -1))[0]
            by_leader.setdefault(leader, []).append(p)
        if -1 in by_leader:
            await self._cluster.refresh([self.topic])
            by_leader.pop(-1)
        for leader, partitions in by_leader.items():
            if leader not in self._in_flight:
                self._in_flight[leader] = asyncio.create_task(self._fetch_from(leader, partitions))
        if not self._in_flight:
            return []
        await asyncio.wait(self._in_flight.values(), return_when=asyncio.FIRST_COMPLETED)
        out: list[ConsumedRecord] = []
        for leader, task in list(self._in_flight.items()):
            if not task.done():
                continue
            del self._in_flight[leader]
            error = task.exception()
            if error is None:
                out.extend(task.result())
            elif isinstance(error, WireError):
                await self._cluster.refresh([self.topic])
            else:
                raise error
        return out

    async def _fetch_from(self, leader: int, partitions: list[int]) -> list[ConsumedRecord]:
        request = FetchRequest(
            max_wait_ms=self._max_wait_ms,
            topics=[
                FetchTopic(
                    topic=self.topic,
                    partitions=[
                        FetchPartition(
                            partition=p,
                            fetch_offset=self.positions[p] or 0,
                            current_leader_epoch=self._cluster.leaders[(self.topic, p)][1],
                        )
                        for p in partitions
                    ],
                )
            ],
        )
        response = await self._cluster.send_to(
            leader, request, self._cluster.timeout + self._max_wait_ms / 1000
        )
        assert isinstance(response, FetchResponse)
        out = []
        refresh = False
        for topic in response.responses:
            for data in topic.partitions:
                p = data.partition_index
                code = ErrorCode(data.error_code)
                if code == ErrorCode.OFFSET_OUT_OF_RANGE:
                    log.warning(
                        "%s-%d: offset %s out of range; restarting from the earliest",
                        self.topic,
                        p,
                        self.positions[p],
                    )
                    self.positions[p] = None
                    self._from_beginning = True
                    continue
                if code != ErrorCode.NONE:
                    refresh = True
                    continue
                self.high_watermarks[p] = data.high_watermark
                position = self.positions[p] or 0
                for record in records.records(data.records):
                    # A fetch sent before a leader change may overlap a newer one: skip
                    # what was already returned.
                    if record.offset >= position:
                        out.append(
                            ConsumedRecord(p, record.offset, record.timestamp, record.key, record.value)
                        )
                        self.positions[p] = record.offset + 1
                # Past each batch's last offset, as Kafka's consumer: a compacted batch may end
                # in offsets with no record left, or hold none (a producer's last batch).
                for _, header in records.batches(data.records, check_crc=False):
                    if header.next_offset > (self.positions[p] or 0):
                        self.positions[p] = header.next_offset
        if refresh:
            await self._cluster.refresh([self.topic])
        return out
