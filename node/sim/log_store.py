"""Partition logs in memory: the `PartitionLog` and `LogStore` ports without files, for the
simulation. A simulated broker that crashes keeps its `MemoryLogStore`, as a `kill -9` keeps
the page cache, and the high watermarks last checkpointed; what it held only in memory (its
replica manager's state) is gone.

The log is a list of whole batches, each stamped with its offsets and leader epoch exactly
as `node.broker.log.log.Log` stamps them, with the same leader-epoch cache
(`node.broker.log.epoch_cache`, kept in memory). `tests/contract/test_partition_log.py` runs the
same operations on both and compares what they answer.
"""

from __future__ import annotations

import asyncio
import bisect
import itertools
from collections.abc import Mapping

from actors.base.ports import TopicPartition
from node.broker.log.config import LogConfig
from node.broker.log.epoch_cache import LeaderEpochCache
from node.broker.log.producer_state import ProducerState
from node.broker.log.validator import validate_as_leader, validate_batches
from wire import records
from wire.errors import CorruptMessage, ErrorCode, OffsetOutOfRange

_GENERATIONS = itertools.count()


class MemoryLog:
    def __init__(self, tp: TopicPartition, config: LogConfig) -> None:
        self.tp = tp
        self.config = config
        self.epochs = LeaderEpochCache(None)
        self._start = 0
        # Whole batches in offset order, and the base offset of each.
        self._batches: list[bytes] = []
        self._bases: list[int] = []
        self._end = 0
        # A new number at every change, unique among all logs (one deleted and made again
        # starts afresh too), so that a checker can tell the log has not moved.
        self.generation = next(_GENERATIONS)
        self._scrub_slot = 0
        # Every record's value by offset, read from the first `_values_read` batches: the
        # checks after every step read them, and a log mostly only grows.
        self._values: dict[int, bytes | None] = {}
        self._values_read = 0
        # As the file log's: built from the batch headers when first needed, dropped on truncation.
        self._producers: ProducerState | None = None

    @property
    def log_start_offset(self) -> int:
        return self._start

    @property
    def log_end_offset(self) -> int:
        return self._end

    @property
    def latest_epoch(self) -> int:
        return self.epochs.latest_epoch

    @property
    def min_insync_replicas(self) -> int:
        return self.config.min_insync_replicas

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        return self.epochs.end_offset_for(epoch, self._end)

    def assign_epoch_start_offset(self, epoch: int, start_offset: int) -> None:
        self.epochs.assign(epoch, start_offset)

    def size_from(self, offset: int) -> int:
        if offset >= self._end:
            return 0
        slot = max(bisect.bisect_right(self._bases, offset) - 1, 0)
        return sum(len(b) for b in self._batches[slot:])

    # --- appends ---

    def append_as_leader(self, data: bytes, leader_epoch: int) -> tuple[int, int]:
        buffer = bytearray(data)
        headers = validate_as_leader(buffer, self.config.max_message_bytes)
        if any(header.producer_id >= 0 for _, header in headers):
            retried = self.producer_state().retried(headers)
            if retried is not None:
                return retried
        first = offset = self._end
        for position, header in headers:
            records.stamp(buffer, position, offset, leader_epoch)
            offset += header.last_offset_delta + 1
        if self.epochs.latest_epoch != leader_epoch:
            self.epochs.assign(leader_epoch, first)
        self._write(buffer)
        return first, offset - 1

    def producer_state(self) -> ProducerState:
        if self._producers is None:
            self._producers = ProducerState()
            self._producers.appended(records.read_header(batch) for batch in self._batches)
        return self._producers

    def flush_waiter(self, offset: int) -> asyncio.Future[ErrorCode] | None:
        return None  # memory is never flushed

    def append_as_follower(self, data: bytes | memoryview) -> int:
        headers = validate_batches(data, self.config.max_message_bytes)
        expected = self._end
        for _, header in headers:
            if header.base_offset != expected:
                raise CorruptMessage(
                    f"{self.tp}: batch at offset {header.base_offset} does not follow the log end {expected}"
                )
            expected = header.next_offset
            if header.partition_leader_epoch > self.epochs.latest_epoch:
                self.epochs.assign(header.partition_leader_epoch, header.base_offset)
        self._write(bytes(data))
        return len(headers)

    def _write(self, data: bytes | bytearray) -> None:
        self.generation = next(_GENERATIONS)
        view = memoryview(bytes(data))
        for position, header in records.batches(view, check_crc=False):
            self._batches.append(bytes(view[position : position + header.size]))
            self._bases.append(header.base_offset)
            self._end = header.next_offset
            if self._producers is not None:
                self._producers.appended([header])

    # --- reads ---

    def read(self, offset: int, max_bytes: int, max_offset: int | None = None) -> bytes:
        if offset < self._start or offset > self._end:
            raise OffsetOutOfRange(f"{self.tp}: offset {offset} is outside {self._start}..{self._end}")
        limit = self._end if max_offset is None else min(max_offset, self._end)
        if offset >= limit:
            return b""
        out = bytearray()
        for slot in range(max(bisect.bisect_right(self._bases, offset) - 1, 0), len(self._batches)):
            batch = self._batches[slot]
            header = records.read_header(batch)
            if header.last_offset >= limit:
                break
            if out and len(out) + len(batch) > max_bytes:
                break
            out += batch
        return bytes(out)

    def scrub(self, max_bytes: int) -> int:
        """Check the CRC of about `max_bytes` of batches from where the last scrub stopped,
        wrapping to the log start (memory is never damaged, but the walk is the file log's)."""
        checked = 0
        for _ in range(len(self._batches)):
            if checked >= max_bytes:
                break
            self._scrub_slot %= len(self._batches)
            batch = self._batches[self._scrub_slot]
            records.validate(batch)
            checked += len(batch)
            self._scrub_slot += 1
        return checked

    @property
    def scrubbed_to_end(self) -> bool:
        return self._scrub_slot >= len(self._batches)

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int, int] | None:
        for batch in self._batches:
            header = records.read_header(batch)
            found = records.record_at_or_after(batch, header, timestamp, first_offset=self._start)
            if found is not None:
                return (*found, header.partition_leader_epoch)
        return None

    def offset_for_max_timestamp(self) -> tuple[int, int, int] | None:
        best: tuple[int, bytes] | None = None
        for batch in self._batches:
            header = records.read_header(batch)
            if best is None or header.max_timestamp > best[0]:
                best = header.max_timestamp, batch
        if best is None:
            return None
        header = records.read_header(best[1])
        found = records.record_at_or_after(best[1], header, best[0], first_offset=self._start)
        return None if found is None else (*found, header.partition_leader_epoch)

    def values(self) -> Mapping[int, bytes | None]:
        """Every record's value by offset (the simulation's checks read them): the batches
        appended since the last call are read, not the whole log again."""
        for batch in self._batches[self._values_read :]:
            for record in records.records(batch):
                self._values[record.offset] = record.value
        self._values_read = len(self._batches)
        return self._values

    def _forget_values(self) -> None:
        self._values = {}
        self._values_read = 0

    # --- truncation ---

    def truncate_to(self, offset: int) -> None:
        if offset >= self._end:
            self.epochs.truncate_from_end(self._end)
            return
        if offset <= self._start:
            self.truncate_fully_and_start_at(offset if offset >= 0 else self._start)
            return
        self.generation = next(_GENERATIONS)
        self._forget_values()
        # The batch holding `offset` goes whole, as a segment's truncateTo drops it on file.
        keep = max(bisect.bisect_right(self._bases, offset) - 1, 0)
        self._end = self._bases[keep] if keep < len(self._bases) else self._end
        del self._batches[keep:], self._bases[keep:]
        self.epochs.truncate_from_end(self._end)
        self._producers = None

    @property
    def batch_count(self) -> int:
        return len(self._batches)

    def lose_tail(self, kept: int) -> None:
        """A power loss: every batch after the first `kept` is gone, as if never written."""
        if kept < len(self._bases):
            self.truncate_to(self._bases[kept])

    def advance_log_start_offset(self, offset: int) -> bool:
        offset = min(offset, self._end)
        if offset <= self._start:
            return False
        self.generation = next(_GENERATIONS)
        while len(self._bases) > 1 and self._bases[1] <= offset:
            del self._batches[0], self._bases[0]
        self._start = offset
        self._forget_values()
        self.epochs.truncate_from_start(offset)
        return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self.generation = next(_GENERATIONS)
        self._forget_values()
        self._batches, self._bases = [], []
        self._start = self._end = offset
        self.epochs.clear()
        self._producers = None


class MemoryLogStore:
    """Every log of one simulated broker, and its high-watermark checkpoint."""

    def __init__(self, defaults: LogConfig | None = None) -> None:
        self.defaults = defaults or LogConfig()
        self.logs: dict[TopicPartition, MemoryLog] = {}
        self._high_watermarks: dict[TopicPartition, int] = {}

    def get(self, tp: TopicPartition) -> MemoryLog | None:
        return self.logs.get(tp)

    def get_or_create(self, tp: TopicPartition, topic_configs: Mapping[str, str]) -> MemoryLog:
        config = self.defaults.with_topic_configs(topic_configs)
        existing = self.logs.get(tp)
        if existing is not None:
            existing.config = config
            return existing
        created = self.logs[tp] = MemoryLog(tp, config)
        return created

    def delete(self, tp: TopicPartition) -> None:
        self.logs.pop(tp, None)
        self._high_watermarks.pop(tp, None)

    def checkpointed_high_watermark(self, tp: TopicPartition) -> int:
        return self._high_watermarks.get(tp, 0)

    async def checkpoint_high_watermarks(self, high_watermarks: Mapping[TopicPartition, int]) -> None:
        self._high_watermarks.update(high_watermarks)
