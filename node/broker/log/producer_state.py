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
start at any sequence, as Kafka accepts since KIP-360. The state is built from the batch
headers of the log, when it is first needed and again after a truncation (Kafka keeps
snapshots so as not to read the log; Keel reads only the headers, once), and a follower keeps
it as it appends, so that a new leader dedupes what its predecessor appended. At most
`max_producers` producers are kept per partition, the least recently appended dropped first:
memory stays bounded whatever the number of producer ids clients ask for.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable
from typing import NamedTuple

from wire import records
from wire.errors import InvalidProducerEpoch, InvalidRecord, OutOfOrderSequence

BATCHES_RETAINED = 5
MAX_PRODUCERS = 10_000
_SEQUENCE_MODULUS = 2**31


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
