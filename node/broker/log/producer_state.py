"""Kafka's ProducerStateManager for one partition: what makes a retried produce append once.

An idempotent producer (KIP-98) stamps each batch with its producer id, its epoch and the
sequence of its first record. Per producer the partition keeps its epoch and the last five
batches it appended (their first and last sequences and offsets), as Kafka does:

- a batch that is one of those five again is a retry whose answer was lost: it is not
  appended, and its producer gets the offsets it was given the first time;
- a batch of an older epoch is a fenced producer's: INVALID_PRODUCER_EPOCH;
- a newer epoch starts again at sequence 0, else OUT_OF_ORDER_SEQUENCE_NUMBER;
- otherwise its first sequence must follow the last one appended (sequences wrap at 2^31 to
  0), else OUT_OF_ORDER_SEQUENCE_NUMBER: a batch was lost before it, and appending it would
  leave a gap the producer believes filled.

A producer the partition knows nothing of (new, or its batches gone with retention) may
start at any sequence, as Kafka accepts since KIP-360. The state is kept in snapshots beside
the log, as Kafka's (`<offset>.snapshot`: the state of every batch below that offset, written
when a segment rolls and at a clean shutdown, checksummed); when first needed it is read from
the newest snapshot and the batch headers after it (from every header when there is none),
and again after a truncation; a follower keeps it as it appends, so that a new leader
dedupes what its predecessor appended. At most `max_producers` producers are kept per
partition, the least recently appended dropped first: memory stays bounded whatever the
number of producer ids clients ask for.
"""

from __future__ import annotations

import collections
import struct
from collections.abc import Iterable
from typing import NamedTuple

import crc32c

from wire import records
from wire.errors import CorruptMessage, InvalidProducerEpoch, InvalidRecord, OutOfOrderSequence

BATCHES_RETAINED = 5
MAX_PRODUCERS = 10_000
_SEQUENCE_MODULUS = 2**31
# A snapshot: version, producer count; per producer its id, epoch and batch count, then each
# batch; the CRC-32C of all that last.
_SNAPSHOT_VERSION = 1
_SNAPSHOT_HEAD = struct.Struct(">hi")
_PRODUCER = struct.Struct(">qhb")
_BATCH = struct.Struct(">iiqq")
_CRC = struct.Struct(">I")


class BatchMetadata(NamedTuple):
    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int


class _Producer:
    __slots__ = ("batches", "epoch")

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch
        self.batches: collections.deque[BatchMetadata] = collections.deque(maxlen=BATCHES_RETAINED)


def last_sequence(header: records.BatchHeader) -> int:
    return (header.base_sequence + header.last_offset_delta) % _SEQUENCE_MODULUS


class ProducerState:
    def __init__(self, max_producers: int = MAX_PRODUCERS) -> None:
        self._producers: collections.OrderedDict[int, _Producer] = collections.OrderedDict()
        self._max = max_producers

    def __len__(self) -> int:
        return len(self._producers)

    def last_offsets(self) -> list[int]:
        """The last offset of each producer's last batch: the batches log compaction keeps,
        emptied if need be, so that this state can be read again from the log."""
        return [producer.batches[-1].last_offset for producer in self._producers.values() if producer.batches]

    def check(self, header: records.BatchHeader) -> tuple[int, int] | None:
        """Before a leader appends the batch of `header`: None to append it, or the first and
        last offsets it was given when it was appended before (a retry). Raises
        InvalidProducerEpoch, OutOfOrderSequence or InvalidRecord."""
        if header.producer_id < 0:
            return None
        if header.base_sequence < 0 or header.producer_epoch < 0:
            raise InvalidRecord("a batch with a producer id needs its epoch and base sequence")
        producer = self._producers.get(header.producer_id)
        if producer is None:
            return None
        if header.producer_epoch < producer.epoch:
            raise InvalidProducerEpoch(
                f"producer {header.producer_id} at epoch {header.producer_epoch}, "
                f"fenced by epoch {producer.epoch}"
            )
        if header.producer_epoch > producer.epoch:
            if header.base_sequence != 0:
                raise OutOfOrderSequence(
                    f"producer {header.producer_id}'s new epoch {header.producer_epoch} starts at sequence "
                    f"{header.base_sequence}, not 0"
                )
            return None
        last = last_sequence(header)
        for batch in producer.batches:
            if batch.first_sequence == header.base_sequence and batch.last_sequence == last:
                return batch.first_offset, batch.last_offset
        if producer.batches:
            expected = (producer.batches[-1].last_sequence + 1) % _SEQUENCE_MODULUS
            if header.base_sequence != expected:
                raise OutOfOrderSequence(
                    f"producer {header.producer_id} sent sequence {header.base_sequence}, expected {expected}"
                )
        return None

    def retried(self, headers: list[tuple[int, records.BatchHeader]]) -> tuple[int, int] | None:
        """`check` of an append's batches: the offsets its batch got before when it is a retry
        (Produce carries one batch per partition: a retry among other batches is refused)."""
        found = [offsets for _, header in headers if (offsets := self.check(header)) is not None]
        if not found:
            return None
        if len(headers) > 1:
            raise OutOfOrderSequence(
                "a retried batch sent with others (Produce carries one batch per partition)"
            )
        return found[0]

    def appended(self, headers: Iterable[records.BatchHeader]) -> None:
        """Batches appended, their offsets stamped (a leader's, a follower's, or the log's own
        on a rebuild)."""
        for header in headers:
            if header.producer_id < 0:
                continue
            producer = self._producers.get(header.producer_id)
            if producer is None or header.producer_epoch > producer.epoch:
                producer = self._producers[header.producer_id] = _Producer(header.producer_epoch)
            self._producers.move_to_end(header.producer_id)
            producer.batches.append(
                BatchMetadata(
                    header.base_sequence, last_sequence(header), header.base_offset, header.last_offset
                )
            )
            if len(self._producers) > self._max:
                self._producers.popitem(last=False)

    def to_snapshot(self) -> bytes:
        """The state as a snapshot file holds it (`from_snapshot` reads it back)."""
        out = bytearray(_SNAPSHOT_HEAD.pack(_SNAPSHOT_VERSION, len(self._producers)))
        for producer_id, producer in self._producers.items():
            out += _PRODUCER.pack(producer_id, producer.epoch, len(producer.batches))
            for batch in producer.batches:
                out += _BATCH.pack(*batch)
        return bytes(out + _CRC.pack(crc32c.crc32c(out)))

    @classmethod
    def from_snapshot(cls, data: bytes, max_producers: int = MAX_PRODUCERS) -> ProducerState:
        """The state a snapshot holds; CorruptMessage if it is cut short, of another version
        or fails its checksum."""
        if len(data) < _SNAPSHOT_HEAD.size + _CRC.size:
            raise CorruptMessage("a producer snapshot shorter than its header")
        body, (crc,) = data[: -_CRC.size], _CRC.unpack_from(data, len(data) - _CRC.size)
        if crc32c.crc32c(body) != crc:
            raise CorruptMessage("a producer snapshot fails its checksum")
        version, count = _SNAPSHOT_HEAD.unpack_from(body)
        if version != _SNAPSHOT_VERSION:
            raise CorruptMessage(f"a producer snapshot of version {version}")
        state = cls(max_producers)
        at = _SNAPSHOT_HEAD.size
        try:
            for _ in range(count):
                producer_id, epoch, batches = _PRODUCER.unpack_from(body, at)
                at += _PRODUCER.size
                producer = state._producers[producer_id] = _Producer(epoch)
                for _ in range(batches):
                    producer.batches.append(BatchMetadata(*_BATCH.unpack_from(body, at)))
                    at += _BATCH.size
        except struct.error:
            raise CorruptMessage("a producer snapshot cut short") from None
        return state
