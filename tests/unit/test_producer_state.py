"""Kafka's sequence arithmetic and the bound on remembered producers."""

from __future__ import annotations

import pytest

from node.broker.log.producer_state import ProducerState
from wire import records
from wire.errors import InvalidRecord, OutOfOrderSequence


def header(
    producer_id: int, sequence: int, count: int, base_offset: int, epoch: int = 0
) -> records.BatchHeader:
    return records.BatchHeader(
        base_offset=base_offset,
        batch_length=100,
        partition_leader_epoch=0,
        magic=2,
        crc=0,
        attributes=0,
        last_offset_delta=count - 1,
        base_timestamp=0,
        max_timestamp=0,
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=sequence,
        records_count=count,
    )


def test_sequences_wrap_at_two_to_the_31_to_zero() -> None:
    state = ProducerState()
    state.appended([header(1, 2**31 - 1, 2, base_offset=0)])  # sequences 2^31-1, then 0
    assert state.check(header(1, 1, 1, base_offset=-1)) is None
    with pytest.raises(OutOfOrderSequence, match="expected 1"):
        state.check(header(1, 2, 1, base_offset=-1))
    assert state.check(header(1, 2**31 - 1, 2, base_offset=-1)) == (0, 1), "the wrapped batch is a retry"


def test_only_the_last_five_batches_are_remembered() -> None:
    state = ProducerState()
    state.appended([header(1, sequence, 1, base_offset=sequence) for sequence in range(6)])
    assert state.check(header(1, 1, 1, base_offset=-1)) == (1, 1)
    with pytest.raises(OutOfOrderSequence):
        state.check(header(1, 0, 1, base_offset=-1))  # too old to be told from a gap


def test_the_least_recently_appended_producer_is_forgotten_past_the_bound() -> None:
    state = ProducerState(max_producers=3)
    state.appended([header(p, 0, 1, base_offset=p) for p in (1, 2, 3)])
    state.appended([header(1, 1, 1, base_offset=9)])  # 1 is recent again
    state.appended([header(4, 0, 1, base_offset=10)])
    assert len(state) == 3
    assert state.check(header(2, 5, 1, base_offset=-1)) is None, "2 was forgotten: any sequence"
    with pytest.raises(OutOfOrderSequence):
        state.check(header(1, 5, 1, base_offset=-1))


def test_a_producer_id_without_a_sequence_is_refused() -> None:
    with pytest.raises(InvalidRecord):
        ProducerState().check(header(1, -1, 1, base_offset=0))


def test_a_snapshot_reads_back_the_same_state_and_refuses_damage() -> None:
    from wire.errors import CorruptMessage

    state = ProducerState()
    state.appended([header(7, 0, 3, base_offset=0), header(9, 5, 1, base_offset=3, epoch=2)])
    state.appended([header(7, 3, 2, base_offset=4)])
    data = state.to_snapshot()
    again = ProducerState.from_snapshot(data)
    assert again.last_offsets() == state.last_offsets() == [3, 5]
    assert again.check(header(7, 3, 2, base_offset=-1)) == (4, 5), "a retry still answered its offsets"
    with pytest.raises(OutOfOrderSequence):
        again.check(header(7, 9, 1, base_offset=-1))
    damaged = bytearray(data)
    damaged[8] ^= 0xFF
    with pytest.raises(CorruptMessage, match="checksum"):
        ProducerState.from_snapshot(bytes(damaged))
    with pytest.raises(CorruptMessage):
        ProducerState.from_snapshot(data[:5])
