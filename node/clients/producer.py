"""KeelProducer: appends records to partition leaders, as Kafka's producer does.

Records are grouped per partition into record batches and sent in one Produce per leader.
Keyed records go to `murmur2(key) % partitions` (Kafka's default partitioner); records
without a key go round-robin. A send that fails with a retriable error (a moved leader, a
lost connection, a timeout) refreshes metadata and retries until `delivery_timeout` runs out:
one deadline per send for every wait in it (Kafka's delivery.timeout.ms). A topic or partition
the metadata says does not exist is raised instead of waited for (UnknownTopicError,
UnknownPartitionError). There is no idempotence: a retry after a lost answer may append a
record twice.

    async with KeelProducer("127.0.0.1:9092", acks=-1) as producer:
        offsets = await producer.send_many("orders", [(None, b"hello")])
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import logging
import time
from collections.abc import AsyncIterator

from actors.base.retry import Retry
from node.clients.closing import AsyncClosing
from node.clients.metadata import UNKNOWN_TOPIC_WAIT_S, ClusterClient
from wire import compression, records
from wire.api import ProducePartitionData, ProduceRequest, ProduceResponse, ProduceTopicData
from wire.errors import ErrorCode, WireError, for_code, is_retriable
from wire.retry import Backoff
from wire.security import PLAINTEXT_CLIENT, ClientSecurity

log = logging.getLogger(__name__)


def murmur2(data: bytes) -> int:
    """Kafka's Utils.murmur2, as a signed 32-bit int."""
    length = len(data)
    seed, m, r = 0x9747B28C, 0x5BD1E995, 24
    h = (seed ^ length) & 0xFFFFFFFF
    for i in range(0, length - length % 4, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    tail = length % 4
    base = length - tail
    if tail == 3:
        h ^= data[base + 2] << 16
    if tail >= 2:
        h ^= data[base + 1] << 8
    if tail >= 1:
        h ^= data[base]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(key: bytes, partitions: int) -> int:
    return (murmur2(key) & 0x7FFFFFFF) % partitions


@dataclasses.dataclass(frozen=True)
class Delivered:
    partition: int
    base_offset: int
    count: int


@dataclasses.dataclass
class _Delivery:
    deadline: float  # on the event loop's clock
    # Why the last attempt failed, for the error when the deadline passes.
    last_failure: tuple[ErrorCode, str] | None = None


class ProduceFailed(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(f"{message} ({code.name})")
        self.code = code


class KeelProducer(AsyncClosing):
    def __init__(
        self,
        bootstrap: str,
        *,
        acks: int = -1,
        request_timeout: float = 30.0,
        delivery_timeout: float = 120.0,
        client_id: str = "keel-producer",
        security: ClientSecurity = PLAINTEXT_CLIENT,
        compression_type: str = "none",
    ) -> None:
        if acks not in (-1, 0, 1):
            raise ValueError(f"acks must be -1 (all), 0 or 1, not {acks}")
        if compression_type not in compression.CODECS:
            raise ValueError(
                f"compression_type must be one of {', '.join(compression.CODECS)}, not {compression_type}"
            )
        self.acks = acks
        # Kafka's compression.type of a producer: each batch's records compressed with it.
        self._codec = compression.CODECS[compression_type]
        self._request_timeout = request_timeout
        self._delivery_timeout = delivery_timeout
        self._cluster = ClusterClient(
            bootstrap,
            timeout=request_timeout,
            client_id=client_id,
            # A missing topic is reported as such, well within the delivery's deadline.
            unknown_topic_wait_s=min(UNKNOWN_TOPIC_WAIT_S, delivery_timeout / 2),
            security=security,
        )
        self._round_robin = itertools.count()

    async def close(self) -> None:
        await self._cluster.close()

    async def check_topic(self, topic: str, partition: int | None = None) -> int:
        """The partition count of `topic` (Kafka's partitionsFor), once every partition has a
        leader, within `delivery_timeout`. Raises UnknownTopicError or UnknownPartitionError
        at once when the metadata says `topic` or `partition` does not exist."""
        async with self._delivery(topic) as delivery:
            return await self._partition_count(topic, [] if partition is None else [partition], delivery)

    async def send_many(
        self, topic: str, items: list[tuple[bytes | None, bytes | None]], *, partition: int | None = None
    ) -> list[Delivered]:
        """Append `items` ((key, value) pairs); one batch per partition. Returns where each
        batch landed. Raises UnknownTopicError or UnknownPartitionError at once when the
        metadata says the topic or `partition` does not exist, ProduceFailed when a batch is
        refused or not delivered within `delivery_timeout`."""
        async with self._delivery(topic) as delivery:
            count = await self._partition_count(topic, [] if partition is None else [partition], delivery)
            by_partition: dict[int, list[tuple[bytes | None, bytes | None]]] = {}
            for key, value in items:
                if partition is not None:
                    target = partition
                elif key is not None:
                    target = partition_for(key, count)
                else:
                    target = next(self._round_robin) % count
                by_partition.setdefault(target, []).append((key, value))
            now_ms = int(time.time() * 1000)
            batches = {
                p: records.build_batch(b, timestamp=now_ms, compression_codec=self._codec)
                for p, b in by_partition.items()
            }
            return await self._deliver(topic, batches, delivery)

    async def send_batches(self, topic: str, batches: dict[int, bytes]) -> list[Delivered]:
        """Send ready-made record batches, one per partition, retrying what fails."""
        async with self._delivery(topic) as delivery:
            await self._partition_count(topic, list(batches), delivery)
            return await self._deliver(topic, batches, delivery)

    @contextlib.asynccontextmanager
    async def _delivery(self, topic: str) -> AsyncIterator[_Delivery]:
        """One deadline, `delivery_timeout` from now, for everything a delivery waits on: the
        metadata, the leaders, each request and every retry (Kafka's delivery.timeout.ms)."""
        delivery = _Delivery(asyncio.get_running_loop().time() + self._delivery_timeout)
        bound = asyncio.timeout_at(delivery.deadline)
        try:
            async with bound:
                yield delivery
        except TimeoutError:
            if not bound.expired():
                raise
            code, why = delivery.last_failure or (ErrorCode.REQUEST_TIMED_OUT, "no answer")
            raise ProduceFailed(
                code, f"topic '{topic}': not delivered within {self._delivery_timeout:g} s; last error: {why}"
            ) from None

    async def _partition_count(self, topic: str, partitions: list[int], delivery: _Delivery) -> int:
        """The partition count of `topic`, once `partitions` are among them; the first time the
        topic is used, after waiting (within the delivery's deadline) for every leader."""
        if topic not in self._cluster.partition_counts:
            left = delivery.deadline - asyncio.get_running_loop().time()
            await self._cluster.wait_for_leaders(topic, left)
        return await self._cluster.check_partitions(topic, partitions)

    async def _deliver(self, topic: str, batches: dict[int, bytes], delivery: _Delivery) -> list[Delivered]:
        pending = dict(batches)
        delivered: list[Delivered] = []
        # No deadline of its own: the delivery's bounds the pauses too.
        retry = Retry(backoff=Backoff(0.05, 1.0))
        while pending:
            failures = await self._send_round(topic, pending, delivered)
            if not failures:
                break
            delivery.last_failure = next(iter(failures.values()))
            await retry.pause()
            try:
                # Fresh metadata: the moved leaders, or the fact that the topic is gone.
                await self._cluster.partition_count(topic)
            except WireError as e:
                log.debug("metadata refresh failed: %s", e.message)
            pending = {p: pending[p] for p in failures}
        return delivered

    async def _send_round(
        self, topic: str, pending: dict[int, bytes], delivered: list[Delivered]
    ) -> dict[int, tuple[ErrorCode, str]]:
        by_leader: dict[int, list[int]] = {}
        failures: dict[int, tuple[ErrorCode, str]] = {}
        for p in pending:
            leader = self._cluster.leaders.get((topic, p), (-1, -1))[0]
            if leader < 0:
                failures[p] = (ErrorCode.LEADER_NOT_AVAILABLE, f"{topic}-{p} has no leader")
            else:
                by_leader.setdefault(leader, []).append(p)

        async def to_leader(leader: int, partitions: list[int]) -> None:
            request = ProduceRequest(
                acks=self.acks,
                timeout_ms=int(self._request_timeout * 1000),
                topic_data=[
                    ProduceTopicData(
                        name=topic,
                        partition_data=[
                            ProducePartitionData(index=p, records=pending[p]) for p in partitions
                        ],
                    )
                ],
            )
            try:
                response = await self._cluster.send_to(leader, request, self._request_timeout + 5)
            except WireError as e:
                for p in partitions:
                    failures[p] = (e.code, e.message)
                return
            assert isinstance(response, ProduceResponse)
            for topic_response in response.responses:
                for answer in topic_response.partition_responses:
                    code = ErrorCode(answer.error_code)
                    if code == ErrorCode.NONE:
                        header = records.read_header(pending[answer.index])
                        delivered.append(Delivered(answer.index, answer.base_offset, header.records_count))
                    elif is_retriable(code):
                        failures[answer.index] = (code, answer.error_message or code.name)
                    else:
                        why = answer.error_message or for_code(code).message
                        raise ProduceFailed(code, f"topic '{topic}' partition {answer.index} refused: {why}")

        await asyncio.gather(*(to_leader(leader, ps) for leader, ps in by_leader.items()))
        return failures
